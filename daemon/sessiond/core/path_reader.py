"""Read access to a root-to-leaf path, for the compaction and branch algorithms.

The algorithms look at entry types and roles for every position but decode
bodies for only a few, and they need per-message token estimates. A plain list
of entries serves the tests (``EntryPath``); the store serves a 100k-entry
path from its index without decoding it (``store.path_access``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from .entries import CompactionEntry, Entry, MessageEntry, UnknownEntry, entry_type
from .messages import message_role
from .projection import compaction_summary_message, message_of_entry
from .tokens import Estimator


class PathReader(Protocol):
    def __len__(self) -> int: ...

    def id_at(self, index: int) -> str: ...

    def type_at(self, index: int) -> str: ...

    def role_at(self, index: int) -> str | None:
        """The message role of a ``message`` entry (None for other types)."""
        ...

    def entry_at(self, index: int) -> Entry: ...

    def tokens_at(self, index: int) -> int:
        """The estimate of the message the entry contributes before any edit (0 if none).

        For a compaction entry: its summary message (its system checkpoint is counted
        by ``core.projected_path``)."""
        ...


class EntryPath:
    """A ``PathReader`` over typed entries (tests, small tools)."""

    def __init__(self, entries: Sequence[Entry], estimator: Estimator) -> None:
        self._entries = list(entries)
        self._estimator = estimator
        self._tokens: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def id_at(self, index: int) -> str:
        return self._entries[index].id

    def type_at(self, index: int) -> str:
        return entry_type(self._entries[index])

    def role_at(self, index: int) -> str | None:
        entry = self._entries[index]
        if isinstance(entry, MessageEntry):
            return message_role(entry.message)
        if isinstance(entry, UnknownEntry) and entry.type == "message":
            message = entry.data.get("message")
            role = message.get("role") if isinstance(message, dict) else None
            return role if isinstance(role, str) else None
        return None

    def entry_at(self, index: int) -> Entry:
        return self._entries[index]

    def tokens_at(self, index: int) -> int:
        cached = self._tokens.get(index)
        if cached is None:
            entry = self._entries[index]
            message = (
                compaction_summary_message(entry)
                if isinstance(entry, CompactionEntry)
                else message_of_entry(entry)
            )
            cached = self._estimator.estimate(message) if message is not None else 0
            self._tokens[index] = cached
        return cached


class SlicedPath:
    """The part of a ``PathReader`` from ``start`` on, as a path of its own."""

    def __init__(self, path: PathReader, start: int) -> None:
        self._path = path
        self._start = start

    def __len__(self) -> int:
        return max(0, len(self._path) - self._start)

    def id_at(self, index: int) -> str:
        return self._path.id_at(self._start + index)

    def type_at(self, index: int) -> str:
        return self._path.type_at(self._start + index)

    def role_at(self, index: int) -> str | None:
        return self._path.role_at(self._start + index)

    def entry_at(self, index: int) -> Entry:
        return self._path.entry_at(self._start + index)

    def tokens_at(self, index: int) -> int:
        return self._path.tokens_at(self._start + index)
