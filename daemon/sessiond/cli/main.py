"""Entry point of the ``sessiond`` command: dispatch to one module per subcommand."""

from __future__ import annotations

import gc
import sys


def main(argv: list[str] | None = None) -> int:
    """Run the command; the process is meant to end right after."""
    from .parser import run

    status = run(sys.argv[1:] if argv is None else argv)
    # What the command built goes with the process. Collecting it at exit would cost more
    # than the work: a 100k-entry session's index is a million objects, some of them in
    # reference cycles (25 ms of a 0.2 s reopen). Frozen, they are left to the OS; exit
    # handlers and the flushing of open files still run.
    gc.freeze()
    return status
