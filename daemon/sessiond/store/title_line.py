"""oh-my-pi's title line in a file the store holds: renaming, and reading it again.

oh-my-pi renames a session (``setSessionName``) by appending a ``title_change`` entry
and then writing the new 256-byte title line over the old one, in place; its files have
no ``session_info``. sessiond does the same through ``session/setName`` (as the user's
choice, ``source: "user"``), so oh-my-pi reads the name it wrote. A first line that is
not exactly 256 bytes (or follows a byte-order mark) is not overwritten in place: the
file is rewritten atomically with the new line, every other byte kept
(``rewriting.rewrite_title``, file work a daemon does in a worker thread).

Another program's rename shows up as its ``title_change`` appended; the store then
reads the title line again (``reread``).
"""

from __future__ import annotations

import msgspec

from sessiond.core.title_slot import (
    TITLE_SLOT_BYTES,
    InvalidTitleSlot,
    TitleSlot,
    claims_title_slot,
    clean_title,
    parse_title_slot,
    serialize_title_slot,
)
from sessiond.errors import InvalidParamsError
from sessiond.wire.recovery import RecoveryReport

from .foreign_writes import ForeignWrites
from .ledger import Ledger
from .session_file import SessionFile


def rename_body(slot: TitleSlot, name: str) -> dict[str, object]:
    """The ``title_change`` entry that renames the session (``InvalidParamsError`` for a
    name that is empty once cleaned)."""
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
    return body


def in_place(slot: TitleSlot, file: SessionFile, recovery: RecoveryReport) -> bool:
    """Whether a new title line can go over ``slot``'s in place (oh-my-pi's 256 bytes,
    no byte-order mark before it), or into a file not written yet."""
    fits = slot.length == TITLE_SLOT_BYTES and not recovery.byte_order_mark
    return fits or not file.persisted


def write_title(
    title: str, timestamp: str, *, file: SessionFile, ledger: Ledger, foreign: ForeignWrites
) -> TitleSlot:
    """The title line of ``title`` written over the old one in place (``in_place``); a
    session not written yet gets it when it is (``first_line``). The new slot."""
    line = serialize_title_slot(title, "user", timestamp)
    if file.persisted:
        file.overwrite_start(line)
        foreign.saw()
    return retitled(title, timestamp, len(line), ledger)


def retitled(title: str, timestamp: str, length: int, ledger: Ledger) -> TitleSlot:
    """The slot of the user's ``title`` written at ``timestamp`` in a line of ``length``."""
    new = TitleSlot(title=title, updated_at=timestamp, source="user", length=length)
    ledger.retitled(new)
    return new


def starting_slot(title: str, source: str | None, timestamp: str) -> TitleSlot:
    """The title line a new oh-my-pi session starts with."""
    line = serialize_title_slot(title, source, timestamp)
    return parse_title_slot(msgspec.json.decode(line[:-1]), len(line))


def first_line(slot: TitleSlot | None) -> bytes:
    """What a new file starts with before its header: the title line, if it has one."""
    if slot is None:
        return b""
    return serialize_title_slot(slot.title, slot.source, slot.updated_at)


def reread(slot: TitleSlot, data: bytes) -> TitleSlot:
    """The title line as the file has it now (``data``: its first ``slot.length`` bytes;
    another program may have renamed the session). A line that is no longer a valid
    title line of the same length is left as last read: the store's offsets depend on
    that length, and a rewrite of the whole file is noticed as such."""
    if len(data) != slot.length or not data.endswith(b"\n"):
        return slot
    try:
        value = msgspec.json.decode(data[:-1])
        if claims_title_slot(value):
            return parse_title_slot(value, slot.length)
    except (msgspec.DecodeError, InvalidTitleSlot, RecursionError):
        pass
    return slot
