"""Taking in other programs' writes in two halves: reading, then taking what was read.

What another program did to a session file can be of any size: lines appended, a file
replaced, a sparse hole of gigabytes. A daemon serves every client from one event loop
and must never read such things there. So following is split in three:

- ``SessionStore.plan_changes`` (where the store is used; one ``stat`` and at most a few
  KiB read) decides whether anything changed, and notes what the read needs to know;
- ``read_changes`` reads and scans what changed (in a worker thread: it touches no
  state of the store, only the file, through a descriptor of its own);
- ``SessionStore.take_changes`` (where the store is used again; memory only) applies
  it, unless the store moved on meanwhile (its own append): then the store looks again.

``SessionStore.follow`` runs the three in a row, for callers that have no event loop.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from sessiond.errors import StorageError
from sessiond.wire.recovery import DamagedLine, RecoveryReport

from .budget import MemoryBudget
from .file_watch import Observation, observe
from .lines import read_chunks
from .opening import read_session
from .prepared_read import PreparedRead, prepare_read
from .records import EntryRecord
from .safe_files import open_regular
from .scan import AppendedLines, scan_appended
from .scan_result import EAGER_TYPES, ScanResult, decode_metadata


@dataclass(frozen=True)
class ChangePlan:
    """What a read of the changes needs, taken from the store where it is used."""

    verdict: Literal["grew", "replaced"]
    path: Path
    use_index: bool
    # Lines found changed behind the store so far (``FileFollower.suspicions``): a whole
    # read answers those, and, while one is unanswered, scans every line (the persistent
    # index cannot see such a change).
    suspicions: int
    suspected: bool
    # Where the lines the store knows end, how many it holds, and the state it was in.
    start: int
    held: int
    generation: int
    # Scan state at ``start``: the header (and oh-my-pi's title line) and the number of
    # lines before it.
    header: ScanResult
    # Bytes at the start that change in place (oh-my-pi's title line; see ``follow``).
    skip_first: int


@dataclass
class Grown:
    """Lines other programs appended, read and scanned."""

    found: AppendedLines
    second_headers: list[DamagedLine]
    seen: Observation
    # Lines of the file before the first appended one (``found.line_count`` goes on).
    lines_before: int
    # oh-my-pi's title line as it is now, when another program renamed the session.
    title_line: bytes | None = None


@dataclass
class Reloaded:
    """The whole file, read again, and its index and leaf made ready."""

    result: ScanResult
    end: int
    seen: Observation
    prepared: PreparedRead


@dataclass
class Changes:
    plan: ChangePlan
    grown: Grown | None = None
    reloaded: Reloaded | None = None
    report: RecoveryReport = field(default_factory=RecoveryReport)


def read_changes(plan: ChangePlan) -> Changes:
    """Read what changed (any amount of file work; touches nothing of the store)."""
    if plan.verdict == "grew":
        fd = open_regular(plan.path, os.O_RDONLY)
        try:
            grown = _read_grown(plan, fd)
        finally:
            os.close(fd)
        if grown is not None:
            return Changes(plan, grown=grown)
    return Changes(plan, reloaded=_read_whole(plan))


def _read_grown(plan: ChangePlan, fd: int) -> Grown | None:
    size = os.fstat(fd).st_size
    if size < plan.start:
        return None  # shrunk since the look: read it again whole
    return read_grown(plan, fd, size)


def read_grown(plan: ChangePlan, fd: int, end: int) -> Grown:
    """The complete lines between ``plan.start`` and ``end`` of the file open on ``fd``,
    scanned, with what taking them needs read too (labels' and names' lines, second
    headers' line numbers, the title line after a rename)."""
    budget = MemoryBudget(plan.path, end, known=plan.held)
    found = scan_appended(
        plan.path,
        plan.header,
        plan.start,
        (chunk for _, chunk in read_chunks(fd, plan.start, end)),
        budget,
    )
    second_headers = prepare_lines(
        found.records, found.eager_lines, fd, known=(plan.start, plan.header.line_count)
    )
    found.records = [record for record in found.records if record.type != "session"]
    renamed = any(record.type == "title_change" for record in found.records)
    title = os.pread(fd, plan.skip_first, 0) if renamed and plan.skip_first else None
    seen = observe(fd, found.end, skip_first=plan.skip_first)
    return Grown(found, second_headers, seen, plan.header.line_count, title)


def _read_whole(plan: ChangePlan) -> Reloaded:
    read = read_session(
        plan.path, readonly=True, use_index=plan.use_index, trust_index=not plan.suspected
    )
    if read.source_fd is not None:
        os.close(read.source_fd)
        raise StorageError(
            f"{plan.path} was replaced by a file of an older format; close and reopen it",
            path=str(plan.path),
        )
    result = read.result
    fd = open_regular(plan.path, os.O_RDONLY)
    try:
        headers = prepare_lines(result.records, result.eager_lines, fd)
        result.report.damaged_lines += headers
        result.records = [record for record in result.records if record.type != "session"]
        for seq, record in enumerate(result.records):
            record.seq = seq
        torn = result.report.torn_tail
        # A tail not cut off (another program may still be writing it) is not read.
        end = torn.offset if torn is not None and torn.saved_to is None else result.size
        skip_first = result.title_slot.length if result.title_slot is not None else 0
        prepared = prepare_read(result, plan.path, fd)
        return Reloaded(result, end, observe(fd, end, skip_first=skip_first), prepared)
    finally:
        os.close(fd)


def prepare_lines(
    records: list[EntryRecord],
    eager: dict[int, bytes],
    fd: int,
    *,
    known: tuple[int, int] = (0, 0),
) -> list[DamagedLine]:
    """The file work the store would otherwise do when it takes the records: the lines of
    labels and names read (into ``eager``, which the store decodes), and each second
    session header turned into a damaged line with its line number (counted on from
    ``known``: an offset where a line starts, before ``records``, and the lines before it)."""
    headers = [record for record in records if record.type == "session"]
    for record in records:
        if record.type in EAGER_TYPES and record.offset not in eager:
            eager[record.offset] = os.pread(fd, record.length, record.offset)
    return [
        DamagedLine(
            line=line_number,
            offset=record.offset,
            length=record.length,
            reason="a second session header",
            preview="",
        )
        for record, line_number in zip(headers, line_numbers(fd, headers, *known), strict=True)
    ]


def line_numbers(
    fd: int, records: list[EntryRecord], start: int = 0, lines_before: int = 0
) -> list[int]:
    """The 1-based line numbers of ``records`` (in file order, none before ``start``), in
    one pass from ``start``, where a line starts with ``lines_before`` lines before it."""
    numbers: list[int] = []
    newlines, position = lines_before, start
    for record in records:
        while position < record.offset:
            chunk = os.pread(fd, min(8 << 20, record.offset - position), position)
            if not chunk:
                break
            newlines += chunk.count(b"\n")
            position += len(chunk)
        numbers.append(newlines + 1)
    return numbers


def decode_eager(
    records: list[EntryRecord], eager: dict[int, bytes], report: RecoveryReport
) -> None:
    """Decode the labels and names among ``records`` from lines already read."""
    for record in records:
        if record.type in EAGER_TYPES:
            decode_metadata(record, eager[record.offset], report)
