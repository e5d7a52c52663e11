"""oh-my-pi's title line in a file the store holds: renaming, and reading it again.

oh-my-pi renames a session (``setSessionName``) by appending a ``title_change`` entry
and then writing the new 256-byte title line over the old one, in place; its files have
no ``session_info``. sessiond does the same through ``session/setName`` (as the user's
choice, ``source: "user"``), so oh-my-pi reads the name it wrote. A first line that is
not exactly 256 bytes (or follows a byte-order mark) is not overwritten in place: the
file is rewritten atomically with the new line, every other byte kept.

Another program's rename shows up as its ``title_change`` appended; the store then
reads the title line again (``reread``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import msgspec

from sessiond.core.dialect import dialect_for
from sessiond.core.entries import ENTRY_TYPES, Entry
from sessiond.core.title_slot import (
    TITLE_SLOT_BYTES,
    InvalidTitleSlot,
    TitleSlot,
    claims_title_slot,
    clean_title,
    parse_title_slot,
    serialize_title_slot,
)
from sessiond.errors import InvalidParamsError, StorageError

from .fileio import AppendFile, atomic_write
from .lines import read_chunks
from .safe_files import open_regular

if TYPE_CHECKING:
    from .session import SessionStore


def rename(store: SessionStore, name: str) -> Entry:
    """oh-my-pi's rename: a ``title_change`` entry, then the title line rewritten."""
    slot = store.title_slot
    assert slot is not None
    title = clean_title(name)
    if not title:
        raise InvalidParamsError(
            "name must not be empty (oh-my-pi turns control characters into spaces and "
            "trims the name)",
            name=name,
        )
    body: dict[str, object] = {"type": "title_change", "title": title, "source": "user"}
    if slot.title:
        body["previousTitle"] = slot.title
    entry = store.append_entries([body], types=ENTRY_TYPES)[0]
    line = serialize_title_slot(title, "user", entry.timestamp)
    # A session not written yet starts with this title line when it is (``first_line``).
    if store.persisted and slot.length == TITLE_SLOT_BYTES and not store.recovery.byte_order_mark:
        _overwrite(store, line)
    elif store.persisted:
        _rewrite_first_line(store, line, slot.length)
    store.title_slot = TitleSlot(
        title=title, updated_at=entry.timestamp, source="user", length=len(line)
    )
    if store._ledger is not None:
        store._ledger.title_slot = store.title_slot
    return entry


def start(store: SessionStore, title: str, source: str | None) -> None:
    """Make a new, unwritten store an oh-my-pi session that starts with this title."""
    line = serialize_title_slot(title, source, store.header.timestamp)
    store.title_slot = parse_title_slot(msgspec.json.decode(line[:-1]), len(line))
    store.dialect = dialect_for(True)
    store._view = store._new_view()
    store._follower.skip_first = len(line)


def first_line(store: SessionStore) -> bytes:
    """What a new file starts with before its header: the title line, if it has one."""
    slot = store.title_slot
    if slot is None:
        return b""
    return serialize_title_slot(slot.title, slot.source, slot.updated_at)


def _overwrite(store: SessionStore, line: bytes) -> None:
    """The new title line over the old one, in place (same length)."""
    try:
        fd = open_regular(store.path, os.O_WRONLY)
        try:
            written = os.pwrite(fd, line, 0)
            if written != len(line):
                raise OSError(f"short write ({written} of {len(line)} bytes)")
            if store.storage.fsync == "always":
                os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise StorageError(
            f"cannot write the title line of {store.path}: {exc}", path=str(store.path)
        ) from None
    store._follower.saw(store._reader(), store._size)


def _rewrite_first_line(store: SessionStore, line: bytes, old_length: int) -> None:
    """The file with its first line replaced, through an atomic rewrite."""
    store.sync()
    reader = store._reader()

    def chunks() -> Iterator[bytes]:
        yield line
        for _, chunk in read_chunks(reader, old_length, store._size):
            yield chunk

    if store._append is not None:
        store._append.close()
        store._append = None
    mode = os.fstat(reader).st_mode & 0o777
    atomic_write(store.path, chunks(), mode=mode)
    shift = len(line) - old_length
    for record in store._records:
        if record.offset >= 0:
            record.offset += shift
    store._size += shift
    os.close(reader)
    store._read_fd = None
    store._append = AppendFile(store.path)
    # The lines moved: the next open scans afresh.
    store._ledger = None
    store.recovery.byte_order_mark = False
    store._follower.skip_first = len(line)
    store._follower.saw(store._reader(), store._size)


def reread(store: SessionStore, data: bytes | None = None) -> None:
    """The title line as the file has it now (another program may have renamed the
    session): ``data``, the line's bytes read already (a daemon reads them where it reads
    the lines appended, in a worker thread), or read here. A line that is no longer a
    valid title line of the same length is left as last read: the store's offsets depend
    on that length, and a rewrite of the whole file is noticed as such."""
    slot = store.title_slot
    if slot is None:
        return
    if data is None:
        try:
            data = os.pread(store._reader(), slot.length, 0)
        except (OSError, StorageError):
            return
    if len(data) != slot.length or not data.endswith(b"\n"):
        return
    try:
        value = msgspec.json.decode(data[:-1])
        if claims_title_slot(value):
            store.title_slot = parse_title_slot(value, slot.length)
    except (msgspec.DecodeError, InvalidTitleSlot, RecursionError):
        return
