"""A session file opened for reading and writing: pi's SessionManager, made durable.

``SessionStore.open`` reads an existing file (``opening``: the persistent index
when one matches the file, else a scan; a torn tail cut off, an old version
migrated), in time linear in what it has to read and memory bounded by the
longest line read (``lines.MAX_LINE_BYTES``). ``SessionStore.create`` starts a new
session that is written to disk only when the first assistant message arrives, as
pi does. Every mutation goes through ``append_entries``: one ``write()`` of whole
lines under the current leaf, then the index and the leaf view are updated.
Other programs' writes to the file are taken in by ``following``; forks and
rewrites are ``rewriting``'s.
"""

from __future__ import annotations

import contextlib
import os
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

import msgspec

from sessiond.core.absent import without_null_optionals
from sessiond.core.context import (
    UNSET,
    SessionContext,
    Unset,
    context_from_path,
    iso_to_ms,
    path_to,
)
from sessiond.core.decode import NotAnEntry, decode_entry, decode_strict_entry
from sessiond.core.dialect import Dialect, dialect_for
from sessiond.core.entries import (
    CURRENT_SESSION_VERSION,
    ENTRY_TYPES,
    Entry,
    KnownEntry,
    LabelEntry,
    MessageEntry,
    SessionHeader,
    SessionInfoEntry,
)
from sessiond.core.messages import AgentMessage, AssistantMessage
from sessiond.core.title_slot import TitleSlot
from sessiond.core.tokens import Estimator
from sessiond.errors import (
    BusyError,
    ConflictError,
    FileChangedError,
    InvalidEntryError,
    InvalidSessionFileError,
    NotFoundError,
    StorageError,
)
from sessiond.paths import check_session_id, default_session_dir, iso_now, session_file_name
from sessiond.settings import StorageSettings
from sessiond.wire.recovery import DamagedLine, RecoveryReport

from . import following, line_check, rewriting, title_line
from .edits import edit_replacement, editable_role
from .fileio import AppendFile, create_whole, path_error
from .follow import FileFollower
from .following import Followed, ledger_of
from .ids import new_entry_id, new_session_id
from .leaf_view import LeafView
from .lines import MAX_LINE_BYTES
from .lock import SessionLock
from .omp_leaf_view import OmpLeafView
from .opening import read_session
from .records import EntryRecord, new_record
from .safe_files import check_regular_or_absent, make_private_directories, open_regular
from .scan import EAGER_TYPES, ScanResult, decode_metadata

FsyncPolicy = Literal["always", "batch", "never"]
Clock = Callable[[], datetime]

_MESSAGE_CACHE_SIZE: Final = 4096
# Roles a message entry must never carry: pi synthesises them from entries.
_FORBIDDEN_ROLES: Final = frozenset({"compactionSummary", "branchSummary"})
_BASE_KEYS: Final = ("id", "parentId", "timestamp")
# Entries that are fsynced before an append returns, whatever the policy.
_ALWAYS_SYNCED: Final = frozenset({"compaction", "branch_summary"})
_NAMING_TYPES: Final = frozenset({"session_info", "title_change"})
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


class RecordNode(msgspec.Struct, kw_only=True):
    """One node of ``get_tree``: an entry's record, its children, its current label."""

    record: EntryRecord
    children: list[RecordNode]
    label: str | None = None


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
        self._persisted = persisted
        # A read-only open of an old version reads its migrated copy (an anonymous
        # temporary file) in place of the file.
        self._read_fd: int | None = source_fd
        self._append: AppendFile | None = None
        self._closed = False
        self._follower = FileFollower(path)
        # Bumped whenever the index changes (appends, others' lines, a reload), so that
        # changes read elsewhere (``catching_up``) are applied only to the state they
        # were read for.
        self._generation = 0
        self._inline_follow_bytes: int | None = None
        # While a rewrite of the file runs apart (in a worker thread), nothing may be
        # appended: it would go to the file the rewrite replaces.
        self.appends_held = False
        # The file as a scan would describe it (the lines read and written since
        # included): what the persistent index keeps at close. None when it cannot be
        # kept (not written yet, read through a migrated copy, rewritten since).
        self._ledger: ScanResult | None = None
        self._ledger_saved_size = -1
        self._unread_lines = 0  # lines other programs added that the ledger does not have
        self._unannounced: list[Followed] = []
        self._take_scan(scan_result)
        # Lines of a session not yet on disk, in append order.
        self._unwritten: dict[str, bytes] = {}
        self._unwritten_order: list[EntryRecord] = []
        if scan_result is not None and source_fd is None:
            self._follow_from(scan_result)

    def _take_scan(self, scan_result: ScanResult | None) -> None:
        """Build the in-memory index from a scan (or an empty one), leaf at the last entry."""
        self._generation += 1
        self._ledger = None
        # oh-my-pi's title line, if the file starts with one; it decides the dialect.
        self.title_slot: TitleSlot | None = (
            scan_result.title_slot if scan_result is not None else None
        )
        self.dialect: Dialect = dialect_for(self.title_slot is not None)
        self._follower.skip_first = self.title_slot.length if self.title_slot else 0
        self.recovery = scan_result.report if scan_result is not None else RecoveryReport()
        self._size = scan_result.size if scan_result is not None else 0
        self._needs_newline = scan_result is not None and not scan_result.ends_with_newline
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
        self._view: ContextView = self._new_view()
        if scan_result is not None:
            if scan_result.report.torn_tail is None or scan_result.report.torn_tail.saved_to:
                self._ledger = ledger_of(scan_result)
            self._index_scanned(scan_result)
        leaf = self._records[-1] if self._records else None
        self._view.reset(self._path_records(leaf) if leaf is not None else [])

    def _follow_from(self, scan_result: ScanResult) -> None:
        torn = scan_result.report.torn_tail
        if torn is not None and torn.saved_to is None:
            # Not cut off (read-only, or another program may still be writing it).
            self._size = torn.offset
            self._needs_newline = False
        if scan_result.indexed_size is not None:
            self._ledger_saved_size = scan_result.indexed_size
        # Following is best effort: reads report their own errors.
        with contextlib.suppress(OSError, StorageError):
            self._follower.saw(self._reader(), self._size)

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
        lock: SessionLock | None = None
        if not readonly:
            # Refuse a link or a FIFO before making a lock file beside it; the open
            # after the lock checks again, on the descriptor.
            try:
                exists = check_regular_or_absent(file_path)
            except (OSError, ValueError) as exc:
                raise path_error("open", file_path, exc) from None
            if not exists:
                raise InvalidSessionFileError(
                    f"{file_path}: no such session file", reason="notFound", path=str(file_path)
                )
            lock = SessionLock(file_path)
            lock.acquire()
        source_fd: int | None = None
        try:
            read = read_session(file_path, readonly=readonly, use_index=storage.persistent_index)
            result, source_fd = read.result, read.source_fd
            store = cls(
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
        return store

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
        if path is not None:
            file_path = Path(path).absolute()
        else:
            directory = (
                Path(session_dir)
                if session_dir is not None
                else default_session_dir(cwd, storage.session_dir)
            )
            file_path = directory.absolute() / session_file_name(created, session_id)
        try:
            # A link, FIFO or directory at the path is refused (not replaced later).
            taken = check_regular_or_absent(file_path) and file_path.stat().st_size > 0
        except (OSError, ValueError) as exc:
            raise path_error("create", file_path, exc) from None
        if taken:
            raise ConflictError(
                f"{file_path} already exists; open it instead of creating a session there",
                path=str(file_path),
            )
        try:
            make_private_directories(file_path.parent)
        except (OSError, ValueError) as exc:
            raise path_error("create the session directory", file_path.parent, exc) from None
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
            title_line.start(store, title_of.title, title_of.source)
        return store

    # ------------------------------------------------------------------ identity

    @property
    def session_id(self) -> str:
        return self.header.id

    @property
    def persisted(self) -> bool:
        """Whether the file exists on disk yet (pi writes it lazily)."""
        return self._persisted

    @property
    def name(self) -> str | None:
        """The session's name: on pi's files the last ``session_info`` name (an empty one
        clears it), on oh-my-pi's the title in its title line."""
        if self.title_slot is not None:
            return self.title_slot.title or None
        return self._name

    @property
    def entry_count(self) -> int:
        return len(self._records)

    @property
    def byte_size(self) -> int:
        """How many bytes the session holds: its file's, or (not written yet) its lines'."""
        if self._persisted:
            return self._size
        return len(self._header_line) + sum(len(line) + 1 for line in self._unwritten.values())

    @property
    def leaf_id(self) -> str | None:
        leaf = self._view.leaf
        return leaf.id if leaf is not None else None

    @property
    def inline_follow_bytes(self) -> int | None:
        """At most this many bytes of others' changes are read where the store is used
        (None: any amount). A daemon sets it and reads more in a worker thread
        (``catching_up``); beyond it a follow or an append is ``CatchUpNeeded``."""
        return self._inline_follow_bytes

    @inline_follow_bytes.setter
    def inline_follow_bytes(self, limit: int | None) -> None:
        self._inline_follow_bytes = limit
        self._follower.scan_limit = limit

    @property
    def leaf_view(self) -> ContextView:
        return self._view

    def _new_view(self) -> ContextView:
        return _VIEWS[self.dialect.name](self.entry_of)

    @property
    def labels(self) -> Mapping[str, str]:
        return self._labels

    # ------------------------------------------------------------------ reading

    def has_entry(self, entry_id: str) -> bool:
        return entry_id in self._by_id

    def record(self, entry_id: str) -> EntryRecord:
        record = self._by_id.get(entry_id)
        if record is None:
            raise NotFoundError(f"Entry {entry_id} not found", entryId=entry_id)
        return record

    def records(self) -> Sequence[EntryRecord]:
        """Every entry's record in file order, all branches."""
        return self._records

    def get_entry(self, entry_id: str) -> Entry | None:
        record = self._by_id.get(entry_id)
        return self.entry_of(record) if record is not None else None

    def entries(self) -> Iterator[Entry]:
        """Every entry in file order (decodes them all: for tools and tests)."""
        for record in self._records:
            yield self.entry_of(record)

    def entry_of(self, record: EntryRecord) -> Entry:
        """The decoded entry of a record. Metadata entries stay cached on the record;
        message bodies go through a bounded cache so memory stays flat."""
        if record.entry is not None:
            return record.decoded  # type: ignore[return-value]
        key = id(record)
        cached = self._message_cache.get(key)
        if cached is not None:
            self._message_cache.move_to_end(key)
            return cached
        entry = self._decode(record)
        if record.type == "message":
            self._cache_message(record, entry)
        else:
            record.entry = entry
        return entry

    def _cache_message(self, record: EntryRecord, entry: Entry) -> None:
        self._message_cache[id(record)] = entry
        if len(self._message_cache) > _MESSAGE_CACHE_SIZE:
            self._message_cache.popitem(last=False)

    def _decode(self, record: EntryRecord) -> Entry:
        line = self._line(record, line_check.readable_line)
        try:
            entry = decode_entry(line)
        except (msgspec.DecodeError, NotAnEntry, RecursionError):
            entry = None
        if entry is None or entry.id != record.id:
            # Indexed lines are JSON objects with that id: the file changed under us.
            self._follower.suspect()
            raise line_check.changed(self.path, record)
        return entry

    def raw_line(self, record: EntryRecord) -> bytes:
        """The entry's line as stored (without the newline), as valid UTF-8 and strict JSON:
        what may be sent on as it is. ``FileChangedError`` if another program changed the
        line behind the daemon (``line_check``); the file is then read again."""
        if record.offset < 0:
            return self._unwritten[record.id]
        return self._line(record, line_check.checked_line)

    def _line(self, record: EntryRecord, check: line_check.LineCheck) -> bytes:
        data = os.pread(self._reader(), record.length, record.offset)
        try:
            return check(record, data, self.path, self.recovery)
        except FileChangedError:
            self._follower.suspect()
            raise

    def raw_message(self, record: EntryRecord) -> bytes:
        """The original JSON of a message entry's ``message``, unknown fields included."""
        return _raw_message(self.raw_line(record))

    def _reader(self) -> int:
        if self._read_fd is None:
            try:
                self._read_fd = open_regular(self.path, os.O_RDONLY)
            except OSError as exc:
                raise StorageError(f"cannot read {self.path}: {exc.strerror}") from None
        return self._read_fd

    # ------------------------------------------------------------------ the tree

    def path_records(self, from_id: str | None = None) -> list[EntryRecord]:
        """Root-first records of the path to ``from_id`` (default: the leaf)."""
        if from_id is None:
            return list(self._view.path)
        return self._path_records(self.record(from_id))

    def _path_records(self, leaf: EntryRecord) -> list[EntryRecord]:
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
            return path_to(leaf, self._by_id)  # a cycle: the walk that watches for one
        path.reverse()
        return path

    def get_branch(self, from_id: str | None = None) -> list[Entry]:
        """pi's ``getBranch``: the entries root to ``from_id`` (default: the leaf)."""
        return [self.entry_of(r) for r in self.path_records(from_id)]

    def get_children(self, parent_id: str) -> list[Entry]:
        return [self.entry_of(r) for r in self.children_records(parent_id)]

    def children_records(self, parent_id: str) -> list[EntryRecord]:
        return [r for r in self._children_index().get(parent_id, ()) if r.id != parent_id]

    def label_timestamp(self, entry_id: str) -> str | None:
        """When the current label of an entry was set (pi's ``labelTimestamp``)."""
        return self._label_times.get(entry_id)

    def get_label(self, entry_id: str) -> str | None:
        return self._labels.get(entry_id)

    def get_tree(self) -> list[RecordNode]:
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

    # ------------------------------------------------------------------ context

    def build_context(self, leaf_id: str | Unset | None = UNSET) -> SessionContext:
        """pi's ``buildSessionContext`` for ``leaf_id`` (default: the current leaf)."""
        if leaf_id is None:
            return context_from_path([])
        if isinstance(leaf_id, Unset) or leaf_id == self.leaf_id:
            return self._view.context()
        record = self._by_id.get(leaf_id)
        if record is None:
            record = self._records[-1] if self._records else None
            if record is None:
                return context_from_path([])
        view = self._new_view()
        view.reset(self._path_records(record))
        return view.context()

    def estimate_after(self, body: Mapping[str, Any], estimator: Estimator) -> int:
        """The context's estimated size, ignoring usage measured before it, if ``body``
        (an entry to append, e.g. a compaction) were the leaf's child: what oh-my-pi
        records as a compaction's ``tokensAfter``. Nothing is written."""
        on_path = {record.id for record in self._view.path}
        record, entry, _ = self._prepare(
            body, 0, self.leaf_id, {}, iso_now(self._clock()), None, on_path, ENTRY_TYPES
        )
        record.entry = entry
        view = self._new_view()
        view.reset([*self._view.path, record])
        return view.estimate_context(estimator).tokens

    # ------------------------------------------------------------------ moving the leaf

    def branch(self, entry_id: str) -> None:
        """Move the leaf to an existing entry. Nothing is written."""
        record = self.record(entry_id)
        self._view.reset(self._path_records(record))

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
        if self._persisted:
            following.before_append(self)
        if not isinstance(expected_leaf_id, Unset) and expected_leaf_id != self.leaf_id:
            raise ConflictError(
                f"the session's leaf is {self.leaf_id or 'none (no entries yet)'}, "
                f"not {expected_leaf_id or 'none'}",
                leafId=self.leaf_id,
                expectedLeafId=expected_leaf_id,
            )
        timestamp = iso_now(self._clock())
        now_ms = iso_to_ms(timestamp)
        parent_id = self.leaf_id
        # The batch's entries so far, with the role an edit of them would change.
        taken: dict[str, str | None] = {}
        # The ids on the leaf's path, gathered once, and only for a batch with an edit.
        on_path: set[str] = set()
        if any(isinstance(b, Mapping) and b.get("type") == "context_edit" for b in bodies):
            on_path = {record.id for record in self._view.path}
        prepared: list[tuple[EntryRecord, Entry, bytes]] = []
        for index, body in enumerate(bodies):
            record, entry, line = self._prepare(
                body,
                index,
                parent_id,
                taken,
                timestamp,
                now_ms,
                on_path,
                self.dialect.appendable_types if types is None else types,
            )
            prepared.append((record, entry, line))
            taken[record.id] = editable_role(record)
            parent_id = record.id
        if not prepared:
            return []
        self._write(prepared)
        for record, entry, _ in prepared:
            self._index(record, entry)
            self._view.push(record, entry)
        return [entry for _, entry, _ in prepared]

    def append(self, body: Mapping[str, Any]) -> Entry:
        return self.append_entries([body])[0]

    def append_message(self, message: AgentMessage) -> Entry:
        return self.append({"type": "message", "message": msgspec.to_builtins(message)})

    def append_label(self, target_id: str, label: str | None) -> Entry:
        """Set (or clear, with None or "") a target's label. Moves the leaf, as in pi."""
        body: dict[str, Any] = {"type": "label", "targetId": target_id}
        if label:
            body["label"] = label
        return self.append(body)

    def set_name(self, name: str) -> Entry:
        """Name the session: pi's ``session_info`` entry, or on oh-my-pi's files its
        ``title_change`` entry and the title line rewritten (see ``title_line``)."""
        if self.title_slot is not None:
            return title_line.rename(self, name)
        return self.append({"type": "session_info", "name": name.strip()})

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

    def _prepare(
        self,
        body: Mapping[str, Any],
        index: int,
        parent_id: str | None,
        taken: dict[str, str | None],
        timestamp: str,
        now_ms: int | None,
        on_path: set[str],
        allowed: frozenset[str],
    ) -> tuple[EntryRecord, Entry, bytes]:
        where = f"entries[{index}]"
        if not isinstance(body, Mapping):
            raise InvalidEntryError(f"{where}: an entry must be a JSON object", index=index)
        entry_type = body.get("type")
        if not isinstance(entry_type, str) or entry_type not in ENTRY_TYPES:
            known = ", ".join(sorted(self.dialect.appendable_types))
            raise InvalidEntryError(
                f"{where}: unknown entry type {entry_type!r} (known: {known})", index=index
            )
        if entry_type not in allowed:
            raise InvalidEntryError(
                f"{where}: {entry_type} entries are not appended to {self.dialect.name}'s "
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
        if entry_type == "message":
            fields["message"] = self._prepared_message(fields.get("message"), where, index, now_ms)
        elif entry_type == "label":
            target = fields.get("targetId")
            if isinstance(target, str) and target not in self._by_id and target not in taken:
                raise NotFoundError(f"Entry {target} not found", entryId=target, index=index)
            if fields.get("label") in (None, ""):
                fields.pop("label", None)
        elif entry_type == "session_info" and isinstance(fields.get("name"), str):
            fields["name"] = fields["name"].strip()
        elif entry_type == "context_edit":
            fields["replacement"] = edit_replacement(
                fields, where, index, self._by_id, on_path, taken
            )
        elif entry_type == "compaction":
            system = fields.get("systemMessage")
            if isinstance(system, Mapping) and system.get("timestamp") is None:
                # The checkpoint carries the compaction's own time, as pi 1.6 writes it.
                fields["systemMessage"] = {**system, "timestamp": now_ms}
        entry_id = new_entry_id(lambda candidate: candidate in self._by_id or candidate in taken)
        data = {
            "type": entry_type,
            "id": entry_id,
            "parentId": parent_id,
            "timestamp": timestamp,
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
        record = new_record(entry_id, parent_id, entry_type, role, timestamp, len(line))
        return record, entry, line

    @staticmethod
    def _prepared_message(
        message: Any, where: str, index: int, now_ms: int | None
    ) -> dict[str, Any]:
        if not isinstance(message, Mapping):
            raise InvalidEntryError(
                f"{where}: a message entry needs a `message` object", index=index
            )
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

    def _write(self, prepared: list[tuple[EntryRecord, Entry, bytes]]) -> None:
        """Put a validated batch on disk (or keep it pending, before the first assistant)."""
        if not self._persisted:
            for record, _, line in prepared:
                self._unwritten[record.id] = line
                self._unwritten_order.append(record)
            new_assistant = any(
                isinstance(entry, MessageEntry) and isinstance(entry.message, AssistantMessage)
                for _, entry, _ in prepared
            )
            if new_assistant or self._has_assistant:
                try:
                    self._write_unwritten()
                except BaseException:
                    del self._unwritten_order[-len(prepared) :]
                    for record, _, _ in prepared:
                        self._unwritten.pop(record.id, None)
                    raise
            return
        force = any(record.type in _ALWAYS_SYNCED for record, _, _ in prepared)
        chunks: list[bytes] = [b"\n"] if self._needs_newline else []
        start = self._size
        offset = start + len(chunks)
        offsets: list[int] = []
        for _, _, line in prepared:
            offsets.append(offset)
            offset += len(line) + 1
            chunks.append(line)
            chunks.append(b"\n")
        data = b"".join(chunks)
        if self._append is None:
            self._append = AppendFile(self.path)
        self._append.append(data, sync=force or self.storage.fsync == "always")
        self._generation += 1
        for (record, _, _), record_offset in zip(prepared, offsets, strict=True):
            record.offset = record_offset
        self._size += len(data)
        self._needs_newline = False
        status = os.fstat(self._append.fd)
        raced = status.st_size != self._size
        if raced:
            # Another program appended between our look at the file and our write: the
            # lines are whole (both sides append whole lines), but ours are elsewhere.
            following.place_among_others(self, prepared, data, start)
        if self._ledger is not None:
            self._ledger.records.extend(record for record, _, _ in prepared)
            self._ledger.line_count += len(prepared)
        self._follower.saw(self._reader(), self._size, None if raced else status)
        if raced:
            self._follower.look_again()

    def write_now(self) -> None:
        """Write the session file now, even before the first assistant message (pi's
        ``ensureOnDisk``). Later appends are then written as they come."""
        self._check_writable()
        if not self._persisted:
            self._write_unwritten()

    def _write_unwritten(self) -> None:
        first = title_line.first_line(self)
        chunks = [first, self._header_line, b"\n"]
        offset = len(first) + len(self._header_line) + 1
        offsets: list[int] = []
        for record in self._unwritten_order:
            line = self._unwritten[record.id]
            offsets.append(offset)
            chunks += [line, b"\n"]
            offset += len(line) + 1
        # A new file appears whole or not at all (temp file, fsync, link), and never over
        # a file someone else put at the path since the session was created.
        create_whole(self.path, chunks)
        for record, record_offset in zip(self._unwritten_order, offsets, strict=True):
            record.offset = record_offset
        # The batch being written is indexed after this returns.
        written = [r for r in self._unwritten_order if r.id not in self._by_id]
        self._unwritten.clear()
        self._unwritten_order.clear()
        self._size = offset
        self._persisted = True
        self._generation += 1
        self._append = AppendFile(self.path)
        self._ledger = ScanResult(
            header=self.header,
            header_data=msgspec.json.decode(self._header_line),
            version=CURRENT_SESSION_VERSION,
            records=list(self._records) + written,
            size=offset,
            line_count=1 + bool(first) + len(self._records) + len(written),
            title_slot=self.title_slot,
        )
        self._follower.saw(self._reader(), self._size)

    # ------------------------------------------------------------ others' writes, forks, rewrites

    def follow(self) -> Followed | None:
        """Take in what another program did to the file since the store last looked (see
        ``following.follow``). None when nothing changed; one ``stat`` in that case."""
        return following.follow(self)

    def take_unannounced(self) -> list[Followed]:
        return following.take_unannounced(self)

    def fork(
        self,
        leaf_id: str,
        *,
        path: str | os.PathLike[str] | None = None,
        session_dir: str | os.PathLike[str] | None = None,
    ) -> SessionStore:
        """pi's ``createBranchedSession`` (see ``rewriting.fork``)."""
        return rewriting.fork(self, leaf_id, path=path, session_dir=session_dir)

    def rewrite_entries(self, replacements: Mapping[str, Mapping[str, Any]]) -> None:
        """Replace whole entries (by id) through an atomic rewrite of the file (see
        ``rewriting.rewrite_entries``)."""
        rewriting.rewrite_entries(self, replacements)

    # ------------------------------------------------------------------ the index

    def _index_scanned(self, result: ScanResult) -> None:
        records = result.records
        by_id = {record.id: record for record in records}
        if len(by_id) != len(records):
            self._note_duplicates(records)
        self._by_id = by_id
        self._has_assistant = any(record.role == "assistant" for record in records)
        kept: list[EntryRecord] | None = None
        for index, record in enumerate(records):
            kind = record.type
            if kind in EAGER_TYPES:
                line = result.eager_lines.get(record.offset)
                if line is None:
                    line = self.raw_line(record)
                decode_metadata(record, line, self.recovery)
                self._note_metadata(record)
            elif kind == "session":
                if kept is None:
                    kept = records[:index]
                self.recovery.damaged_lines.append(self._second_header(record))
                continue
            if kept is not None:
                record.seq = len(kept)
                kept.append(record)
        if kept is not None:
            records = kept
            self._by_id = {record.id: record for record in records}
        self._records = records

    def _second_header(self, record: EntryRecord) -> DamagedLine:
        return DamagedLine(
            line=self._line_number_at(record.offset),
            offset=record.offset,
            length=record.length,
            reason="a second session header",
            preview="",
        )

    def _line_number_at(self, offset: int) -> int:
        """The 1-based number of the line at ``offset`` (counted only for damage reports)."""
        newlines = position = 0
        while position < offset:
            chunk = os.pread(self._reader(), min(8 << 20, offset - position), position)
            if not chunk:
                break
            newlines += chunk.count(b"\n")
            position += len(chunk)
        return newlines + 1

    def _note_duplicates(self, records: list[EntryRecord]) -> None:
        self._duplicates = True
        seen: set[str] = set()
        for record in records:
            if record.id in seen:
                self.recovery.duplicate_ids.append(record.id)
            seen.add(record.id)

    def _index(self, record: EntryRecord, entry: Entry | None = None) -> None:
        if entry is not None:
            if record.type == "message":
                # A message just appended is the one a usage figure reads next.
                self._cache_message(record, entry)
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

    def _children_index(self) -> dict[str, list[EntryRecord]]:
        if self._children is None:
            children: dict[str, list[EntryRecord]] = {}
            for record in self._records:
                if record.parent_id is not None:
                    children.setdefault(record.parent_id, []).append(record)
            self._children = children
        return self._children

    # ------------------------------------------------------------------ durability

    def sync(self) -> None:
        """fsync appended lines (the "batch" policy calls this on a timer)."""
        if self._append is not None:
            self._append.sync()

    @property
    def needs_sync(self) -> bool:
        return self._append is not None and self._append.dirty

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._append is not None:
                self._append.close()
                self._append = None
            following.save_index(self)
        finally:
            if self._read_fd is not None:
                os.close(self._read_fd)
                self._read_fd = None
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


def _sort_time(timestamp: str) -> int:
    ms = iso_to_ms(timestamp) if timestamp else None
    return ms if ms is not None else 0
