"""The argument parser of the ``sessiond`` command (filled in per subcommand)."""

from __future__ import annotations

import argparse

from sessiond._version import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sessiond", description=__doc__)
    parser.add_argument("--version", action="version", version=f"sessiond {__version__}")
    return parser


def run(argv: list[str]) -> int:
    parser = build_parser()
    parser.parse_args(argv)
    parser.print_help()
    return 0
