"""The pruned-output archive beside an oh-my-pi session: ``<session>.pruned``, where the
original lines of pruned tool results are copied before the file is rewritten, and
from where they are read back (``read_original``).

It is opened like every file beside a session (``safe_files``): a link, a FIFO or a
file others can write, planted at its name, is refused. It is sessiond's own: a new one
starts with a line saying so, and a file at its name that sessiond did not make (the
user's own) is refused (``notOurs``) and left as it is, by the writer and the reader
alike. Reading never trusts the archive more than that: it was beside the session, so
it may have been grown or edited by another program. Lines longer than
``MAX_LINE_BYTES`` are skipped unread, as the session's reader skips them; a line is
given back only as the original of an entry whose keys it repeats.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

import msgspec

from sessiond.core.jsjson import replace_lone_surrogates
from sessiond.errors import OriginalUnavailableError, SessiondError, StorageError

from .fileio import fsync_directory, write_all
from .lines import MAX_LINE_BYTES, read_lines
from .safe_files import (
    open_own_sidecar,
    open_regular,
    own_sidecar_status,
    refuse_writable_by_others,
)

# The first line of an archive sessiond makes.
ARCHIVE_MARK: Final = b'{"type":"sessiond.prunedOutputs","version":1}\n'


_WHAT: Final = "pruned-output archive"


def archive_path(session: Path) -> Path:
    return session.with_name(session.name + ".pruned")


def archive_lines(path: Path, lines: list[bytes]) -> None:
    """Append ``lines`` to the archive at ``path`` (made if absent), durably (file work;
    any thread)."""
    try:
        fd = open_own_sidecar(path, _WHAT, ARCHIVE_MARK, _is_archive)
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


class _MessageKeys(msgspec.Struct, rename="camel"):
    role: object = None
    tool_call_id: object = None
    pruned_at: object = None


class _LineKeys(msgspec.Struct, rename="camel"):
    id: object = None
    type: object = None
    parent_id: object = None
    # Left as JSON text, decoded on its own: its content is skipped, never built.
    message: msgspec.Raw = msgspec.Raw()


_LINE_KEYS: Final = msgspec.json.Decoder(_LineKeys)
_MESSAGE_KEYS: Final = msgspec.json.Decoder(_MessageKeys)


@dataclass(frozen=True)
class CopyKeys:
    """What an archived line must repeat of the entry to be its original: pruning changes
    a tool result's content and sets its ``prunedAt``, nothing else."""

    entry_id: str
    type: object
    parent_id: object
    role: object
    tool_call_id: object


def _keys(line: bytes) -> tuple[CopyKeys, bool] | None:
    """The keys of an entry's line and whether its message carries ``prunedAt``; None for
    a line that is not a JSON entry with an id and a message object. The content is
    skipped, not decoded."""
    try:
        keys = _LINE_KEYS.decode(line)
        if not isinstance(keys.id, str) or not keys.message:
            return None
        message = _MESSAGE_KEYS.decode(keys.message)
    except (msgspec.DecodeError, RecursionError):
        return None
    copy = CopyKeys(keys.id, keys.type, keys.parent_id, message.role, message.tool_call_id)
    return copy, message.pruned_at is not None


def pruned_keys(line: bytes) -> CopyKeys | None:
    """The keys of an entry pruned in place (its message carries ``prunedAt``), whose
    original is in the archive; None for any other entry."""
    found = _keys(line)
    return found[0] if found is not None and found[1] else None


UnavailableReason = Literal["noArchive", "notArchived", "mismatch", "lineTooLong"]


def read_original(path: Path, keys: CopyKeys) -> bytes:
    """The newest line of the archive at ``path`` that is the original of the entry
    ``keys`` describes, as it was written (file work of the archive's size; any thread).

    ``InvalidSessionFileError`` when the file is refused (as the writer refuses it, but
    only read: a link, not a regular file, not the user's or not an archive, other
    names, writable by others); ``OriginalUnavailableError`` when no line is."""
    try:
        fd = open_regular(path, os.O_RDONLY, what=_WHAT)
    except FileNotFoundError:
        raise _unavailable(path, keys, "noArchive") from None
    except OSError as exc:
        raise _unreadable(path, exc) from None
    try:
        return _search(fd, path, keys)
    except SessiondError:
        raise
    except OSError as exc:
        raise _unreadable(path, exc) from None
    finally:
        os.close(fd)


def _search(fd: int, path: Path, keys: CopyKeys) -> bytes:
    status = own_sidecar_status(fd, path, _WHAT, _is_archive)
    refuse_writable_by_others(status, path, _WHAT)
    # A line holding the id's JSON is decoded; the others are only searched.
    needle = msgspec.json.encode(keys.entry_id)
    if b"\\" in needle:
        needle = b""  # an escaped id may be spelled otherwise: decode every line
    found: bytes | None = None
    mismatched = overlong = 0
    # An older archive has no mark: its first line is already an original.
    for _offset, data, _length in read_lines(fd, status.st_size):
        if data is None:
            overlong += 1  # longer than MAX_LINE_BYTES: never read
            continue
        if needle not in data:
            continue
        line = _keys(data)
        if line is None or line[0].entry_id != keys.entry_id:
            continue  # another entry's line that mentions the id
        if line[0] == keys and not line[1] and _is_utf8(data):
            found = data
        else:
            mismatched += 1
    if found is not None:
        return replace_lone_surrogates(found)
    reason: UnavailableReason = (
        "lineTooLong" if overlong else "mismatch" if mismatched else "notArchived"
    )
    raise _unavailable(path, keys, reason)


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


_EXPLAINED: Final[dict[UnavailableReason, str]] = {
    "noArchive": "there is no pruned-output archive beside the session",
    "notArchived": "the pruned-output archive has no line for it",
    "mismatch": "the pruned-output archive's lines with its id are not its original "
    "(another type, parent, role or tool call)",
    "lineTooLong": f"the pruned-output archive has no line for it but lines longer than "
    f"{MAX_LINE_BYTES} bytes, which are not read",
}


def _unavailable(path: Path, keys: CopyKeys, reason: UnavailableReason) -> OriginalUnavailableError:
    return OriginalUnavailableError(
        f"the original of entry {keys.entry_id} cannot be read back: {_EXPLAINED[reason]}",
        reason=reason,
        entryId=keys.entry_id,
        path=str(path),
    )


def _unreadable(path: Path, exc: OSError) -> StorageError:
    return StorageError(f"cannot read {path}: {exc.strerror or exc}", path=str(path))
