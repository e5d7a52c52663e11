"""Checking entries a client appends and encoding them as the lines that will be written.

A batch is validated whole before anything is written: each body becomes a record, its
decoded entry and its line, the child of the one before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgspec

from sessiond.core.absent import without_null_optionals
from sessiond.core.decode import decode_strict_entry
from sessiond.core.dialect import Dialect
from sessiond.core.entries import ENTRY_TYPES, Entry, KnownEntry
from sessiond.errors import ConflictError, InvalidEntryError, NotFoundError

from .edits import edit_replacement, editable_role
from .entry_index import EntryIndex
from .ids import new_entry_id
from .lines import MAX_LINE_BYTES
from .records import EntryRecord, new_record

# Roles a message entry must never carry: pi synthesises them from entries.
_FORBIDDEN_ROLES: Final = frozenset({"compactionSummary", "branchSummary"})
_BASE_KEYS: Final = ("id", "parentId", "timestamp")
_NAMING_TYPES: Final = frozenset({"session_info", "title_change"})

Prepared = tuple[EntryRecord, Entry, bytes]


def check_expected_leaf(expected: str | None, leaf_id: str | None) -> None:
    """``ConflictError`` unless the leaf is the one the caller expects."""
    if expected != leaf_id:
        raise ConflictError(
            f"the session's leaf is {leaf_id or 'none (no entries yet)'}, not {expected or 'none'}",
            leafId=leaf_id,
            expectedLeafId=expected,
        )


class EntryBatch:
    """Entries validated for one append, each the child of the one before (the first,
    of ``parent_id``)."""

    def __init__(
        self,
        index: EntryIndex,
        dialect: Dialect,
        *,
        parent_id: str | None,
        timestamp: str,
        now_ms: int | None,
        allowed: frozenset[str],
        on_path: set[str],
    ) -> None:
        self._index = index
        self._dialect = dialect
        self._parent_id = parent_id
        self._timestamp = timestamp
        self._now_ms = now_ms
        self._allowed = allowed
        # The ids on the leaf's path (needed only by a batch with an edit).
        self._on_path = on_path
        # The batch's entries so far, with the role an edit of them would change.
        self._taken: dict[str, str | None] = {}
        self.prepared: list[Prepared] = []

    def add(self, body: Mapping[str, Any]) -> Prepared:
        """Validate ``body`` (an entry without id, parentId and timestamp) as the next entry
        of the batch; ``InvalidEntryError`` (or ``NotFoundError``) if it may not be."""
        index = len(self.prepared)
        where = f"entries[{index}]"
        if not isinstance(body, Mapping):
            raise InvalidEntryError(f"{where}: an entry must be a JSON object", index=index)
        entry_type = body.get("type")
        if not isinstance(entry_type, str) or entry_type not in ENTRY_TYPES:
            known = ", ".join(sorted(self._dialect.appendable_types))
            raise InvalidEntryError(
                f"{where}: unknown entry type {entry_type!r} (known: {known})", index=index
            )
        if entry_type not in self._allowed:
            raise InvalidEntryError(
                f"{where}: {entry_type} entries are not appended to {self._dialect.name}'s "
                f"session files"
                + (" (session/setName names a session)" if entry_type in _NAMING_TYPES else ""),
                index=index,
                reason="wrongDialect",
            )
        for key in _BASE_KEYS:
            if key in body:
                raise InvalidEntryError(
                    f"{where}: `{key}` is assigned by sessiond; leave it out", index=index
                )
        fields = {key: value for key, value in body.items() if key != "type"}
        taken = self._taken
        if entry_type == "message":
            fields["message"] = _prepared_message(fields.get("message"), where, index, self._now_ms)
        elif entry_type == "label":
            target = fields.get("targetId")
            if isinstance(target, str) and target not in self._index and target not in taken:
                raise NotFoundError(f"Entry {target} not found", entryId=target, index=index)
            if fields.get("label") in (None, ""):
                fields.pop("label", None)
        elif entry_type == "session_info" and isinstance(fields.get("name"), str):
            fields["name"] = fields["name"].strip()
        elif entry_type == "context_edit":
            fields["replacement"] = edit_replacement(
                fields, where, index, self._index.get, self._on_path, taken
            )
        elif entry_type == "compaction":
            system = fields.get("systemMessage")
            if isinstance(system, Mapping) and system.get("timestamp") is None:
                # The checkpoint carries the compaction's own time, as pi 1.6 writes it.
                fields["systemMessage"] = {**system, "timestamp": self._now_ms}
        entry_id = new_entry_id(lambda candidate: candidate in self._index or candidate in taken)
        parent_id = self._parent_id
        data = {
            "type": entry_type,
            "id": entry_id,
            "parentId": parent_id,
            "timestamp": self._timestamp,
            **fields,
        }
        line = msgspec.json.encode(data)
        # A known optional field sent as null is the same as one left out, and is not
        # written as null (pi and other readers of the file look for those keys). A root's
        # parentId is the one null every entry may have.
        if line.count(b":null") > (parent_id is None):
            data = without_null_optionals(data, KnownEntry)
            line = msgspec.json.encode(data)
        if len(line) > MAX_LINE_BYTES:
            # Opening the file would report such a line as damage, not read it.
            raise InvalidEntryError(
                f"{where}: the entry is {len(line)} bytes as a line; a session line may "
                f"have at most {MAX_LINE_BYTES}",
                index=index,
                reason="tooLarge",
            )
        try:
            # Decoding the line is an order of magnitude faster than msgspec.convert on the
            # dict, and validates exactly what will be on disk.
            entry: Entry = decode_strict_entry(line)
        except msgspec.ValidationError as exc:
            raise InvalidEntryError(f"{where}: {exc}", index=index) from None
        message = fields.get("message")
        role = message.get("role") if isinstance(message, dict) else None
        record = new_record(entry_id, parent_id, entry_type, role, self._timestamp, len(line))
        self.prepared.append((record, entry, line))
        taken[entry_id] = editable_role(record)
        self._parent_id = entry_id
        return record, entry, line


def _prepared_message(message: Any, where: str, index: int, now_ms: int | None) -> dict[str, Any]:
    if not isinstance(message, Mapping):
        raise InvalidEntryError(f"{where}: a message entry needs a `message` object", index=index)
    role = message.get("role")
    if isinstance(role, str) and role in _FORBIDDEN_ROLES:
        raise InvalidEntryError(
            f"{where}: {role} messages are built from compaction and branch_summary "
            "entries; append those entries instead",
            index=index,
        )
    if role == "assistant" and not isinstance(message.get("api"), str):
        # pi always writes it, and reads it to decide whether thinking can be replayed.
        raise InvalidEntryError(
            f"{where}: an assistant message needs `api`, the provider API that produced it "
            '(e.g. "anthropic-messages")',
            index=index,
        )
    prepared = dict(message)
    if prepared.get("timestamp") is None and now_ms is not None:
        prepared["timestamp"] = now_ms
    return prepared
