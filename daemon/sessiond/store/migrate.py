"""Version migrations of the session format, one line at a time.

v1 -> v2: entries get fresh 8-character ids and are chained in file order;
a compaction's ``firstKeptEntryIndex`` (an index into the file's parsed lines,
header included) becomes ``firstKeptEntryId``. v2 -> v3: the ``hookMessage``
role becomes ``custom``. Lines that are not JSON objects stay exactly as they
were. Both steps are idempotent: a v3 file is left untouched.

A migration is two passes over the lines, so a file of any size migrates in
memory proportional to its number of entries (one new id each), never to its
size: ``plan`` reads the header and counts the entries (and makes their ids, since
a compaction may name an entry further on), ``rewrite`` then migrates each line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from sessiond.core.entries import CURRENT_SESSION_VERSION

_BOM = b"\xef\xbb\xbf"


class Migration:
    """One file's migration: ``plan`` over all its lines, then ``rewrite`` each in order.

    Lines are given without their newline; ``None`` stands for a line too long to
    read (see ``lines.MAX_LINE_BYTES``), which is no entry and is copied through.
    """

    def __init__(self, new_id: Callable[[set[str]], str]) -> None:
        self._new_id = new_id
        self.from_version = CURRENT_SESSION_VERSION
        self._ids: list[str] = []
        self._header_done = False
        self._next_entry = 0

    @property
    def needed(self) -> bool:
        return self.from_version < CURRENT_SESSION_VERSION

    def plan(self, lines: Iterable[bytes | None]) -> int:
        """Read the file's version and count its entries; returns the version it had."""
        header_seen = False
        entries = 0
        for line in lines:
            value = _object(line, header=not header_seen)
            if value is None:
                continue
            if header_seen:
                entries += 1
            elif value.get("type") == "session":
                header_seen = True
                version = value.get("version", 1)
                if not isinstance(version, int) or version >= CURRENT_SESSION_VERSION:
                    return CURRENT_SESSION_VERSION
                self.from_version = version
        if self.from_version < 2:
            used: set[str] = set()
            for _ in range(entries):
                entry_id = self._new_id(used)
                used.add(entry_id)
                self._ids.append(entry_id)
        return self.from_version

    def rewrite(self, line: bytes) -> bytes:
        """The migrated line (the same bytes when nothing about it changes)."""
        value = _object(line, header=not self._header_done)
        if value is None:
            return line
        if not self._header_done:
            if value.get("type") != "session":
                return line
            self._header_done = True
            value["version"] = CURRENT_SESSION_VERSION
            return msgspec.json.encode(value)
        index = self._next_entry
        self._next_entry += 1
        changed = False
        if self.from_version < 2:
            ids = self._ids
            value["id"] = ids[index]
            value["parentId"] = ids[index - 1] if index > 0 else None
            changed = True
            if value.get("type") == "compaction" and "firstKeptEntryIndex" in value:
                kept = value.pop("firstKeptEntryIndex")
                # The index counts the header as 0, so entry n is ids[n - 1].
                if isinstance(kept, int) and 0 < kept <= len(ids):
                    value["firstKeptEntryId"] = ids[kept - 1]
        message = value.get("message")
        if (
            value.get("type") == "message"
            and isinstance(message, dict)
            and message.get("role") == "hookMessage"
        ):
            message["role"] = "custom"
            changed = True
        return msgspec.json.encode(value) if changed else line


def _object(line: bytes | None, *, header: bool) -> dict[str, Any] | None:
    if line is None:
        return None
    if header and line.startswith(_BOM):
        line = line[len(_BOM) :]
    try:
        value = msgspec.json.decode(line)
    except (msgspec.DecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
