"""Version migrations of the session format (SPEC 1.7), on decoded lines.

v1 -> v2: entries get fresh 8-character ids and are chained in file order;
a compaction's ``firstKeptEntryIndex`` (an index into the file's parsed lines,
header included) becomes ``firstKeptEntryId``. v2 -> v3: the ``hookMessage``
role becomes ``custom``. Lines that are not JSON stay exactly as they were.
Both steps are idempotent: a v3 file is left untouched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from sessiond.core.entries import CURRENT_SESSION_VERSION


def migrate_lines(lines: list[bytes], new_id: Callable[[set[str]], str]) -> tuple[list[bytes], int]:
    """Migrate a whole file given as lines (without newlines).

    Returns the migrated lines and the version the file had. ``new_id`` makes a
    fresh id not in the given set of ids already used.
    """
    parsed: list[dict[str, Any] | None] = []
    for line in lines:
        try:
            value = msgspec.json.decode(line)
        except (msgspec.DecodeError, RecursionError):
            value = None
        parsed.append(value if isinstance(value, dict) else None)
    header_index = next(
        (
            i
            for i, value in enumerate(parsed)
            if value is not None and value.get("type") == "session"
        ),
        None,
    )
    if header_index is None:
        return lines, CURRENT_SESSION_VERSION
    header = parsed[header_index]
    assert header is not None
    version = header.get("version", 1)
    if not isinstance(version, int) or version >= CURRENT_SESSION_VERSION:
        return lines, CURRENT_SESSION_VERSION
    entries = [value for value in parsed[header_index + 1 :] if value is not None]
    changed: set[int] = {id(header)}
    if version < 2:
        _v1_to_v2(header, entries, new_id)
        changed.update(id(entry) for entry in entries)
    for entry in entries:
        message = entry.get("message")
        if (
            entry.get("type") == "message"
            and isinstance(message, dict)
            and message.get("role") == "hookMessage"
        ):
            message["role"] = "custom"
            changed.add(id(entry))
    header["version"] = CURRENT_SESSION_VERSION
    migrated = [
        msgspec.json.encode(value) if value is not None and id(value) in changed else line
        for line, value in zip(lines, parsed, strict=True)
    ]
    return migrated, version


def _v1_to_v2(
    header: dict[str, Any], entries: list[dict[str, Any]], new_id: Callable[[set[str]], str]
) -> None:
    used: set[str] = set()
    previous: str | None = None
    for entry in entries:
        entry_id = new_id(used)
        used.add(entry_id)
        entry["id"] = entry_id
        entry["parentId"] = previous
        previous = entry_id
    file_entries: list[dict[str, Any]] = [header, *entries]
    for entry in entries:
        if entry.get("type") != "compaction" or "firstKeptEntryIndex" not in entry:
            continue
        index = entry.pop("firstKeptEntryIndex")
        if isinstance(index, int) and 0 < index < len(file_entries):
            entry["firstKeptEntryId"] = file_entries[index]["id"]
    header["version"] = 2
