"""The entry index of one session, in memory: records in file order and by id, the tree,
labels and name, and a bounded cache of decoded messages.

It reads no file: what it needs of one (the lines of labels and names) is handed to it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import msgspec

from sessiond.core.context import iso_to_ms, path_to
from sessiond.core.entries import Entry, LabelEntry, SessionInfoEntry
from sessiond.wire.recovery import RecoveryReport

from .records import EntryRecord
from .scan_result import EAGER_TYPES, decode_metadata

_MESSAGE_CACHE_SIZE: Final = 4096


class RecordNode(msgspec.Struct, kw_only=True):
    """One node of ``get_tree``: an entry's record, its children, its current label."""

    record: EntryRecord
    children: list[RecordNode]
    label: str | None = None


@dataclass(frozen=True)
class IndexContents:
    """An index's records and what is derived from them, handed from one index (built
    in a worker thread) to another (``EntryIndex.adopt``)."""

    records: list[EntryRecord]
    by_id: dict[str, EntryRecord]
    labels: dict[str, str]
    label_times: dict[str, str]
    duplicates: bool
    name: str | None
    has_assistant: bool


class EntryIndex:
    """Every entry's record of one session file, and what is derived from them."""

    def __init__(self) -> None:
        # Bumped at every change, so that changes read elsewhere (``catching_up``) are
        # applied only to the state they were read for.
        self._generation = 0
        self._clear()

    def _clear(self) -> None:
        self._records: list[EntryRecord] = []
        self._by_id: dict[str, EntryRecord] = {}
        # Built on first use: opening a session should not pay for the tree.
        self._children: dict[str, list[EntryRecord]] | None = None
        self._labels: dict[str, str] = {}
        self._label_times: dict[str, str] = {}
        self._duplicates = False
        self._name: str | None = None
        self._has_assistant = False
        self._message_cache: OrderedDict[int, Entry] = OrderedDict()

    # -- loading

    def load(
        self,
        records: list[EntryRecord],
        eager_lines: Mapping[int, bytes],
        line_of: Callable[[EntryRecord], bytes],
        recovery: RecoveryReport,
    ) -> list[EntryRecord]:
        """Start again from a scan's records (labels and names decoded from
        ``eager_lines``, or ``line_of`` where a scan did not keep the line). Second
        session headers are not entries: they come back, for the caller to report."""
        self._clear()
        self._generation += 1
        by_id = {record.id: record for record in records}
        if len(by_id) != len(records):
            self._duplicates = True
            seen: set[str] = set()
            for record in records:
                if record.id in seen:
                    recovery.duplicate_ids.append(record.id)
                seen.add(record.id)
        self._has_assistant = any(record.role == "assistant" for record in records)
        kept: list[EntryRecord] | None = None
        headers: list[EntryRecord] = []
        for position, record in enumerate(records):
            kind = record.type
            if kind in EAGER_TYPES:
                line = eager_lines.get(record.offset)
                decode_metadata(record, line if line is not None else line_of(record), recovery)
                self._note_metadata(record)
            elif kind == "session":
                if kept is None:
                    kept = records[:position]
                headers.append(record)
                continue
            if kept is not None:
                record.seq = len(kept)
                kept.append(record)
        if kept is not None:
            records = kept
            by_id = {record.id: record for record in records}
        self._records = records
        self._by_id = by_id
        return headers

    def contents(self) -> IndexContents:
        """What this index holds, for another to adopt (this one is not used after)."""
        return IndexContents(
            records=self._records,
            by_id=self._by_id,
            labels=self._labels,
            label_times=self._label_times,
            duplicates=self._duplicates,
            name=self._name,
            has_assistant=self._has_assistant,
        )

    def adopt(self, contents: IndexContents) -> None:
        """Start again from what another index built (``load`` there, in any thread):
        nothing in proportion to the records is done here."""
        self._clear()
        self._generation += 1
        self._records = contents.records
        self._by_id = contents.by_id
        self._labels = contents.labels
        self._label_times = contents.label_times
        self._duplicates = contents.duplicates
        self._name = contents.name
        self._has_assistant = contents.has_assistant

    def add(self, record: EntryRecord, entry: Entry | None = None) -> None:
        """Index one more record, after the others (``entry``: its decoded entry, when the
        caller has it)."""
        self._generation += 1
        if entry is not None:
            if record.type == "message":
                # A message just appended is the one a usage figure reads next.
                self.keep(record, entry)
            else:
                record.entry = entry
        record.seq = len(self._records)
        self._records.append(record)
        if record.id in self._by_id:
            self._duplicates = True
        self._by_id[record.id] = record
        if self._children is not None and record.parent_id is not None:
            self._children.setdefault(record.parent_id, []).append(record)
        if record.role == "assistant":
            self._has_assistant = True
        if record.type in EAGER_TYPES:
            self._note_metadata(record)

    def _note_metadata(self, record: EntryRecord) -> None:
        entry = record.entry
        if isinstance(entry, LabelEntry):
            if entry.label:
                self._labels[entry.target_id] = entry.label
                self._label_times[entry.target_id] = entry.timestamp
            else:
                self._labels.pop(entry.target_id, None)
                self._label_times.pop(entry.target_id, None)
        elif isinstance(entry, SessionInfoEntry):
            # pi (0.73.1 and 1.6): the last session_info in the file names the session; an
            # empty name clears it.
            self._name = (entry.name or "").strip() or None

    # -- where lines moved in the file

    def move_offsets(self, moved: Mapping[int, int]) -> None:
        """Records at the offsets of ``moved`` are now at the mapped ones (a rewrite)."""
        self._generation += 1
        for record in self._records:
            record.offset = moved.get(record.offset, record.offset)

    def shift_offsets(self, shift: int) -> None:
        """Every line on disk moved by ``shift`` bytes (a first line of another length)."""
        self._generation += 1
        for record in self._records:
            if record.offset >= 0:
                record.offset += shift

    def replaced(self, entry_id: str, length: int) -> None:
        """The entry's line was replaced by one of ``length`` bytes (valid UTF-8): what
        was decoded of it is dropped."""
        record = self._by_id[entry_id]
        record.length = length
        record.utf8_state = 1
        record.entry = None
        record.tokens_chars = record.tokens_tiktoken = None
        self._message_cache.pop(id(record), None)

    # -- reading

    @property
    def generation(self) -> int:
        return self._generation

    def bump(self) -> None:
        """Something the index depends on changed (the file's end moved)."""
        self._generation += 1

    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self._by_id

    def get(self, entry_id: str) -> EntryRecord | None:
        return self._by_id.get(entry_id)

    @property
    def records(self) -> Sequence[EntryRecord]:
        """Every entry's record in file order, all branches."""
        return self._records

    def last(self) -> EntryRecord | None:
        return self._records[-1] if self._records else None

    @property
    def labels(self) -> Mapping[str, str]:
        return self._labels

    def label_time(self, entry_id: str) -> str | None:
        return self._label_times.get(entry_id)

    @property
    def name(self) -> str | None:
        """The name the last ``session_info`` gave (pi's files)."""
        return self._name

    @property
    def has_assistant(self) -> bool:
        return self._has_assistant

    def cached(self, record: EntryRecord) -> Entry | None:
        """The record's decoded entry, if it is held (metadata on the record, messages in
        the bounded cache)."""
        if record.entry is not None:
            return record.decoded
        key = id(record)
        cached = self._message_cache.get(key)
        if cached is not None:
            self._message_cache.move_to_end(key)
        return cached

    def keep(self, record: EntryRecord, entry: Entry) -> None:
        """Hold a decoded entry: metadata on its record, a message in the bounded cache, so
        memory stays flat."""
        if record.type != "message":
            record.entry = entry
            return
        self._message_cache[id(record)] = entry
        if len(self._message_cache) > _MESSAGE_CACHE_SIZE:
            self._message_cache.popitem(last=False)

    # -- the tree

    def path_to(self, leaf: EntryRecord) -> list[EntryRecord]:
        """Root-first records of the path to ``leaf``."""
        records = self._records
        by_id = self._by_id
        duplicates = self._duplicates  # with duplicate ids the later line wins: use the map
        path = [leaf]
        current = leaf
        # In a linear file the parent is nearly always the line before: check that
        # first and fall back to the id map. A cycle cannot outlast len(records).
        for _ in range(len(records) + 1):
            parent_id = current.parent_id
            if parent_id is None:
                break
            hint = current.seq - 1
            if 0 <= hint < len(records) and records[hint].id == parent_id and not duplicates:
                parent = records[hint]
            else:
                found = by_id.get(parent_id)
                if found is None:
                    break
                parent = found
            path.append(parent)
            current = parent
        else:
            return path_to(leaf, by_id)  # a cycle: the walk that watches for one
        path.reverse()
        return path

    def children_of(self, parent_id: str) -> list[EntryRecord]:
        if self._children is None:
            children: dict[str, list[EntryRecord]] = {}
            for record in self._records:
                if record.parent_id is not None:
                    children.setdefault(record.parent_id, []).append(record)
            self._children = children
        return [r for r in self._children.get(parent_id, ()) if r.id != parent_id]

    def tree(self) -> list[RecordNode]:
        """pi's ``getTree``: roots in file order, children sorted by timestamp."""
        nodes: dict[str, RecordNode] = {}
        for record in self._records:
            nodes[record.id] = RecordNode(
                record=record, children=[], label=self._labels.get(record.id)
            )
        roots: list[RecordNode] = []
        for record in self._records:
            node = nodes[record.id]
            if node.record is not record:
                continue  # a duplicate id: the later line won
            if record.is_root_like(self._by_id):
                roots.append(node)
            else:
                assert record.parent_id is not None
                nodes[record.parent_id].children.append(node)
        for node in nodes.values():
            if len(node.children) > 1:
                node.children.sort(key=lambda child: _sort_time(child.record.timestamp))
        return roots


def _sort_time(timestamp: str) -> int:
    ms = iso_to_ms(timestamp) if timestamp else None
    return ms if ms is not None else 0
