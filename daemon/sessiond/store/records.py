"""The in-memory index of a session file: one small record per entry line.

Opening a 100k-entry session must not decode 100k message bodies, so a record
holds only what the tree needs (id, parent, type, timestamp, a message's role)
and where its line is in the file; bodies are decoded on demand.

What a line says and what the daemon keeps about it are two types. ``LineKeys`` is
what msgspec decodes from a line (the few fields the tree needs; every other field of
the line is skipped). ``EntryRecord`` adds the daemon's own bookkeeping (where the line
is, caches, whether its UTF-8 was checked), which no decoder fills: a line, or an entry
a client appends, is a JSON object of any shape and may carry any key, so no key it
carries can reach that state.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from sessiond.core.entries import Entry


class MessageRole(msgspec.Struct, gc=False):
    role: str | None = None


class LineKeys(msgspec.Struct, rename={"parent_id": "parentId"}, gc=False):
    """The fields of an entry line that the index reads; the rest of the line is skipped."""

    id: str
    type: str = ""
    parent_id: str | None = None
    timestamp: str = ""
    message: MessageRole | None = None


# Reads a line's keys; every other field of the line is skipped (and checked as JSON).
KEYS_DECODER: Final = msgspec.json.Decoder(LineKeys)


def loose_keys(line: bytes) -> LineKeys | None:
    """The keys of a line whose fields have unexpected types (read as pi would)."""
    try:
        data = msgspec.json.decode(line)
    except (msgspec.DecodeError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        return None

    def text(key: str) -> str | None:
        value = data.get(key)
        return value if isinstance(value, str) else None

    message = data.get("message")
    role = message.get("role") if isinstance(message, dict) else None
    return LineKeys(
        id=data["id"],
        type=text("type") or "",
        parent_id=text("parentId"),
        timestamp=text("timestamp") or "",
        message=MessageRole(role if isinstance(role, str) else None)
        if isinstance(message, dict)
        else None,
    )


def keys_or_none(raw: bytes) -> LineKeys | None:
    """The keys of a line, read strictly or loosely; None when it is not an entry."""
    try:
        return KEYS_DECODER.decode(raw)
    except msgspec.ValidationError:
        return loose_keys(raw)
    except (msgspec.DecodeError, RecursionError):
        return None


class EntryRecord(msgspec.Struct, array_like=True, gc=False):
    """One entry line: identity, tree link, place in the file, caches.

    Never decoded from JSON (see the module's docstring): built from ``LineKeys`` by
    ``record_of`` or for an entry made in memory by ``new_record``. The persistent index
    (``index_file``) keeps records as msgpack arrays of these fields, in this order."""

    id: str
    type: str = ""
    parent_id: str | None = None
    timestamp: str = ""
    message: MessageRole | None = None
    # Byte offset of the line and its length without the newline; -1 while the
    # entry exists only in memory (a session not written yet).
    offset: int = -1
    length: int = 0
    # Position in file order (lets a path walk skip hash lookups on linear files).
    seq: int = -1
    # The decoded entry, kept only for small metadata entries (see SessionStore.entry_of).
    entry: Any = None
    tokens_chars: int | None = None
    tokens_tiktoken: int | None = None
    # 0 unchecked, 1 valid UTF-8, 2 invalid (read with replacement characters, as pi does)
    utf8_state: int = 0

    @property
    def role(self) -> str | None:
        """The message role of a ``message`` entry."""
        message = self.message
        return message.role if message is not None else None

    @property
    def decoded(self) -> Entry | None:
        entry: Entry | None = self.entry
        return entry

    def is_root_like(self, known: dict[str, EntryRecord]) -> bool:
        """pi's getTree: a root is parentless, self-parented, or an orphan."""
        return self.parent_id is None or self.parent_id == self.id or self.parent_id not in known


def record_of(keys: LineKeys, offset: int, length: int, seq: int) -> EntryRecord:
    """The record of a line read from a file, at ``offset`` and ``length`` bytes long."""
    return EntryRecord(
        keys.id, keys.type, keys.parent_id, keys.timestamp, keys.message, offset, length, seq
    )


def new_record(
    entry_id: str,
    parent_id: str | None,
    entry_type: str,
    role: str | None,
    timestamp: str,
    length: int,
) -> EntryRecord:
    """A record for an entry created in memory (not read from a line)."""
    return EntryRecord(
        id=entry_id,
        type=entry_type,
        parent_id=parent_id,
        timestamp=timestamp,
        message=MessageRole(role) if role is not None else None,
        length=length,
        utf8_state=1,
    )
