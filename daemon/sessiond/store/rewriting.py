"""Copies and rewrites of a session file: forks and in-place edits of entries.

A fork copies the path to an entry into a new session (pi's ``createBranchedSession``);
a rewrite replaces whole entries (pruning edits tool results, as pi does) through an
atomic rewrite that copies every other line, damaged ones included, byte for byte.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from sessiond.core.decode import decode_entry
from sessiond.core.entries import CompactionEntry
from sessiond.errors import InvalidEntryError
from sessiond.wire.recovery import RecoveryReport

from .fileio import AppendFile, atomic_write
from .follow import Observation, observe
from .line_check import checked_line
from .lines import read_chunks, read_lines
from .records import EntryRecord, new_record
from .safe_files import FILE_MODE, open_regular

if TYPE_CHECKING:
    from sessiond.core.entries import Entry, SessionHeader
    from sessiond.core.title_slot import TitleSlot
    from sessiond.settings import StorageSettings

    from .session import Clock, SessionStore


def fork(
    store: SessionStore,
    leaf_id: str,
    *,
    path: str | os.PathLike[str] | None = None,
    session_dir: str | os.PathLike[str] | None = None,
) -> SessionStore:
    """pi's ``createBranchedSession``: the root-to-``leaf_id`` path as a new session.

    Label entries are left out of the copied path and re-created, chained
    at the end, for every label whose target is on the path. As in pi 1.6
    (pi 0.73.1 left them dangling), an entry whose parent was a dropped label
    is re-parented to the nearest kept ancestor, so the copied path stays one
    connected chain, and a compaction that kept from a dropped label keeps
    from the entry after it.
    The new file is written at once when the path has an assistant message.
    """
    return write_fork(fork_plan(store, leaf_id, path=path, session_dir=session_dir))


@dataclass
class ForkPlan:
    """A fork as decided from the store's index (memory only, where the store is used);
    ``write_fork`` does its file work from it, in any thread, without the store."""

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
    store: SessionStore,
    leaf_id: str,
    *,
    path: str | os.PathLike[str] | None = None,
    session_dir: str | os.PathLike[str] | None = None,
) -> ForkPlan:
    records = store._path_records(store.record(leaf_id))
    kept = [record for record in records if record.type != "label"]
    # A compaction that kept from a dropped label keeps from the entry after it (pi 1.6).
    after_label: dict[str, str] = {}
    pending: list[str] = []
    for record in records:
        if record.type == "label":
            pending.append(record.id)
            continue
        after_label.update((label_id, record.id) for label_id in pending)
        pending.clear()
    on_path = {record.id for record in kept}
    moved = {
        record.id: after_label[kept_from]
        for record in kept
        if (kept_from := _first_kept(store, record)) in after_label
    }
    return ForkPlan(
        source=store.path,
        header=store.header,
        storage=store.storage,
        clock=store._clock,
        path=path,
        session_dir=session_dir if session_dir is not None else store.path.parent,
        records=kept,
        unwritten={r.id: store._unwritten[r.id] for r in kept if r.offset < 0},
        labels=[(target, label) for target, label in store._labels.items() if target in on_path],
        moved_first_kept=moved,
        title_of=store.title_slot,
    )


def write_fork(plan: ForkPlan) -> SessionStore:
    """The new session of ``plan``: its lines read from the source file through a
    descriptor of its own (and checked, as ``SessionStore.raw_line`` checks them)."""
    from .session import SessionStore

    new = SessionStore.create(
        plan.header.cwd,
        session_dir=plan.session_dir,
        path=plan.path,
        parent_session=str(plan.source),
        storage=plan.storage,
        clock=plan.clock,
        title_of=plan.title_of,
    )
    source: int | None = None
    try:
        previous: str | None = None
        copied: list[tuple[EntryRecord, Entry, bytes]] = []
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
        adopt(new, copied)
        for target, label in plan.labels:
            new.append_label(target, label)
    except BaseException:
        new.close()
        raise
    finally:
        if source is not None:
            os.close(source)
    return new


def _first_kept(store: SessionStore, record: EntryRecord) -> str | None:
    if record.type != "compaction":
        return None
    entry = store.entry_of(record)
    return entry.first_kept_entry_id if isinstance(entry, CompactionEntry) else None


def adopt(store: SessionStore, copied: list[tuple[EntryRecord, Entry, bytes]]) -> None:
    """Take entries that already have ids (a fork's copied path)."""
    if not copied:
        return
    store._write(copied)
    for record, entry, _ in copied:
        store._index(record, entry)
        store._view.push(record, entry)


def rewrite_entries(store: SessionStore, replacements: Mapping[str, Mapping[str, Any]]) -> None:
    """Replace whole entries (by id) through an atomic rewrite of the file, here.

    Every other line, damaged ones included, is copied byte for byte. pi's files are
    never changed in place (pruning appends pi 1.6 context edits); oh-my-pi's are, when
    pruned. A daemon does the file work in a worker thread: ``plan_rewrite``,
    ``write_rewrite`` (any thread), ``take_rewrite``.
    """
    plan = plan_rewrite(store, replacements)
    if plan is not None:
        take_rewrite(store, plan, write_rewrite(plan))


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


def plan_rewrite(
    store: SessionStore, replacements: Mapping[str, Mapping[str, Any]]
) -> RewritePlan | None:
    """Check and encode the replacements; None when they were taken in memory (a session
    not written yet). The store appends nothing more until ``take_rewrite``: its
    descriptor for appending is closed here."""
    store._check_writable()
    encoded: dict[str, bytes] = {}
    for entry_id, data in replacements.items():
        record = store.record(entry_id)
        if data.get("id") != entry_id or data.get("type") != record.type:
            raise InvalidEntryError(f"a replacement for {entry_id} must keep its id and type")
        encoded[entry_id] = msgspec.json.encode(data)
    if not store._persisted:
        for entry_id, line in encoded.items():
            store._unwritten[entry_id] = line
            store._by_id[entry_id].length = len(line)
        forget(store, encoded)
        return None
    store.sync()
    if store._append is not None:
        store._append.close()
        store._append = None
    return RewritePlan(
        path=store.path,
        mode=_file_mode(store.path),
        skip_first=store._follower.skip_first,
        indexed={record.offset for record in store._records},
        replaced_at={store._by_id[entry_id].offset: line for entry_id, line in encoded.items()},
        encoded=encoded,
    )


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
    fd = open_regular(plan.path, os.O_RDONLY)
    try:
        seen = observe(fd, new_size, skip_first=plan.skip_first)
    finally:
        os.close(fd)
    return Rewritten(new_offsets, new_size, seen)


def take_rewrite(store: SessionStore, plan: RewritePlan, done: Rewritten) -> None:
    """The store after ``write_rewrite`` (memory only, and a new descriptor to append)."""
    store._generation += 1
    for record in store._records:
        record.offset = done.new_offsets.get(record.offset, record.offset)
    for entry_id, line in plan.encoded.items():
        record = store._by_id[entry_id]
        record.length = len(line)
        record.utf8_state = 1
    store._size = done.size
    store._needs_newline = False
    if store._read_fd is not None:
        os.close(store._read_fd)
        store._read_fd = None
    store._append = AppendFile(store.path)
    # Offsets of damaged lines moved: the next open scans and indexes afresh.
    store._ledger = None
    store._follower.take(done.seen)
    forget(store, plan.encoded)


def forget(store: SessionStore, entry_ids: Iterable[str]) -> None:
    for entry_id in entry_ids:
        record = store._by_id[entry_id]
        record.entry = None
        record.tokens_chars = record.tokens_tiktoken = None
        store._message_cache.pop(id(record), None)
    store._view.reset(list(store._view.path))


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
