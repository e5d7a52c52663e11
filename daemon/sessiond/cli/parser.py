"""The ``sessiond`` command line: one module per subcommand, imported only when it runs.

A command's module imports what the command needs (the store, the daemon, asyncio), so
importing every module to build the parser would make ``sessiond --version`` and every
command pay for all of them. The table below names each command's module and its line in
``sessiond --help``; only the module of the command being run is imported, to declare
its arguments and run it.
"""

from __future__ import annotations

import argparse
import importlib
from typing import NamedTuple

from sessiond._version import __version__

DESCRIPTION = (
    "sessiond owns LLM coding-agent sessions (pi's JSONL session tree): it builds "
    "the context, compacts old history, navigates branches, and serves all of it "
    "to editors and agents over JSON-RPC."
)


class Command(NamedTuple):
    name: str
    module: str  # in sessiond.cli
    help: str
    # The module's function that declares the command's arguments (and its handler).
    declare: str = "add_arguments"


COMMANDS = (
    Command("serve", "serve_cmd", "run the daemon (JSON-RPC over --stdio, --socket or --tcp)"),
    Command(
        "demo", "demo_cmd", "run the daemon's main job on the bundled sample session (offline)"
    ),
    Command("context", "context_cmd", "print the LLM context at the leaf (or another entry)"),
    Command(
        "tree", "tree_cmd", "print the session tree (branches, labels, compactions, active path)"
    ),
    Command("info", "info_cmd", "header, counts, leaf, context tokens and the recovery report"),
    Command(
        "compact",
        "compact_cmd",
        "summarize old history into a compaction entry (or --dry-run to see the plan)",
    ),
    Command("import", "import_cmd", "convert another agent's transcript into a pi session file"),
    Command(
        "schema", "schema_cmd", "print the protocol's JSON Schema (generated from the wire types)"
    ),
    Command(
        "navigate",
        "navigate_cmd",
        "move to another point of the tree, optionally summarizing the branch left",
        "add_navigate_arguments",
    ),
    Command(
        "branch-plan",
        "navigate_cmd",
        "show what navigating to TARGET would summarize, without a model",
        "add_plan_arguments",
    ),
)


def build_parser(argv: list[str]) -> argparse.ArgumentParser:
    """The parser for ``argv``: every command is listed, and the one ``argv`` names (its
    first argument that is not an option: ``sessiond`` itself takes none with a value)
    has its arguments declared."""
    chosen = next((arg for arg in argv if not arg.startswith("-")), None)
    parser = argparse.ArgumentParser(prog="sessiond", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"sessiond {__version__}")
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND")
    for command in COMMANDS:
        subparser = subparsers.add_parser(command.name, help=command.help)
        if command.name == chosen:
            module = importlib.import_module(f"{__package__}.{command.module}")
            getattr(module, command.declare)(subparser)
    return parser


def run(argv: list[str]) -> int:
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    from .common import run_command

    return run_command(handler, args)
