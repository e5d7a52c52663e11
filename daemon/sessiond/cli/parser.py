"""The ``sessiond`` command line: one module per subcommand."""

from __future__ import annotations

import argparse

from sessiond._version import __version__

from . import (
    compact_cmd,
    context_cmd,
    demo_cmd,
    import_cmd,
    info_cmd,
    navigate_cmd,
    schema_cmd,
    serve_cmd,
    tree_cmd,
)
from .common import run_command

DESCRIPTION = (
    "sessiond owns LLM coding-agent sessions (pi's JSONL session tree): it builds "
    "the context, compacts old history, navigates branches, and serves all of it "
    "to editors and agents over JSON-RPC."
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sessiond", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"sessiond {__version__}")
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND")
    for module in (
        serve_cmd,
        demo_cmd,
        context_cmd,
        tree_cmd,
        info_cmd,
        compact_cmd,
        import_cmd,
        schema_cmd,
    ):
        module.add_parser(subparsers)
    navigate_cmd.add_parsers(subparsers)
    return parser


def run(argv: list[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    return run_command(handler, args)
