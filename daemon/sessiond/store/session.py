"""A session file opened for reading and writing: pi's SessionManager, made durable.

``SessionStore`` composes the owners of its state: the entry index (``entry_index``),
the file's bytes (``session_file``), the validation of appended entries
(``entry_validation``), other programs' writes (``foreign_writes``, ``catching_up``),
the persistent index's ledger (``ledger``) and copies and rewrites (``rewriting``,
``title_line``). It keeps the current leaf (a leaf view) and the order of every step.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

import msgspec

from sessiond.core.context import UNSET, SessionContext, _Unset, context_from_path, iso_to_ms
from sessiond.core.decode import NotAnEntry, decode_entry
from sessiond.core.dialect import Dialect, dialect_for
from sessiond.core.entries import (
    CURRENT_SESSION_VERSION,
    ENTRY_TYPES,
    Entry,
    MessageEntry,
    SessionHeader,
)
from sessiond.core.messages import AssistantMessage
from sessiond.core.title_slot import TitleSlot
from sessiond.core.tokens import Estimator
from sessiond.errors import (
    BusyError,
    ConflictError,
    FileChangedError,
    NotFoundError,
    StorageError,
)
from sessiond.paths import check_session_id, iso_now
from sessiond.settings import StorageSettings
from sessiond.wire.recovery import DamagedLine, RecoveryReport

from . import line_check, rewriting, title_line
from .catching_up import ChangePlan, Changes, Grown, line_numbers, read_changes
from .creating import new_session_path
from .entry_index import EntryIndex, TreeNode
from .entry_validation import EntryBatch, Prepared
from .file_watch import Observation
from .foreign_writes import CatchUpNeeded, Followed, ForeignWrites
from .ids import new_session_id
from .leaf_view import LeafView
from .ledger import Ledger
from .lock import SessionLock
from .omp_leaf_view import OmpLeafView
from .opening import lock_existing, read_session
from .records import EntryRecord
from .recovery import DamagedLine, RecoveryReport, TornTail
from .scan import ScanResult
from .session_file import FsyncPolicy, SessionFile

__all__ = ["Clock", "ContextView", "FsyncPolicy", "SessionStore", "TreeNode"]

Clock = Callable[[], datetime]
# Entries that are fsynced before an append returns, whatever the policy.
_ALWAYS_SYNCED: Final = frozenset({"compaction", "branch_summary"})
# The view that keeps the current leaf's context, by the file's dialect.
ContextView = LeafView | OmpLeafView
_VIEWS: Final[dict[str, type[ContextView]]] = {"pi": LeafView, "oh-my-pi": OmpLeafView}


class _RawMessage(msgspec.Struct):
    message: msgspec.Raw = msgspec.Raw(b"null")


_raw_message_decoder: msgspec.json.Decoder[_RawMessage] | None = None


def _raw_message(line: bytes) -> bytes:
    global _raw_message_decoder  # noqa: PLW0603 - built on first use, for start-up time
    if _raw_message_decoder is None:
        _raw_message_decoder = msgspec.json.Decoder(_RawMessage)
    return bytes(_raw_message_decoder.decode(line).message)


def _utc_now() -> datetime:
    return datetime.now(UTC)


class SessionStore:
    """One session file: index, current leaf, appends, and the file itself."""

    def __init__(
        self,
        *,
        path: Path,
        header: SessionHeader,
        header_line: bytes,
        scan_result: ScanResult | None,
        storage: StorageSettings,
        persisted: bool,
        readonly: bool,
        lock: SessionLock | None,
        source_fd: int | None,
        clock: Clock,
    ) -> None:
        self.path = path
        self.header = header
        self._header_line = header_line
        self.storage = storage
        self.readonly = readonly
        self._lock = lock
        self._clock = clock
        self._closed = False
        self._file = SessionFile(
            path, fsync=storage.fsync, persisted=persisted, source_fd=source_fd
        )
        self._index = EntryIndex()
        self._ledger = Ledger()
        self._foreign = ForeignWrites(
            self._file,
            self._index,
            self._ledger,
            header=header,
            use_index=storage.persistent_index,
        )
        # While a rewrite of the file runs apart (in a worker thread), nothing may be
        # appended: it would go to the file the rewrite replaces.
        self.appends_held = False
        self._take_scan(scan_result)
        if scan_result is not None and source_fd is None:
            torn = scan_result.report.torn_tail
            if torn is not None and torn.saved_to is None:
                # Not cut off (read-only, or another program may still be writing it).
                self._file.set_end(torn.offset)
            self._ledger.indexed_at(scan_result.indexed_size)
            # Following is best effort: reads report their own errors.
            with contextlib.suppress(OSError, StorageError):
                self._foreign.saw()

    def _take_scan(self, scan_result: ScanResult | None) -> None:
        """Build the in-memory index from a scan (or an empty one), leaf at the last entry."""
        # oh-my-pi's title line, if the file starts with one; it decides the dialect.
        self.title_slot: TitleSlot | None = (
            scan_result.title_slot if scan_result is not None else None
        )
        self.dialect: Dialect = dialect_for(self.title_slot is not None)
        self._foreign.skip_first = self.title_slot.length if self.title_slot else 0
        self.recovery = scan_result.report if scan_result is not None else RecoveryReport()
        if scan_result is None:
            self._file.set_end(0)
        else:
            self._file.set_end(scan_result.size, needs_newline=not scan_result.ends_with_newline)
        self._ledger.start(scan_result)
        self._view: ContextView = self._new_view()
        if scan_result is None:
            self._index.load([], {}, self.raw_line, self.recovery)
        else:
            headers = self._index.load(
                scan_result.records, scan_result.eager_lines, self.raw_line, self.recovery
            )
            if headers:
                numbers = line_numbers(self._file.reader(), headers)
                self.recovery.damaged_lines += [
                    DamagedLine(
                        line=number,
                        offset=record.offset,
                        length=record.length,
                        reason="a second session header",
                        preview="",
                    )
                    for record, number in zip(headers, numbers, strict=True)
                ]
        leaf = self._index.last()
        self._view.reset(self._index.path_to(leaf) if leaf is not None else [])

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        storage: StorageSettings | None = None,
        readonly: bool = False,
        clock: Clock = _utc_now,
    ) -> SessionStore:
        """Open an existing session file.

        Writable: takes the lock, cuts a torn last line off into a ``.corrupt``
        file, migrates an old version by atomic rewrite. Read-only: no lock and
        no change to the file; a torn tail is only reported, and a migration goes to
        an anonymous temporary file read in the file's place.
        Either way only a regular file is opened, never through a symbolic link.
        """
        file_path = Path(path).absolute()
        storage = storage or StorageSettings()
        lock = None if readonly else lock_existing(file_path)
        source_fd: int | None = None
        try:
            read = read_session(file_path, readonly=readonly, use_index=storage.persistent_index)
            result, source_fd = read.result, read.source_fd
            return cls(
                path=file_path,
                header=result.header,
                header_line=msgspec.json.encode(result.header_data),
                scan_result=result,
                storage=storage,
                persisted=True,
                readonly=readonly,
                lock=lock,
                source_fd=source_fd,
                clock=clock,
            )
        except BaseException:
            if source_fd is not None:
                os.close(source_fd)
            if lock is not None:
                lock.release()
            raise

    @classmethod
    def create(
        cls,
        cwd: str,
        *,
        session_dir: str | os.PathLike[str] | None = None,
        path: str | os.PathLike[str] | None = None,
        session_id: str | None = None,
        parent_session: str | None = None,
        storage: StorageSettings | None = None,
        clock: Clock = _utc_now,
        title_of: TitleSlot | None = None,
    ) -> SessionStore:
        """Start a new session. Nothing is written until the first assistant message
        (or ``write_now``), exactly as pi; the lock is taken at once. With ``title_of``
        (the title line of an oh-my-pi session being forked) the new file is oh-my-pi's:
        it starts with a title line of that title, which its header carries too."""
        storage = storage or StorageSettings()
        session_id = check_session_id(session_id) if session_id else new_session_id()
        created = iso_now(clock())
        file_path = new_session_path(
            cwd, created, session_id, storage=storage, session_dir=session_dir, path=path
        )
        header = SessionHeader(
            version=CURRENT_SESSION_VERSION,
            id=session_id,
            timestamp=created,
            cwd=cwd,
            parent_session=parent_session,
            title=(title_of.title or None) if title_of is not None else None,
            title_source=title_of.source if title_of is not None else None,
        )
        lock = SessionLock(file_path)
        lock.acquire()
        store = cls(
            path=file_path,
            header=header,
            header_line=msgspec.json.encode(header),
            scan_result=None,
            storage=storage,
            persisted=False,
            readonly=False,
            lock=lock,
            source_fd=None,
            clock=clock,
        )
        if title_of is not None:
            slot = title_line.starting_slot(title_of.title, title_of.source, header.timestamp)
            store.title_slot = slot
            store.dialect = dialect_for(True)
            store._view = store._new_view()
            store._foreign.skip_first = slot.length
        return store

    # ------------------------------------------------------------------ identity

    @property
    def session_id(self) -> str:
        return self.header.id

    @property
    def persisted(self) -> bool:
        """Whether the file exists on disk yet (pi writes it lazily)."""
        return self._file.persisted

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
    def byte_size(self) -> int:
        """How many bytes the session holds: its file's, or (not written yet) its lines'."""
        if self._file.persisted:
            return self._file.size
        return len(self._header_line) + self._file.unwritten_size

    @property
    def leaf_id(self) -> str | None:
        leaf = self._view.leaf
        return leaf.id if leaf is not None else None

    @property
    def inline_follow_bytes(self) -> int | None:
        """At most this many bytes of others' changes are read where the store is used
        (None: any amount). A daemon sets it and reads more in a worker thread
        (``catching_up``); beyond it a follow or an append is ``CatchUpNeeded``."""
        return self._foreign.inline_limit

    @inline_follow_bytes.setter
    def inline_follow_bytes(self, limit: int | None) -> None:
        self._foreign.inline_limit = limit

    @property
    def leaf_view(self) -> ContextView:
        return self._view

    def _new_view(self) -> ContextView:
        return _VIEWS[self.dialect.name](self.entry_of)

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
        cached = self._index.cached(record)
        if cached is not None:
            return cached
        line = self._line(record, line_check.readable_line)
        try:
            entry = decode_entry(line)
        except (msgspec.DecodeError, NotAnEntry, RecursionError):
            entry = None
        if entry is None or entry.id != record.id:
            # Indexed lines are JSON objects with that id: the file changed under us.
            self._foreign.suspect()
            raise line_check.changed(self.path, record)
        self._index.keep(record, entry)
        return entry

    def raw_line(self, record: EntryRecord) -> bytes:
        """The entry's line as stored (without the newline), as valid UTF-8 and strict JSON:
        what may be sent on as it is. ``FileChangedError`` if another program changed the
        line behind the daemon (``line_check``); the file is then read again."""
        if record.offset < 0:
            return self._file.unwritten_line(record.id)
        return self._line(record, line_check.checked_line)

    def _line(self, record: EntryRecord, check: line_check.LineCheck) -> bytes:
        data = self._file.read(record.offset, record.length)
        try:
            return check(record, data, self.path, self.recovery)
        except FileChangedError:
            self._foreign.suspect()
            raise

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

    # ------------------------------------------------------------------ context

    def build_context(self, leaf_id: str | Unset | None = UNSET) -> SessionContext:
        """pi's ``buildSessionContext`` for ``leaf_id`` (default: the current leaf)."""
        if leaf_id is None:
            return context_from_path([])
        if isinstance(leaf_id, Unset) or leaf_id == self.leaf_id:
            return self._view.context()
        record = self._index.get(leaf_id) or self._index.last()
        if record is None:
            return context_from_path([])
        view = self._new_view()
        view.reset(self._index.path_to(record))
        return view.context()

    def estimate_after(self, body: Mapping[str, Any], estimator: Estimator) -> int:
        """The context's estimated size, ignoring usage measured before it, if ``body``
        (an entry to append, e.g. a compaction) were the leaf's child: what oh-my-pi
        records as a compaction's ``tokensAfter``. Nothing is written."""
        batch = self._batch(ENTRY_TYPES, timestamp=iso_now(self._clock()), now_ms=None)
        record, entry, _ = batch.add(body)
        record.entry = entry
        view = self._new_view()
        view.reset([*self._view.path, record])
        return view.estimate_context(estimator).tokens

    # ------------------------------------------------------------------ moving the leaf

    def branch(self, entry_id: str) -> None:
        """Move the leaf to an existing entry. Nothing is written."""
        self._view.reset(self._index.path_to(self.record(entry_id)))

    def reset_leaf(self) -> None:
        """Move the leaf before the first entry: the next append starts a new root."""
        self._view.reset([])

    # ------------------------------------------------------------------ appending

    def append_entries(
        self,
        bodies: Sequence[Mapping[str, Any]],
        *,
        expected_leaf_id: str | Unset | None = UNSET,
        types: frozenset[str] | None = None,
    ) -> list[Entry]:
        """Append entries (JSON objects without id/parentId/timestamp) under the leaf.

        The batch is validated whole, then written with one ``write()``; each
        entry becomes the child of the one before. ``expected_leaf_id`` guards
        against appending under a leaf the caller did not know had moved. ``types``
        are the entry types allowed (default: those a client may append to a file of
        this dialect).
        """
        self._check_writable()
        if self.appends_held:
            raise BusyError(
                f"sessiond is rewriting {self.path}; try again in a moment",
                reason="fileRewriting",
                path=str(self.path),
            )
        if self._file.persisted:
            self._before_append()
        if not isinstance(expected_leaf_id, _Unset) and expected_leaf_id != self.leaf_id:
            raise ConflictError(
                f"the session's leaf is {self.leaf_id or 'none (no entries yet)'}, "
                f"not {expected_leaf_id or 'none'}",
                leafId=self.leaf_id,
                expectedLeafId=expected_leaf_id,
            )
        timestamp = iso_now(self._clock())
        edits = any(isinstance(b, Mapping) and b.get("type") == "context_edit" for b in bodies)
        batch = self._batch(
            self.dialect.appendable_types if types is None else types,
            timestamp=timestamp,
            now_ms=iso_to_ms(timestamp),
            on_path=edits,
        )
        for body in bodies:
            batch.add(body)
        if not batch.prepared:
            return []
        self._adopt(batch.prepared)
        return [entry for _, entry, _ in batch.prepared]

    def _batch(
        self, allowed: frozenset[str], *, timestamp: str, now_ms: int | None, on_path: bool = True
    ) -> EntryBatch:
        return EntryBatch(
            self._index,
            self.dialect,
            parent_id=self.leaf_id,
            timestamp=timestamp,
            now_ms=now_ms,
            allowed=allowed,
            # The ids on the leaf's path, gathered only for a batch that needs them.
            on_path={record.id for record in self._view.path} if on_path else set(),
        )

    def _adopt(self, prepared: list[Prepared]) -> None:
        """Write entries (validated, or a fork's copies) and index them under the leaf."""
        self._write(prepared)
        for record, entry, _ in prepared:
            self._index.add(record, entry)
            self._view.push(record, entry)

    def append(self, body: Mapping[str, Any]) -> Entry:
        return self.append_entries([body])[0]

    def append_label(self, target_id: str, label: str | None) -> Entry:
        """Set (or clear, with None or "") a target's label. Moves the leaf, as in pi."""
        body: dict[str, Any] = {"type": "label", "targetId": target_id}
        if label:
            body["label"] = label
        return self.append(body)

    def set_name(self, name: str) -> Entry:
        """Name the session: pi's ``session_info`` entry, or on oh-my-pi's files its
        ``title_change`` entry and the title line rewritten (see ``title_line``)."""
        slot = self.title_slot
        if slot is None:
            return self.append({"type": "session_info", "name": name.strip()})
        body = title_line.rename_body(slot, name)
        entry = self.append_entries([body], types=ENTRY_TYPES)[0]
        self.title_slot = title_line.write_title(
            slot,
            str(body["title"]),
            entry.timestamp,
            file=self._file,
            index=self._index,
            ledger=self._ledger,
            foreign=self._foreign,
            recovery=self.recovery,
        )
        return entry

    def branch_with_summary(
        self,
        from_id: str | None,
        summary: str,
        details: Any = None,
        *,
        from_extension: bool = False,
    ) -> Entry:
        """pi's ``branchWithSummary``: move to ``from_id`` and attach a branch summary there.

        Its ``fromId`` is the leaf the summary comes from (pi 1.6; 0.73.1 wrote the new
        position), or ``"root"`` when there was none."""
        old_leaf = self.leaf_id
        if from_id is None:
            self.reset_leaf()
        else:
            self.branch(from_id)
        body = self.dialect.branch_summary_body(
            position=from_id if from_id is not None else "root",
            old_leaf=old_leaf if old_leaf is not None else "root",
            summary=summary,
            details=details,
            from_extension=from_extension,
        )
        return self.append(body)

    def _write(self, prepared: list[Prepared]) -> None:
        """Put a validated batch on disk (or keep it pending, before the first assistant)."""
        if not self._file.persisted:
            self._file.hold([(record, line) for record, _, line in prepared])
            new_assistant = any(
                isinstance(entry, MessageEntry) and isinstance(entry.message, AssistantMessage)
                for _, entry, _ in prepared
            )
            if new_assistant or self._index.has_assistant:
                try:
                    self._write_unwritten()
                except BaseException:
                    self._file.unhold(len(prepared))
                    raise
            return
        force = any(record.type in _ALWAYS_SYNCED for record, _, _ in prepared)
        start = self._file.size
        data, offsets = self._file.append([line for _, _, line in prepared], sync=force)
        self._index.bump()
        for (record, _, _), offset in zip(prepared, offsets, strict=True):
            record.offset = offset
        status = self._file.appended_status()
        raced = status.st_size != self._file.size
        if raced:
            # Another program appended between our look at the file and our write: the
            # lines are whole (both sides append whole lines), but ours are elsewhere.
            leaf_path = list(self._view.path)
            before = self._foreign.place_among_others(
                prepared, data, start, self.recovery, self.title_slot
            )
            if before is not None and (followed := self._took(before)) is not None:
                self._foreign.announce_later(followed)
            # Our entries go under the leaf they were written under, whatever came before.
            self._view.reset(leaf_path)
        self._ledger.appended([record for record, _, _ in prepared])
        self._foreign.saw(None if raced else status)
        if raced:
            self._foreign.look_again()

    def write_now(self) -> None:
        """Write the session file now, even before the first assistant message (pi's
        ``ensureOnDisk``). Later appends are then written as they come."""
        self._check_writable()
        if not self._file.persisted:
            self._write_unwritten()

    def _write_unwritten(self) -> None:
        first = title_line.first_line(self.title_slot)
        held = len(self._index)
        # The batch being written is indexed after this returns.
        written = [
            r for r in self._file.write_held(first, self._header_line) if r.id not in self._index
        ]
        self._index.bump()
        self._ledger.written(
            ScanResult(
                header=self.header,
                header_data=msgspec.json.decode(self._header_line),
                version=CURRENT_SESSION_VERSION,
                records=list(self._index.records) + written,
                size=self._file.size,
                line_count=1 + bool(first) + held + len(written),
                title_slot=self.title_slot,
            )
        )
        self._foreign.saw()

    # ------------------------------------------------------------------ others' writes

    def follow(self) -> Followed | None:
        """Take in what another program did to the file since the store last looked:
        complete lines appended (indexed; the leaf moves to the last of them, as a reopen
        would put it), or a replaced, truncated or rewritten file (read again whole). None
        when nothing changed; one ``stat`` in that case. With a limit on what may be read
        here (``inline_follow_bytes``), more than that is ``CatchUpNeeded``."""
        plan = self.plan_changes()
        if plan is None:
            return None
        if self._foreign.too_much(plan):
            raise CatchUpNeeded(self.path)
        return self.take_changes(read_changes(plan))

    def plan_changes(self) -> ChangePlan | None:
        """Whether others changed the file, and what reading it (``catching_up``) needs
        (one ``stat``); None when nothing changed."""
        if not self._file.persisted or self._closed:
            return None
        return self._foreign.plan(self.title_slot)

    def take_changes(self, changes: Changes) -> Followed | None:
        """Apply what ``catching_up.read_changes`` read (memory only), unless the store
        moved on since the plan (then it looks again next time)."""
        if self._closed or not self._foreign.still_current(changes.plan):
            return None
        if changes.grown is not None:
            self._foreign.take_grown(changes.grown, self.recovery)
            return self._took(changes.grown)
        reloaded = changes.reloaded
        assert reloaded is not None
        # The lock, the settings and the identity of the store stay; everything read goes.
        self._file.forget_reader()
        self._file.stop_appending()
        result = reloaded.result
        self._take_scan(result)
        if reloaded.end != result.size:
            self._file.set_end(reloaded.end)
        self._ledger.indexed_at(result.indexed_size)
        self._foreign.took(reloaded.seen, reread=True)
        return Followed(reason="fileRewritten", appended_ids=[])

    def _took(self, grown: Grown) -> Followed | None:
        """The leaf after others' lines were indexed: at the last of them, as a reopen
        would put it."""
        appended = grown.found.records
        if not appended:
            return None
        slot = self.title_slot
        if grown.title_line is not None and slot is not None:
            self.title_slot = title_line.reread(slot, grown.title_line)
        self._view.reset(self._index.path_to(appended[-1]))
        return Followed(reason="fileAppended", appended_ids=[r.id for r in appended])

    def take_unannounced(self) -> list[Followed]:
        """What an append took in before writing (others' lines that arrived just then),
        for the caller to announce."""
        return self._foreign.take_unannounced()

    def _before_append(self) -> None:
        """Take in what others appended (the new entry goes under the leaf that includes
        it), and never write after someone else's unfinished line."""
        followed = self.follow()
        if followed is not None:
            self._foreign.announce_later(followed)
        self._foreign.cut_unfinished(self.recovery)

    def stale_tail_cut(self) -> tuple[TornTail, Callable[[], Observation]] | None:
        """A crashed writer's unfinished last line, if any, and the file work that cuts it
        off (any thread; ``take_cut`` then takes what it saw)."""
        return self._foreign.stale_tail_cut()

    def take_cut(self, torn: TornTail, seen: Observation) -> None:
        self._foreign.take_cut(torn, seen, self.recovery)

    # ------------------------------------------------------------------ forks, rewrites

    def fork(
        self,
        leaf_id: str,
        *,
        path: str | os.PathLike[str] | None = None,
        session_dir: str | os.PathLike[str] | None = None,
    ) -> SessionStore:
        """pi's ``createBranchedSession``: the root-to-``leaf_id`` path as a new session
        (``rewriting.fork_plan``), written at once when the path has an assistant message."""
        return SessionStore.from_fork(self.fork_plan(leaf_id, path=path, session_dir=session_dir))

    def fork_plan(
        self,
        leaf_id: str,
        *,
        path: str | os.PathLike[str] | None = None,
        session_dir: str | os.PathLike[str] | None = None,
    ) -> rewriting.ForkPlan:
        """A fork decided from the index (memory only); ``from_fork`` makes it, anywhere."""
        return rewriting.fork_plan(
            self._index.path_to(self.record(leaf_id)),
            self.entry_of,
            self._file.unwritten_line,
            self._index.labels,
            source=self.path,
            header=self.header,
            storage=self.storage,
            clock=self._clock,
            path=path,
            session_dir=session_dir,
            title_of=self.title_slot,
        )

    @classmethod
    def from_fork(cls, plan: rewriting.ForkPlan) -> SessionStore:
        """The new session of ``plan`` (file work: the copied lines are read and written)."""
        new = cls.create(
            plan.header.cwd,
            session_dir=plan.session_dir,
            path=plan.path,
            parent_session=str(plan.source),
            storage=plan.storage,
            clock=plan.clock,
            title_of=plan.title_of,
        )
        try:
            copied = rewriting.fork_lines(plan)
            if copied:
                new._adopt(copied)
            for target, label in plan.labels:
                new.append_label(target, label)
        except BaseException:
            new.close()
            raise
        return new

    def rewrite_entries(self, replacements: Mapping[str, Mapping[str, Any]]) -> None:
        """Replace whole entries (by id) through an atomic rewrite of the file, here.

        Every other line, damaged ones included, is copied byte for byte. A daemon does
        the file work in a worker thread: ``plan_rewrite``, ``rewriting.write_rewrite``
        (any thread), ``take_rewrite``."""
        plan = self.plan_rewrite(replacements)
        if plan is not None:
            self.take_rewrite(plan, rewriting.write_rewrite(plan))

    def plan_rewrite(
        self, replacements: Mapping[str, Mapping[str, Any]]
    ) -> rewriting.RewritePlan | None:
        """Check and encode the replacements; None when they were taken in memory (a
        session not written yet). Nothing more is appended until ``take_rewrite``: the
        descriptor for appending is closed here."""
        self._check_writable()
        encoded = rewriting.encode_replacements(replacements, self.record)
        if not self._file.persisted:
            for entry_id, line in encoded.items():
                self._file.replace_unwritten(entry_id, line)
                self._index.replaced(entry_id, len(line))
            self._view.reset(list(self._view.path))
            return None
        self._file.stop_appending()
        return rewriting.rewrite_plan(
            self.path, self._foreign.skip_first, self._index.records, encoded, self.record
        )

    def take_rewrite(self, plan: rewriting.RewritePlan, done: rewriting.Rewritten) -> None:
        """The store after ``rewriting.write_rewrite`` (memory only, and a new descriptor
        to append)."""
        self._index.move_offsets(done.new_offsets)
        for entry_id, line in plan.encoded.items():
            self._index.replaced(entry_id, len(line))
        self._file.rewritten(done.size)
        # Offsets of damaged lines moved: the next open scans and indexes afresh.
        self._ledger.drop()
        self._foreign.took(done.seen)
        self._view.reset(list(self._view.path))

    # ------------------------------------------------------------------ durability

    def sync(self) -> None:
        """fsync appended lines (the "batch" policy calls this on a timer)."""
        self._file.sync()

    @property
    def needs_sync(self) -> bool:
        return self._file.needs_sync

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._file.stop_appending()
            if self.storage.persistent_index:
                # A daemon saves it in a thread: hashing the file's windows and writing
                # every record is file work it does not do where its clients are served.
                self._ledger.save(
                    self.path,
                    self._file.open_reader,
                    self._file.size,
                    self._header_line,
                    apart=self.inline_follow_bytes is not None,
                )
        finally:
            self._file.forget_reader()
            if self._lock is not None:
                self._lock.release()

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _check_writable(self) -> None:
        if self.readonly:
            raise StorageError(f"{self.path} was opened read-only", path=str(self.path))
        if self._closed:
            raise StorageError(f"{self.path} is closed", path=str(self.path))
