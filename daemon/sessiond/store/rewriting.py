"""Copies and rewrites of a session file: forks and in-place edits of entries.

A fork copies the path to an entry into a new session (pi's ``createBranchedSession``);
a rewrite replaces whole entries (pruning edits tool results, as oh-my-pi does), or
oh-my-pi's title line by one of another length (a rename), through an atomic rewrite
that copies every other line, damaged ones included, byte for byte. Each is decided
from the store's index where it is used (``ForkPlan``, ``RewritePlan``,
``TitleRewrite``) and does its file work here, in any thread, without the store.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from sessiond.core.decode import decode_entry
from sessiond.core.entries import CompactionEntry, Entry
from sessiond.core.title_slot import serialize_title_slot
from sessiond.errors import InvalidEntryError
from sessiond.wire.recovery import RecoveryReport

from .entry_index import EntryIndex
from .file_watch import Observation, observe
from .fileio import atomic_write
from .foreign_writes import ForeignWrites
from .ledger import Ledger
from .line_check import checked_line
from .lines import read_chunks, read_lines
from .records import EntryRecord, new_record
from .safe_files import FILE_MODE, open_regular
from .session_file import SessionFile
from .store_parts import Clock
from .title_line import in_place, retitled, write_title

if TYPE_CHECKING:
    from sessiond.core.entries import SessionHeader
    from sessiond.core.title_slot import TitleSlot
    from sessiond.settings import StorageSettings


Copied = list[tuple[EntryRecord, Entry, bytes]]


@dataclass
class ForkPlan:
    """A fork as decided from the store's index; ``fork_lines`` reads what it copies."""

    source: Path
    header: SessionHeader
    storage: StorageSettings
    clock: Clock
    path: str | os.PathLike[str] | None
    session_dir: str | os.PathLike[str]
    records: list[EntryRecord]
    # Lines of the path that are not on disk yet (a session written lazily).
    unwritten: dict[str, bytes]
    labels: list[tuple[str, str]]
    # Compactions (by id) that kept from a dropped label: the entry they keep from now.
    moved_first_kept: dict[str, str]
    # An oh-my-pi session's title line: the fork is oh-my-pi's too.
    title_of: TitleSlot | None


def fork_plan(
    records: list[EntryRecord],
    entry_of: Callable[[EntryRecord], Entry],
    unwritten: Callable[[str], bytes],
    labels: Mapping[str, str],
    *,
    source: Path,
    header: SessionHeader,
    storage: StorageSettings,
    clock: Clock,
    path: str | os.PathLike[str] | None,
    session_dir: str | os.PathLike[str] | None,
    title_of: TitleSlot | None,
) -> ForkPlan:
    """pi's ``createBranchedSession`` of the root-first path ``records``, decided.

    Label entries are left out of the copied path and re-created, chained at the end,
    for every label whose target is on the path. As in pi 1.6 (pi 0.73.1 left them
    dangling), an entry whose parent was a dropped label is re-parented to the nearest
    kept ancestor, so the copied path stays one connected chain, and a compaction that
    kept from a dropped label keeps from the entry after it."""
    kept = [record for record in records if record.type != "label"]
    after_label: dict[str, str] = {}
    pending: list[str] = []
    for record in records:
        if record.type == "label":
            pending.append(record.id)
            continue
        after_label.update((label_id, record.id) for label_id in pending)
        pending.clear()
    on_path = {record.id for record in kept}
    moved: dict[str, str] = {}
    for record in kept:
        if record.type == "compaction":
            entry = entry_of(record)
            if isinstance(entry, CompactionEntry) and entry.first_kept_entry_id in after_label:
                moved[record.id] = after_label[entry.first_kept_entry_id]
    return ForkPlan(
        source=source,
        header=header,
        storage=storage,
        clock=clock,
        path=path,
        session_dir=session_dir if session_dir is not None else source.parent,
        records=kept,
        unwritten={r.id: unwritten(r.id) for r in kept if r.offset < 0},
        labels=[(target, label) for target, label in labels.items() if target in on_path],
        moved_first_kept=moved,
        title_of=title_of,
    )


def fork_lines(plan: ForkPlan) -> Copied:
    """The copied path of ``plan``, re-parented into one chain: its lines read from the
    source file through a descriptor of its own (and checked, as
    ``SessionStore.raw_line`` checks them)."""
    source: int | None = None
    try:
        previous: str | None = None
        copied: Copied = []
        for record in plan.records:
            line = plan.unwritten.get(record.id)
            if line is None:
                if source is None:
                    source = open_regular(plan.source, os.O_RDONLY)
                data = os.pread(source, record.length, record.offset)
                line = checked_line(record, data, plan.source, RecoveryReport())
            moved = plan.moved_first_kept.get(record.id)
            if record.parent_id != previous or moved is not None:
                decoded = msgspec.json.decode(line)
                decoded["parentId"] = previous
                if moved is not None:
                    decoded["firstKeptEntryId"] = moved
                line = msgspec.json.encode(decoded)
            entry = decode_entry(line)
            copy = new_record(
                record.id, previous, record.type, record.role, record.timestamp, len(line)
            )
            copied.append((copy, entry, line))
            previous = record.id
        return copied
    finally:
        if source is not None:
            os.close(source)


@dataclass
class RewritePlan:
    """A rewrite as decided where the store is used; ``write_rewrite`` does it."""

    path: Path
    mode: int
    skip_first: int
    # The offsets of the indexed lines, and the new lines of the replaced ones.
    indexed: set[int]
    replaced_at: dict[int, bytes]
    encoded: dict[str, bytes]


@dataclass
class Rewritten:
    new_offsets: dict[int, int]
    size: int
    seen: Observation


def write_rewrite(plan: RewritePlan) -> Rewritten:
    """The file rewritten with the plan's lines (file work of its whole size; any thread,
    nothing of the store touched)."""
    new_offsets: dict[int, int] = {}
    new_size = 0

    def lines_out() -> Iterator[bytes]:
        nonlocal new_size
        pending: list[bytes] = []
        pending_size = 0
        for offset, line in file_lines(plan.path):
            if not isinstance(line, bytes):
                # Longer than any entry (damage): copied through, never held whole.
                if pending:
                    yield b"".join(pending)
                    pending, pending_size = [], 0
                for chunk in line:
                    new_size += len(chunk)
                    yield chunk
                new_size += 1
                yield b"\n"
                continue
            replacement = plan.replaced_at.get(offset)
            out = replacement if replacement is not None else line
            if offset in plan.indexed:
                new_offsets[offset] = new_size
            pending += [out, b"\n"]
            pending_size += len(out) + 1
            new_size += len(out) + 1
            if pending_size >= 1 << 20:
                yield b"".join(pending)
                pending, pending_size = [], 0
        if pending:
            yield b"".join(pending)

    atomic_write(plan.path, lines_out(), mode=plan.mode)
    return Rewritten(new_offsets, new_size, _observed(plan.path, new_size, plan.skip_first))


def _observed(path: Path, end: int, skip_first: int) -> Observation:
    """What the store will know of the file a rewrite just put in place."""
    fd = open_regular(path, os.O_RDONLY)
    try:
        return observe(fd, end, skip_first=skip_first)
    finally:
        os.close(fd)


@dataclass
class TitleRewrite:
    """A rename whose title line is not oh-my-pi's 256 bytes: the file rewritten with the
    new line in its place (``rewrite_title``)."""

    path: Path
    mode: int
    line: bytes
    old_length: int
    # The end of the lines the store knows (bytes after it are copied too).
    end: int
    title: str
    timestamp: str


def rewrite_title(plan: TitleRewrite) -> Rewritten:
    """The file with its title line replaced (file work of its whole size; any thread,
    nothing of the store touched)."""
    fd = open_regular(plan.path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size

        def chunks() -> Iterator[bytes]:
            yield plan.line
            for _, chunk in read_chunks(fd, plan.old_length, size):
                yield chunk

        atomic_write(plan.path, chunks(), mode=plan.mode)
    finally:
        os.close(fd)
    end = plan.end + len(plan.line) - plan.old_length
    return Rewritten({}, end, _observed(plan.path, end, len(plan.line)))


class Rewriter:
    """Forks and rewrites of one session's file, decided from its index."""

    def __init__(
        self,
        file: SessionFile,
        index: EntryIndex,
        ledger: Ledger,
        foreign: ForeignWrites,
        *,
        header: SessionHeader,
        storage: StorageSettings,
        clock: Clock,
    ) -> None:
        self._file = file
        self._index = index
        self._ledger = ledger
        self._foreign = foreign
        self._header = header
        self._storage = storage
        self._clock = clock
        # A rename's title and time, for a rewrite of the file not done yet.
        self._pending_title: tuple[str, str] | None = None

    def fork_plan(
        self,
        leaf: EntryRecord,
        entry_of: Callable[[EntryRecord], Entry],
        title_of: TitleSlot | None,
        *,
        path: str | os.PathLike[str] | None,
        session_dir: str | os.PathLike[str] | None,
    ) -> ForkPlan:
        """The fork of the path to ``leaf`` (``fork_plan``)."""
        return fork_plan(
            self._index.path_to(leaf),
            entry_of,
            self._file.unwritten_line,
            self._index.labels,
            source=self._file.path,
            header=self._header,
            storage=self._storage,
            clock=self._clock,
            path=path,
            session_dir=session_dir,
            title_of=title_of,
        )

    def plan(
        self, replacements: Mapping[str, Mapping[str, Any]], record: Callable[[str], EntryRecord]
    ) -> RewritePlan | None:
        """Check and encode the replacements (``record``: an entry's record, or an error);
        None when they were taken in memory (a session not written yet). Nothing more is
        appended until ``take``: the descriptor for appending is closed here."""
        encoded: dict[str, bytes] = {}
        for entry_id, data in replacements.items():
            if data.get("id") != entry_id or data.get("type") != record(entry_id).type:
                raise InvalidEntryError(f"a replacement for {entry_id} must keep its id and type")
            encoded[entry_id] = msgspec.json.encode(data)
        file = self._file
        if not file.persisted:
            for entry_id, line in encoded.items():
                file.replace_unwritten(entry_id, line)
                self._index.replaced(entry_id, len(line))
            return None
        file.stop_appending()
        return RewritePlan(
            path=file.path,
            mode=_file_mode(file.path),
            skip_first=self._foreign.skip_first,
            indexed={r.offset for r in self._index.records},
            replaced_at={record(entry_id).offset: line for entry_id, line in encoded.items()},
            encoded=encoded,
        )

    def take(self, plan: RewritePlan, done: Rewritten) -> None:
        """The index and the file's end after ``write_rewrite`` (memory only, and a new
        descriptor to append)."""
        self._index.move_offsets(done.new_offsets)
        for entry_id, line in plan.encoded.items():
            self._index.replaced(entry_id, len(line))
        self._file.rewritten(done.size)
        # Offsets of damaged lines moved: the next open scans and indexes afresh.
        self._ledger.drop()
        self._foreign.took(done.seen)

    def retitle(
        self, slot: TitleSlot, title: str, timestamp: str, recovery: RecoveryReport
    ) -> TitleSlot:
        """oh-my-pi's title line of ``title`` over ``slot``'s, in place when it can be
        (``title_line.in_place``); else the rewrite of the file it takes is left pending
        (``plan_title``). The slot as the file has it now."""
        self._pending_title = None
        if in_place(slot, self._file, recovery):
            return write_title(
                title, timestamp, file=self._file, ledger=self._ledger, foreign=self._foreign
            )
        self._pending_title = (title, timestamp)
        return slot

    @property
    def title_pending(self) -> bool:
        return self._pending_title is not None

    def plan_title(self, slot: TitleSlot | None) -> TitleRewrite | None:
        """The pending rename's rewrite of the file (None: none pending); nothing more is
        appended until ``take_title``: the descriptor for appending is closed here."""
        pending, self._pending_title = self._pending_title, None
        if pending is None or slot is None or not self._file.persisted:
            return None
        title, timestamp = pending
        self._file.stop_appending()
        return TitleRewrite(
            path=self._file.path,
            mode=_file_mode(self._file.path),
            line=serialize_title_slot(title, "user", timestamp),
            old_length=slot.length,
            end=self._file.size,
            title=title,
            timestamp=timestamp,
        )

    def take_title(
        self, plan: TitleRewrite, done: Rewritten, recovery: RecoveryReport
    ) -> TitleSlot:
        """The index and the file's end after ``rewrite_title`` (memory only, and a new
        descriptor to append); the new slot."""
        self._index.shift_offsets(len(plan.line) - plan.old_length)
        self._file.rewritten(done.size)
        # The lines moved: the next open scans afresh.
        self._ledger.drop()
        recovery.byte_order_mark = False
        self._foreign.skip_first = len(plan.line)
        self._foreign.took(done.seen)
        return retitled(plan.title, plan.timestamp, len(plan.line), self._ledger)


def file_lines(path: Path) -> Iterator[tuple[int, bytes | Iterator[bytes]]]:
    """Every line of the file with its offset (the first line's is 0), newline stripped.

    A line longer than ``MAX_LINE_BYTES`` comes as an iterator of its chunks, to be
    consumed before the next line; time is linear whatever the lines' lengths."""
    fd = open_regular(path, os.O_RDONLY)
    try:
        for offset, line, length in read_lines(fd, os.fstat(fd).st_size):
            if line is not None:
                yield offset, line
            else:
                yield offset, (chunk for _, chunk in read_chunks(fd, offset, offset + length))
    finally:
        os.close(fd)


def _file_mode(path: Path) -> int:
    """The mode a rewrite keeps: the file's own (the user may have chosen it), never wider;
    0600 when the path holds no regular file (the rewrite then refuses to read it)."""
    try:
        status = os.stat(path, follow_symlinks=False)
    except OSError:
        return FILE_MODE
    return status.st_mode & 0o777 if stat.S_ISREG(status.st_mode) else FILE_MODE
