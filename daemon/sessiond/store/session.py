"""A session file opened for reading and writing: pi's SessionManager, made durable.

``SessionStore`` is the facade over the owners of a session's state: what it answers from
(``ReadableSession``: the entry index and lines read back), the file's bytes
(``session_file``), appended entries' validation and writing (``entry_validation``,
``appending``), others' writes (``foreign_writes``, ``catching_up``), the persistent
index's ledger (``ledger``), forks and rewrites (``rewriting``, ``title_line``). It
decides the order of the steps; each owner keeps its own state.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from sessiond.core.context import UNSET, Unset, iso_to_ms
from sessiond.core.entries import ENTRY_TYPES, Entry
from sessiond.core.title_slot import TitleSlot
from sessiond.core.tokens import Estimator
from sessiond.errors import BusyError, StorageError
from sessiond.paths import iso_now
from sessiond.settings import StorageSettings
from sessiond.wire.recovery import TornTail

from . import rewriting, title_line
from .appending import EntryWriter
from .catching_up import ChangePlan, Changes, read_changes
from .entry_index import EntryIndex
from .entry_reading import EntryReader
from .entry_validation import EntryBatch, Prepared, check_expected_leaf
from .file_watch import Observation
from .foreign_writes import CatchUpNeeded, Followed, ForeignWrites
from .ledger import Ledger
from .prepared_read import PreparedRead
from .readable_session import ReadableSession
from .scan_result import ScanResult
from .session_file import SessionFile
from .store_parts import Clock, StoreParts, existing_parts, new_parts, utc_now


class SessionStore(ReadableSession):
    """One session file: what it holds, its current leaf, appends, and the file itself."""

    def __init__(self, parts: StoreParts) -> None:
        path, header, storage = parts.path, parts.header, parts.storage
        self.storage = storage
        self.readonly = parts.readonly
        self._header_line = parts.header_line
        self._lock = parts.lock
        self._clock = parts.clock
        self._closed = False
        scan_result = parts.scan_result
        self._file = file = SessionFile(
            path, fsync=storage.fsync, persisted=scan_result is not None, source_fd=parts.source_fd
        )
        self._entries = entries = EntryIndex()
        self._ledger = ledger = Ledger()
        self._foreign = foreign = ForeignWrites(
            file, entries, ledger, header=header, use_index=storage.persistent_index
        )
        self._writer = EntryWriter(
            file, entries, ledger, foreign, header=header, header_line=parts.header_line
        )
        self._rewriter = rewriting.Rewriter(
            file, entries, ledger, foreign, header=header, storage=storage, clock=parts.clock
        )
        super().__init__(path, header, entries, EntryReader(file, entries, foreign))
        # While a rewrite of the file runs apart (in a worker thread), nothing may be
        # appended: it would go to the file the rewrite replaces.
        self.appends_held = False
        self._take_scan(scan_result)
        if parts.title_slot is not None:
            self.start_titled(parts.title_slot)
            foreign.skip_first = parts.title_slot.length
        if scan_result is not None and parts.source_fd is None:
            torn = scan_result.report.torn_tail
            if torn is not None and torn.saved_to is None:
                # Not cut off (read-only, or another program may still be writing it).
                file.set_end(torn.offset)
            ledger.indexed_at(scan_result.indexed_size)
            # Following is best effort: reads report their own errors.
            with contextlib.suppress(OSError, StorageError):
                foreign.saw()

    def _take_scan(
        self, scan_result: ScanResult | None, prepared: PreparedRead | None = None
    ) -> None:
        """Everything read from a scan of the file (or none: a new session); ``prepared``:
        its index and leaf, made ready where it was read."""
        self._file.end_as_read(scan_result)
        self._ledger.start(scan_result)
        if prepared is None:
            self.load(scan_result)
        else:
            self.adopt(prepared)
        self._foreign.skip_first = self.title_slot.length if self.title_slot else 0

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        storage: StorageSettings | None = None,
        readonly: bool = False,
        clock: Clock = utc_now,
    ) -> SessionStore:
        """Open an existing session file (a regular file, never through a link). Writable:
        locked, a torn last line cut off into a ``.corrupt`` file, an old version migrated
        by atomic rewrite. Read-only: nothing changed (a torn tail only reported, a
        migration read from an anonymous temporary file)."""
        parts = existing_parts(
            Path(path).absolute(), storage or StorageSettings(), readonly=readonly, clock=clock
        )
        try:
            return cls(parts)
        except BaseException:
            parts.release()
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
        clock: Clock = utc_now,
        title_of: TitleSlot | None = None,
    ) -> SessionStore:
        """Start a new session. Nothing is written until the first assistant message
        (or ``write_now``), exactly as pi; the lock is taken at once. With ``title_of``
        (the title line of an oh-my-pi session being forked) the new file is oh-my-pi's:
        it starts with a title line of that title, which its header carries too."""
        parts = new_parts(
            cwd,
            session_dir=session_dir,
            path=path,
            session_id=session_id,
            parent_session=parent_session,
            storage=storage or StorageSettings(),
            clock=clock,
            title_of=title_of,
        )
        return cls(parts)

    # ------------------------------------------------------------------ the file

    @property
    def persisted(self) -> bool:
        """Whether the file exists on disk yet (pi writes it lazily)."""
        return self._file.persisted

    @property
    def byte_size(self) -> int:
        """How many bytes the session holds: its file's, or (not written yet) its lines'."""
        if self._file.persisted:
            return self._file.size
        return len(self._header_line) + self._file.unwritten_size

    @property
    def inline_follow_bytes(self) -> int | None:
        """At most this many bytes of others' changes are read where the store is used (None:
        any amount; a daemon sets it): beyond it a follow or an append is ``CatchUpNeeded``."""
        return self._foreign.inline_limit

    @inline_follow_bytes.setter
    def inline_follow_bytes(self, limit: int | None) -> None:
        self._foreign.inline_limit = limit

    def estimate_after(self, body: Mapping[str, Any], estimator: Estimator) -> int:
        """The context's estimated size, ignoring usage measured before it, if ``body``
        (an entry to append, e.g. a compaction) were the leaf's child: what oh-my-pi
        records as a compaction's ``tokensAfter``. Nothing is written."""
        batch = self._batch(ENTRY_TYPES, timestamp=iso_now(self._clock()), now_ms=None)
        record, entry, _ = batch.add(body)
        record.entry = entry
        view = self.new_view()
        view.reset([*self.leaf_view.path, record])
        return view.estimate_context(estimator).tokens

    # ------------------------------------------------------------------ appending

    def append_entries(
        self,
        bodies: Sequence[Mapping[str, Any]],
        *,
        expected_leaf_id: str | Unset | None = UNSET,
        types: frozenset[str] | None = None,
    ) -> list[Entry]:
        """Append entries (JSON objects without id/parentId/timestamp) under the leaf, each
        the child of the one before: validated whole, then written in one ``write()``.
        ``expected_leaf_id`` guards against a leaf the caller did not know had moved;
        ``types``: the entry types allowed (default: a client's, for the dialect)."""
        self._check_writable()
        if self.appends_held:
            raise BusyError(
                f"sessiond is rewriting {self.path}; try again in a moment",
                reason="fileRewriting",
                path=str(self.path),
            )
        if self._file.persisted:
            self._before_append()
        if not isinstance(expected_leaf_id, Unset):
            check_expected_leaf(expected_leaf_id, self.leaf_id)
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
            self._entries,
            self.dialect,
            parent_id=self.leaf_id,
            timestamp=timestamp,
            now_ms=now_ms,
            allowed=allowed,
            # The ids on the leaf's path, gathered only for a batch that needs them.
            on_path={record.id for record in self.leaf_view.path} if on_path else set(),
        )

    def _adopt(self, prepared: list[Prepared]) -> None:
        """Write entries (validated, or a fork's copies) and index them under the leaf."""
        before = self._writer.write(prepared, title_slot=self.title_slot, recovery=self.recovery)
        if before is not None:
            # Others' lines landed just before ours: announced; ours go under the leaf
            # they were written under, whatever came before.
            leaf_path = list(self.leaf_view.path)
            if (followed := self.took_appended(before)) is not None:
                self._foreign.announce_later(followed)
            self.leaf_view.reset(leaf_path)
        for record, entry, _ in prepared:
            self._entries.add(record, entry)
            self.leaf_view.push(record, entry)

    def append(self, body: Mapping[str, Any]) -> Entry:
        return self.append_entries([body])[0]

    def append_label(self, target_id: str, label: str | None) -> Entry:
        """Set (or clear, with None or "") a target's label. Moves the leaf, as in pi."""
        body: dict[str, Any] = {"type": "label", "targetId": target_id}
        if label:
            body["label"] = label
        return self.append(body)

    def set_name(self, name: str, *, rewrite_apart: bool = False) -> Entry:
        """Name the session: pi's ``session_info`` entry, or on oh-my-pi's files its
        ``title_change`` entry and the title line rewritten (see ``title_line``); with
        ``rewrite_apart`` a rewrite of the file that takes is left (``title_pending``)."""
        slot = self.title_slot
        if slot is None:
            return self.append({"type": "session_info", "name": name.strip()})
        body = title_line.rename_body(slot, name)
        entry = self.append_entries([body], types=ENTRY_TYPES)[0]
        self.title_slot = self._rewriter.retitle(
            slot, str(body["title"]), entry.timestamp, self.recovery
        )
        if not rewrite_apart and (plan := self.plan_title()) is not None:
            self.take_title(plan, rewriting.rewrite_title(plan))
        return entry

    @property
    def title_pending(self) -> bool:
        return self._rewriter.title_pending

    def plan_title(self) -> rewriting.TitleRewrite | None:
        """The rename's rewrite left, for ``rewriting.rewrite_title`` then ``take_title``."""
        return self._rewriter.plan_title(self.title_slot)

    def take_title(self, plan: rewriting.TitleRewrite, done: rewriting.Rewritten) -> None:
        self.title_slot = self._rewriter.take_title(plan, done, self.recovery)

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

    def write_now(self) -> None:
        """Write the session file now, even before the first assistant message (pi's
        ``ensureOnDisk``). Later appends are then written as they come."""
        self._check_writable()
        if not self._file.persisted:
            self._writer.write_held(self.title_slot)

    # ------------------------------------------------------------------ others' writes

    def follow(self) -> Followed | None:
        """Take in what others did to the file since the store last looked: lines appended
        (the leaf moves to the last, as a reopen would put it), or a file replaced or
        rewritten (read again whole). None: nothing changed (one ``stat``); more than
        ``inline_follow_bytes`` of changes is ``CatchUpNeeded``."""
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
            return self.took_appended(changes.grown)
        reloaded = changes.reloaded
        assert reloaded is not None
        # The lock, the settings and the identity of the store stay; everything read goes.
        self._file.forget_reader()
        self._file.stop_appending()
        result = reloaded.result
        self._take_scan(result, reloaded.prepared)
        if reloaded.end != result.size:
            self._file.set_end(reloaded.end)
        self._ledger.indexed_at(result.indexed_size)
        self._foreign.took(reloaded.seen, reread=changes.plan)
        return Followed(reason="fileRewritten", appended_ids=[])

    def take_unannounced(self) -> list[Followed]:
        """Others' lines an append took in before writing, for the caller to announce."""
        return self._foreign.take_unannounced()

    def _before_append(self) -> None:
        """Take in others' lines first (ours go under them), never write after an unfinished one."""
        if (followed := self.follow()) is not None:
            self._foreign.announce_later(followed)
        self._foreign.cut_unfinished(self.recovery)

    def stale_tail_cut(self) -> tuple[TornTail, Callable[[], Observation]] | None:
        """A crashed writer's unfinished last line, and the file work (any thread) that cuts it."""
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
        return self._rewriter.fork_plan(
            self.record(leaf_id),
            self.entry_of,
            self.title_slot,
            path=path,
            session_dir=session_dir,
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
            if copied := rewriting.fork_lines(plan):
                new._adopt(copied)
            for target, label in plan.labels:
                new.append_label(target, label)
        except BaseException:
            new.close()
            raise
        return new

    def rewrite_entries(self, replacements: Mapping[str, Mapping[str, Any]]) -> None:
        """Replace whole entries (by id) through an atomic rewrite of the file, every other
        line kept, here (a daemon: ``plan_rewrite``, ``write_rewrite`` apart, ``take_rewrite``)."""
        plan = self.plan_rewrite(replacements)
        if plan is not None:
            self.take_rewrite(plan, rewriting.write_rewrite(plan))

    def plan_rewrite(
        self, replacements: Mapping[str, Mapping[str, Any]]
    ) -> rewriting.RewritePlan | None:
        """The rewrite decided (``rewriting.Rewriter.plan``); None when it was done in
        memory (a session not written yet)."""
        self._check_writable()
        plan = self._rewriter.plan(replacements, self.record)
        if plan is None:
            self.leaf_view.reset(list(self.leaf_view.path))
        return plan

    def take_rewrite(self, plan: rewriting.RewritePlan, done: rewriting.Rewritten) -> None:
        """The store after ``rewriting.write_rewrite`` (memory only)."""
        self._rewriter.take(plan, done)
        self.leaf_view.reset(list(self.leaf_view.path))

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
