"""A session as read: its entries, the tree, the current leaf and its context.

``ReadableSession`` is the half of ``SessionStore`` that changes nothing on disk: it
answers from the entry index (``entry_index``) and lines read back (``entry_reading``),
and holds the current leaf in a leaf view of the file's dialect.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import msgspec

from sessiond.core.context import UNSET, SessionContext, Unset, context_from_path
from sessiond.core.dialect import Dialect, dialect_for
from sessiond.core.entries import Entry, SessionHeader
from sessiond.core.title_slot import TitleSlot
from sessiond.errors import NotFoundError
from sessiond.wire.recovery import RecoveryReport

from . import title_line
from .catching_up import Grown
from .entry_index import EntryIndex, RecordNode
from .entry_reading import EntryReader
from .foreign_writes import Followed
from .prepared_read import VIEWS, ContextView, PreparedRead
from .records import EntryRecord
from .scan_result import ScanResult


class _RawMessage(msgspec.Struct):
    message: msgspec.Raw = msgspec.Raw(b"null")


_raw_message_decoder: msgspec.json.Decoder[_RawMessage] | None = None


def _raw_message(line: bytes) -> bytes:
    global _raw_message_decoder  # noqa: PLW0603 - built on first use, for start-up time
    if _raw_message_decoder is None:
        _raw_message_decoder = msgspec.json.Decoder(_RawMessage)
    return bytes(_raw_message_decoder.decode(line).message)


class ReadableSession:
    """One session's entries and current leaf, over an index and a reader of its lines."""

    def __init__(
        self, path: Path, header: SessionHeader, index: EntryIndex, reader: EntryReader
    ) -> None:
        self.path = path
        self.header = header
        self._index = index
        self._reader = reader
        self.load(None)

    def load(self, scan_result: ScanResult | None) -> None:
        """Start again from a scan of the file (or an empty session), the leaf at the last
        entry."""
        # oh-my-pi's title line, if the file starts with one; it decides the dialect.
        self.title_slot: TitleSlot | None = (
            scan_result.title_slot if scan_result is not None else None
        )
        self.dialect: Dialect = dialect_for(self.title_slot is not None)
        self.recovery = scan_result.report if scan_result is not None else RecoveryReport()
        self._view: ContextView = self.new_view()
        if scan_result is None:
            self._index.load([], {}, self.raw_line, self.recovery)
        else:
            headers = self._index.load(
                scan_result.records, scan_result.eager_lines, self.raw_line, self.recovery
            )
            self.recovery.damaged_lines += self._reader.second_headers(headers)
        leaf = self._index.last()
        self._view.reset(self._index.path_to(leaf) if leaf is not None else [])

    def adopt(self, prepared: PreparedRead) -> None:
        """``load``, from what ``prepare_read`` made ready elsewhere (nothing here is in
        proportion to the file)."""
        self.title_slot = prepared.title_slot
        self.dialect = prepared.dialect
        self.recovery = prepared.recovery
        self._index.adopt(prepared.index)
        prepared.view.read_with(self.entry_of)
        self._view = prepared.view

    def took_appended(self, grown: Grown) -> Followed | None:
        """The leaf at the last of others' lines just indexed, as a reopen would put it (and
        oh-my-pi's title line read again when they renamed the session)."""
        appended = grown.found.records
        if not appended:
            return None
        slot = self.title_slot
        if grown.title_line is not None and slot is not None:
            self.title_slot = title_line.reread(slot, grown.title_line)
        self._view.reset(self._index.path_to(appended[-1]))
        return Followed(reason="fileAppended", appended_ids=[r.id for r in appended])

    def start_titled(self, slot: TitleSlot) -> None:
        """A new session that starts with oh-my-pi's title line: its dialect is oh-my-pi's."""
        self.title_slot = slot
        self.dialect = dialect_for(True)
        self._view = self.new_view()

    def new_view(self) -> ContextView:
        """A leaf view of the session's dialect, at no leaf yet."""
        return VIEWS[self.dialect.name](self.entry_of)

    # ------------------------------------------------------------------ identity

    @property
    def session_id(self) -> str:
        return self.header.id

    @property
    def name(self) -> str | None:
        """The session's name: on pi's files the last ``session_info`` name (an empty one
        clears it), on oh-my-pi's the title in its title line."""
        if self.title_slot is not None:
            return self.title_slot.title or None
        return self._index.name

    @property
    def entry_count(self) -> int:
        return len(self._index)

    @property
    def leaf_id(self) -> str | None:
        leaf = self._view.leaf
        return leaf.id if leaf is not None else None

    @property
    def leaf_view(self) -> ContextView:
        return self._view

    @property
    def labels(self) -> Mapping[str, str]:
        return self._index.labels

    # ------------------------------------------------------------------ reading

    def has_entry(self, entry_id: str) -> bool:
        return entry_id in self._index

    def record(self, entry_id: str) -> EntryRecord:
        record = self._index.get(entry_id)
        if record is None:
            raise NotFoundError(f"Entry {entry_id} not found", entryId=entry_id)
        return record

    def records(self) -> Sequence[EntryRecord]:
        """Every entry's record in file order, all branches."""
        return self._index.records

    def get_entry(self, entry_id: str) -> Entry | None:
        record = self._index.get(entry_id)
        return self.entry_of(record) if record is not None else None

    def entries(self) -> Iterator[Entry]:
        """Every entry in file order (decodes them all: for tools and tests)."""
        for record in self._index.records:
            yield self.entry_of(record)

    def entry_of(self, record: EntryRecord) -> Entry:
        """The decoded entry of a record. Metadata entries stay cached on the record;
        message bodies go through a bounded cache so memory stays flat."""
        return self._reader.entry_of(record, self.recovery)

    def raw_line(self, record: EntryRecord) -> bytes:
        """The entry's line as stored (without the newline), as valid UTF-8 and strict JSON:
        what may be sent on as it is. ``FileChangedError`` if another program changed the
        line behind the daemon (``line_check``); the file is then read again."""
        return self._reader.raw_line(record, self.recovery)

    def raw_message(self, record: EntryRecord) -> bytes:
        """The original JSON of a message entry's ``message``, unknown fields included."""
        return _raw_message(self.raw_line(record))

    # ------------------------------------------------------------------ the tree

    def path_records(self, from_id: str | None = None) -> list[EntryRecord]:
        """Root-first records of the path to ``from_id`` (default: the leaf)."""
        if from_id is None:
            return list(self._view.path)
        return self._index.path_to(self.record(from_id))

    def get_branch(self, from_id: str | None = None) -> list[Entry]:
        """pi's ``getBranch``: the entries root to ``from_id`` (default: the leaf)."""
        return [self.entry_of(r) for r in self.path_records(from_id)]

    def get_children(self, parent_id: str) -> list[Entry]:
        return [self.entry_of(r) for r in self.children_records(parent_id)]

    def children_records(self, parent_id: str) -> list[EntryRecord]:
        return self._index.children_of(parent_id)

    def label_timestamp(self, entry_id: str) -> str | None:
        """When the current label of an entry was set (pi's ``labelTimestamp``)."""
        return self._index.label_time(entry_id)

    def get_label(self, entry_id: str) -> str | None:
        return self._index.labels.get(entry_id)

    def get_tree(self) -> list[RecordNode]:
        """pi's ``getTree``: roots in file order, children sorted by timestamp."""
        return self._index.tree()

    # ------------------------------------------------------------------ the leaf

    def build_context(self, leaf_id: str | Unset | None = UNSET) -> SessionContext:
        """pi's ``buildSessionContext`` for ``leaf_id`` (default: the current leaf)."""
        if leaf_id is None:
            return context_from_path([])
        if isinstance(leaf_id, Unset) or leaf_id == self.leaf_id:
            return self._view.context()
        record = self._index.get(leaf_id)
        if record is None:
            record = self._index.last()  # an unknown id: the last entry's context, as pi
        if record is None:
            return context_from_path([])
        view = self.new_view()
        view.reset(self._index.path_to(record))
        return view.context()

    def branch(self, entry_id: str) -> None:
        """Move the leaf to an existing entry. Nothing is written."""
        self._view.reset(self._index.path_to(self.record(entry_id)))

    def reset_leaf(self) -> None:
        """Move the leaf before the first entry: the next append starts a new root."""
        self._view.reset([])
