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
from typing import TYPE_CHECKING, Literal

import msgspec

from sessiond.core.entries import CURRENT_SESSION_VERSION
from sessiond.errors import BusyError, StorageError

from . import index_file, title_line
from .budget import MemoryBudget
from .lines import read_chunks
from .opening import read_session, repair_torn_tail
from .records import EntryRecord
from .recovery import RecoveryReport, TornTail
from .scan import EAGER_TYPES, ScanResult, decode_metadata, scan_appended

if TYPE_CHECKING:
    from sessiond.core.entries import Entry

    from .session import SessionStore


def follow(store: SessionStore) -> Followed | None:
    """Take in what another program did to the file since the store last looked:
    complete lines appended (indexed; the leaf moves to the last of them, as a
    reopen would put it), or a replaced, truncated or rewritten file (read again
    whole). None when nothing changed; one ``stat`` in that case."""
    if not store._persisted or store._closed:
        return None
    verdict = store._follower.look(store._reader())
    if verdict == "unchanged":
        return None
    if verdict == "replaced":
        reload(store)
        return Followed(reason="fileRewritten", appended_ids=[])
    return take_appended(store)


def take_unannounced(store: SessionStore) -> list[Followed]:
    """What an append took in before writing (others' lines that arrived just then),
    for the caller to announce."""
    taken, store._unannounced = store._unannounced, []
    return taken


def take_appended(store: SessionStore, until: int | None = None) -> Followed | None:
    fd = store._reader()
    end = until if until is not None else os.fstat(fd).st_size
    known = store._ledger or known_scan(store)
    # What the file may take in memory counts the records already held.
    budget = MemoryBudget(store.path, end, known=len(store._records))
    found = scan_appended(
        store.path,
        known,
        store._size,
        (chunk for _, chunk in read_chunks(fd, store._size, end)),
        budget,
    )
    appended: list[EntryRecord] = []
    for record in found.records:
        if record.type == "session":
            found.report.damaged_lines.append(store._second_header(record))
            continue
        if record.type in EAGER_TYPES:
            line = found.eager_lines.get(record.offset) or store.raw_line(record)
            decode_metadata(record, line, store.recovery)
        store._index(record)
        appended.append(record)
    _merge_reports(store.recovery, found.report)
    if store._ledger is not None:
        _merge_reports(store._ledger.report, found.report)
        store._ledger.records.extend(found.records)
        store._ledger.line_count = found.line_count
    else:
        store._unread_lines += found.line_count - known.line_count
    store._size = found.end
    store._needs_newline = False
    if until is None:
        store._follower.saw(fd, store._size)
    if not appended:
        return None
    if any(record.type == "title_change" for record in appended):
        title_line.reread(store)
    store._view.reset(store._path_records(appended[-1]))
    return Followed(reason="fileAppended", appended_ids=[r.id for r in appended])


def known_scan(store: SessionStore) -> ScanResult:
    """What ``scan_appended`` needs to go on from the known end, without a ledger."""
    return ScanResult(
        header=store.header,
        header_data={},
        version=CURRENT_SESSION_VERSION,
        line_count=1 + (store.title_slot is not None) + len(store._records) + store._unread_lines,
        title_slot=store.title_slot,
    )


def reload(store: SessionStore) -> None:
    """Read the file again whole: another program replaced or rewrote it. The lock,
    the settings and the identity of the store stay; everything read goes."""
    for fd in (store._read_fd,):
        if fd is not None:
            os.close(fd)
    store._read_fd = None
    if store._append is not None:
        store._append.close()
        store._append = None
    read = read_session(store.path, readonly=True, use_index=store.storage.persistent_index)
    if read.source_fd is not None:
        os.close(read.source_fd)
        raise StorageError(
            f"{store.path} was replaced by a file of an older format; close and reopen it",
            path=str(store.path),
        )
    store._message_cache.clear()
    store._unread_lines = 0
    store._ledger_saved_size = -1
    store._take_scan(read.result)
    store._follow_from(read.result)


def before_append(store: SessionStore) -> None:
    """Before writing: take in what others appended (the new entry goes under the
    leaf that includes it), and never write after someone else's unfinished line."""
    followed = follow(store)
    if followed is not None:
        store._unannounced.append(followed)
    if store._follower.unfinished is None:
        return
    if not store._follower.unfinished_for_long():
        raise BusyError(
            f"another program is writing {store.path}: its last line is not finished "
            "yet; try again in a moment",
            reason="fileBeingWritten",
            path=str(store.path),
        )
    # The writer left it unfinished (it crashed): cut it off as opening would.
    unfinished = store._follower.unfinished
    torn = TornTail(
        offset=unfinished.offset,
        length=unfinished.size - unfinished.offset,
        saved_to=None,
        preview="",
    )
    result = ScanResult(
        header=store.header,
        header_data={},
        version=CURRENT_SESSION_VERSION,
        title_slot=store.title_slot,
    )
    result.report.torn_tail = torn
    repair_torn_tail(store.path, result)
    store.recovery.torn_tail = torn
    store._follower.saw(store._reader(), store._size)


def place_among_others(
    store: SessionStore,
    prepared: list[tuple[EntryRecord, Entry, bytes]],
    data: bytes,
    start: int,
) -> None:
    """Our write landed among lines another program appended at the same moment:
    find our bytes (one ``write()`` on an ``O_APPEND`` descriptor, so contiguous),
    index the lines before them now and leave the ones after to the next look."""
    file_size = os.fstat(store._reader()).st_size
    region = b"".join(chunk for _, chunk in read_chunks(store._reader(), start, file_size))
    ours = data.lstrip(b"\n")
    found = region.find(ours)
    if found < 0:
        raise StorageError(f"{store.path}: an append could not be found after writing it")
    leaf_path = list(store._view.path)
    store._size = start
    if found > 0:
        before_ours = take_appended(store, until=start + found)
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
    if wait <= 0:
        index_file.save(store.path, store._read_fd, ledger, store._header_line)
        return
    # Written now, the index would be racy (the file changed within a timestamp tick) and
    # the next open would not trust it; written a tick later it is good. The store is
    # closing, so nothing changes the ledger meanwhile.
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
