"""The store's side of other programs writing its file: taking in their lines.

``follow.FileFollower`` tells what happened to the file; these functions, which
``SessionStore`` calls with itself, act on it: appended lines are scanned and indexed
(the leaf moves to the last of them, as a reopen would put it), a replaced or
rewritten file is read again whole, an append first takes in what others wrote (and
waits for a line they have not finished), and lines that landed beside the store's
own in the same instant are placed in file order. The ledger (what a scan of the
whole file would find) is kept up to date here, and written as the persistent index
when the session closes.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import msgspec

from sessiond.core.entries import CURRENT_SESSION_VERSION
from sessiond.errors import BusyError, StorageError
from sessiond.wire.recovery import RecoveryReport, TornTail

from . import index_file, title_line
from .catching_up import (
    ChangePlan,
    Changes,
    Grown,
    Reloaded,
    decode_eager,
    plan_for,
    read_changes,
    read_grown,
)
from .follow import Observation, observe
from .lines import read_chunks
from .opening import repair_torn_tail
from .records import EntryRecord
from .safe_files import open_regular
from .scan import ScanResult

if TYPE_CHECKING:
    from sessiond.core.entries import Entry, SessionHeader

    from .session import SessionStore


class CatchUpNeeded(BusyError):
    """Others changed the file by more than may be read where the store is used
    (``SessionStore.inline_follow_bytes``): read the changes in a worker thread
    (``catching_up``), then try again. ``repair``: a line another program left unfinished
    must be cut off before the store can append."""

    def __init__(self, path: Path, *, repair: bool = False) -> None:
        super().__init__(
            f"another program changed {path}; sessiond is reading it: try again",
            reason="fileChanging",
            path=str(path),
        )
        self.repair = repair


def follow(store: SessionStore) -> Followed | None:
    """Take in what another program did to the file since the store last looked:
    complete lines appended (indexed; the leaf moves to the last of them, as a
    reopen would put it), or a replaced, truncated or rewritten file (read again
    whole). None when nothing changed; one ``stat`` in that case. With a limit on what
    may be read here (``inline_follow_bytes``), more than that is ``CatchUpNeeded``."""
    changes = plan(store)
    if changes is None:
        return None
    limit = store.inline_follow_bytes
    if limit is not None and (
        changes.verdict == "replaced" or store._follower.seen_size - store._size > limit
    ):
        raise CatchUpNeeded(store.path)
    return take_changes(store, read_changes(changes))


def plan(store: SessionStore) -> ChangePlan | None:
    """Whether others changed the file, and what reading it needs (one ``stat``); None
    when nothing changed."""
    if not store._persisted or store._closed:
        return None
    verdict = store._follower.look(store._reader())
    if verdict == "unchanged":
        return None
    return plan_for(store, verdict)


def take_changes(store: SessionStore, changes: Changes) -> Followed | None:
    """Apply what ``read_changes`` read (memory only), unless the store moved on since the
    plan (then it looks again next time)."""
    plan = changes.plan
    if store._closed or store._generation != plan.generation or store._size != plan.start:
        store._follower.look_again()
        return None
    if changes.grown is not None:
        return _take_grown(store, changes.grown)
    assert changes.reloaded is not None
    _take_reloaded(store, changes.reloaded)
    return Followed(reason="fileRewritten", appended_ids=[])


def take_unannounced(store: SessionStore) -> list[Followed]:
    """What an append took in before writing (others' lines that arrived just then),
    for the caller to announce."""
    taken, store._unannounced = store._unannounced, []
    return taken


def _take_grown(store: SessionStore, grown: Grown, *, observed: bool = True) -> Followed | None:
    found = grown.found
    store._generation += 1
    appended: list[EntryRecord] = []
    decode_eager(found.records, found.eager_lines, store.recovery)
    for record in found.records:
        store._index(record)
        appended.append(record)
    found.report.damaged_lines += grown.second_headers
    _merge_reports(store.recovery, found.report)
    if store._ledger is not None:
        _merge_reports(store._ledger.report, found.report)
        store._ledger.records.extend(found.records)
        store._ledger.line_count = found.line_count
    else:
        store._unread_lines += found.line_count - grown.lines_before
    store._size = found.end
    store._needs_newline = False
    if observed:
        store._follower.take(grown.seen)
    if not appended:
        return None
    if grown.title_line is not None:
        title_line.reread(store, grown.title_line)
    store._view.reset(store._path_records(appended[-1]))
    return Followed(reason="fileAppended", appended_ids=[r.id for r in appended])


def _take_reloaded(store: SessionStore, reloaded: Reloaded) -> None:
    """The file read again whole: the lock, the settings and the identity of the store
    stay; everything read goes."""
    if store._read_fd is not None:
        os.close(store._read_fd)
        store._read_fd = None
    if store._append is not None:
        store._append.close()
        store._append = None
    result = reloaded.result
    store._message_cache.clear()
    store._unread_lines = 0
    store._ledger_saved_size = -1
    store._take_scan(result)
    store._size = reloaded.end
    if reloaded.end != result.size:
        store._needs_newline = False
    if result.indexed_size is not None:
        store._ledger_saved_size = result.indexed_size
    store._follower.take(reloaded.seen, reread=True)


def reload(store: SessionStore) -> None:
    """Read the file again whole (here, whatever its size)."""
    _take_reloaded(store, read_changes(plan_for(store, "replaced")).reloaded)  # type: ignore[arg-type]


def before_append(store: SessionStore) -> None:
    """Before writing: take in what others appended (the new entry goes under the
    leaf that includes it), and never write after someone else's unfinished line."""
    followed = follow(store)
    if followed is not None:
        store._unannounced.append(followed)
    unfinished = store._follower.unfinished
    if unfinished is None:
        return
    if not store._follower.unfinished_for_long():
        raise BusyError(
            f"another program is writing {store.path}: its last line is not finished "
            "yet; try again in a moment",
            reason="fileBeingWritten",
            path=str(store.path),
        )
    limit = store.inline_follow_bytes
    if limit is not None and unfinished.size - unfinished.offset > limit:
        raise CatchUpNeeded(store.path, repair=True)
    cut_unfinished(store)


def cut_unfinished(store: SessionStore) -> None:
    """The writer of the unfinished last line left it (it crashed): cut it off as opening
    would, keeping its bytes in a ``.corrupt`` file (here, whatever its size)."""
    torn = stale_tail(store)
    if torn is not None:
        seen = cut_tail(store.path, store.header, torn, store._size, store._follower.skip_first)
        take_cut(store, torn, seen)


def stale_tail(store: SessionStore) -> TornTail | None:
    """The unfinished last line a crashed writer left, if any (one that stayed as it is
    past the grace period)."""
    unfinished = store._follower.unfinished
    if unfinished is None or not store._follower.unfinished_for_long():
        return None
    return TornTail(
        offset=unfinished.offset,
        length=unfinished.size - unfinished.offset,
        saved_to=None,
        preview="",
    )


def stale_tail_cut(store: SessionStore) -> tuple[TornTail, Callable[[], Observation]] | None:
    """The stale unfinished tail, if any, and the file work that cuts it off (for any
    thread: it touches nothing of the store); ``take_cut`` then takes what it saw."""
    torn = stale_tail(store)
    if torn is None:
        return None
    path, header, end, skip = store.path, store.header, store._size, store._follower.skip_first
    return torn, lambda: cut_tail(path, header, torn, end, skip)


def cut_tail(
    path: Path, header: SessionHeader, torn: TornTail, end: int, skip_first: int
) -> Observation:
    """Cut ``torn`` off the file (its bytes saved aside) and look at the file again, up to
    ``end`` (file work of any size; touches nothing of the store)."""
    result = ScanResult(header=header, header_data={}, version=CURRENT_SESSION_VERSION)
    result.report.torn_tail = torn
    repair_torn_tail(path, result)
    fd = open_regular(path, os.O_RDONLY)
    try:
        return observe(fd, end, skip_first=skip_first)
    finally:
        os.close(fd)


def take_cut(store: SessionStore, torn: TornTail, seen: Observation) -> None:
    store.recovery.torn_tail = torn
    store._follower.take(seen)


def place_among_others(
    store: SessionStore,
    prepared: list[tuple[EntryRecord, Entry, bytes]],
    data: bytes,
    start: int,
) -> None:
    """Our write landed among lines another program appended at the same moment:
    find our bytes (one ``write()`` on an ``O_APPEND`` descriptor, so contiguous),
    index the lines before them now and leave the ones after to the next look. With a
    limit on what may be read here, ours are looked for only that far."""
    file_size = os.fstat(store._reader()).st_size
    limit = store.inline_follow_bytes
    if limit is not None:
        file_size = min(file_size, start + limit + len(data))
    region = b"".join(chunk for _, chunk in read_chunks(store._reader(), start, file_size))
    ours = data.lstrip(b"\n")
    found = region.find(ours)
    if found < 0:
        store._follower.suspect()  # the next look reads the file again whole
        raise StorageError(f"{store.path}: an append could not be found after writing it")
    leaf_path = list(store._view.path)
    store._size = start
    if found > 0:
        # Others' lines just before ours (at most the in-place limit of them, here).
        before = read_grown(plan_for(store, "grew"), store._reader(), start + found)
        before_ours = _take_grown(store, before, observed=False)
        if before_ours is not None:
            store._unannounced.append(before_ours)
    # Our entries go under the leaf they were written under, whatever came before.
    store._view.reset(leaf_path)
    at = start + found
    for record, _, line in prepared:
        record.offset = at
        at += len(line) + 1
    store._size = at


def save_index(store: SessionStore) -> None:
    ledger = store._ledger
    if (
        ledger is None
        or not store.storage.persistent_index
        or store._size == store._ledger_saved_size
        or store._read_fd is None
    ):
        return
    ledger.size = store._size
    ledger.ends_with_newline = True
    wait = index_file.seconds_until_trusted(os.fstat(store._read_fd))
    if wait <= 0 and store.inline_follow_bytes is None:
        index_file.save(store.path, store._read_fd, ledger, store._header_line)
        return
    # Written now, the index would be racy (the file changed within a timestamp tick) and
    # the next open would not trust it; written a tick later it is good. A daemon writes
    # it in a thread anyway: hashing the file's windows and writing every record is file
    # work it does not do where its clients are served. The store is closing, so nothing
    # changes the ledger meanwhile.
    timer = threading.Timer(wait, index_file.save_at_path, (store.path, ledger, store._header_line))
    timer.daemon = True
    timer.start()


class Followed(msgspec.Struct, kw_only=True):
    """What ``follow`` took in: lines another program appended, or a file it replaced."""

    reason: Literal["fileAppended", "fileRewritten"]
    appended_ids: list[str]


def ledger_of(result: ScanResult) -> ScanResult:
    """A scan-level copy of ``result`` that the store's own bookkeeping leaves alone:
    the records list (the store filters it) and the report (the store adds to it)."""
    report = msgspec.json.decode(msgspec.json.encode(result.report), type=RecoveryReport)
    return ScanResult(
        header=result.header,
        header_data=result.header_data,
        version=result.version,
        records=list(result.records),
        report=report,
        size=result.size,
        line_count=result.line_count,
        title_slot=result.title_slot,
    )


def _merge_reports(into: RecoveryReport, found: RecoveryReport) -> None:
    """Add what a scan of appended lines found to a report."""
    into.damaged_lines += found.damaged_lines
    into.invalid_utf8_lines += found.invalid_utf8_lines
    into.lone_surrogate_entries += found.lone_surrogate_entries
    into.blank_lines += found.blank_lines
