"""The pruned-output archive beside an oh-my-pi session: ``<session>.pruned``, where the
original lines of pruned tool results are copied before the file is rewritten.

It is opened like every file beside a session (``safe_files``): a link, a FIFO or a
file others can write, planted at its name, is refused. It is sessiond's own: a new one
starts with a line saying so, and a file at its name that sessiond did not make (the
user's own) is refused (``notOurs``) and left as it is.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

import msgspec

from sessiond.errors import StorageError

from .fileio import fsync_directory, write_all
from .safe_files import open_own_sidecar

# The first line of an archive sessiond makes.
ARCHIVE_MARK: Final = b'{"type":"sessiond.prunedOutputs","version":1}\n'


def archive_path(session: Path) -> Path:
    return session.with_name(session.name + ".pruned")


def archive_lines(path: Path, lines: list[bytes]) -> None:
    """Append ``lines`` to the archive at ``path`` (made if absent), durably (file work;
    any thread)."""
    try:
        fd = open_own_sidecar(path, "pruned-output archive", ARCHIVE_MARK, _is_archive)
        try:
            write_all(fd, b"".join(line + b"\n" for line in lines))
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise StorageError(
            f"cannot write pruned outputs to {path}: {exc.strerror or exc}", path=str(path)
        ) from None
    fsync_directory(path.parent)


def _is_archive(first_line: bytes) -> bool:
    """An archive's first line: the mark, or (older archives had none) an entry's line."""
    if first_line + b"\n" == ARCHIVE_MARK:
        return True
    try:
        value = msgspec.json.decode(first_line)
    except (msgspec.DecodeError, RecursionError):
        return False
    return (
        isinstance(value, dict)
        and isinstance(value.get("type"), str)
        and isinstance(value.get("id"), str)
    )
