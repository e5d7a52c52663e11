"""Entry point of the ``sessiond`` command: dispatch to one module per subcommand."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from .parser import run

    return run(sys.argv[1:] if argv is None else argv)
