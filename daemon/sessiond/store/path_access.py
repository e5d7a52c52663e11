"""A root-to-leaf path of the store as a ``core.path_reader.PathReader``.

Types, roles and ids come from the index; bodies are decoded only when an
algorithm asks for one; token estimates are cached on the records, so a second
look at the same path costs almost nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from sessiond.core.entries import Entry
from sessiond.core.tokens import Estimator

from .records import EntryRecord
from .session import SessionStore


class StorePath:
    def __init__(
        self, store: SessionStore, records: Sequence[EntryRecord], estimator: Estimator
    ) -> None:
        self._store = store
        self._records = records
        self._estimator = estimator

    @property
    def records(self) -> Sequence[EntryRecord]:
        return self._records

    def __len__(self) -> int:
        return len(self._records)

    def id_at(self, index: int) -> str:
        return self._records[index].id

    def type_at(self, index: int) -> str:
        return self._records[index].type

    def role_at(self, index: int) -> str | None:
        return self._records[index].role

    def entry_at(self, index: int) -> Entry:
        return self._store.entry_of(self._records[index])

    def tokens_at(self, index: int) -> int:
        return self._store.leaf_view.estimate(self._records[index], self._estimator)
