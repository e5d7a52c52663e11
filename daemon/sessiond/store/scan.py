"""Reading a session file into the index, without decoding message bodies.

The file is read in chunks (a 200 MB session never sits in memory whole) and each
complete line handed to a ``line_scanner.LineScanner``. Time is linear in the file's
size and memory bounded whatever the lines are like: a line longer than
``MAX_LINE_BYTES`` (64 MiB; see ``lines``) is never gathered. In the middle of the file
it is a damaged line (offset, length, the first bytes as a preview) left in place
unread; as the last line without a newline it is a torn tail, which the store cuts off
keeping only its first ``MAX_LINE_BYTES`` in the ``.corrupt`` file.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from sessiond.errors import InvalidSessionFileError
from sessiond.wire.recovery import RecoveryReport

from .budget import MemoryBudget
from .fileio import path_error
from .line_scanner import LineScanner
from .lines import PartialLine
from .records import EntryRecord
from .safe_files import open_regular
from .scan_result import ScanResult

CHUNK_SIZE: Final = 8 * 1024 * 1024


def open_session_file(path: Path) -> int:
    """``path`` opened for reading, if it is a regular file and not a symbolic link; the
    open never blocks (a FIFO there is refused at once)."""
    try:
        return open_regular(path, os.O_RDONLY)
    except FileNotFoundError:
        raise InvalidSessionFileError(
            f"{path}: no such session file", reason="notFound", path=str(path)
        ) from None
    except (OSError, ValueError) as exc:
        raise path_error("open", path, exc) from None


def file_chunks(fd: int) -> Iterator[bytes]:
    """The rest of the file open on ``fd``, in chunks (the caller closes ``fd``)."""
    while chunk := os.read(fd, CHUNK_SIZE):
        yield chunk


def read_session_bytes(path: Path) -> tuple[int, Iterator[bytes]]:
    """Open ``path`` for scanning: its size and an iterator of chunks."""
    fd = open_session_file(path)

    def chunks() -> Iterator[bytes]:
        try:
            yield from file_chunks(fd)
        finally:
            os.close(fd)

    return os.fstat(fd).st_size, chunks()


def scan(
    path: Path,
    chunks: Iterable[bytes],
    size: int,
    visit: Callable[[list[EntryRecord]], None] | None = None,
) -> ScanResult:
    """Index a session from its bytes. Raises ``InvalidSessionFileError`` for a bad header,
    ``LimitExceededError`` for a file that would take too much memory (``budget``).

    Linear in the file's size whatever its lines are like, and never holding more than
    one chunk and one line of at most ``MAX_LINE_BYTES``: a longer line is reported
    (a damaged line, or a torn tail if it is the last and has no newline) and skipped.
    With ``visit``, the records are handed to it chunk by chunk and not kept (the result
    has none): a listing reads a file in memory that does not grow with it.
    """
    scanner = LineScanner(path, MemoryBudget(path, size), visit)
    tail = _feed_chunks(scanner, chunks, 0)
    return scanner.finish(tail, size)


@dataclass
class AppendedLines:
    """What ``scan_appended`` found after a known end of the file."""

    records: list[EntryRecord]
    report: RecoveryReport
    eager_lines: dict[int, bytes]
    line_count: int  # lines of the file up to ``end``
    end: int  # the offset just after the last complete line


def scan_appended(
    path: Path, known: ScanResult, start: int, chunks: Iterable[bytes], budget: MemoryBudget
) -> AppendedLines:
    """Index the complete lines that follow ``start`` (the end of a complete line) in a
    file whose first ``start`` bytes ``known`` describes. An unfinished last line is not
    read: ``end`` stops before it, for the caller to decide whether it is still being
    written. ``budget``: what the file may take in memory, the records held so far
    included."""
    scanner = _continuing(path, known, budget)
    tail = _feed_chunks(scanner, chunks, start)
    end = tail.offset if tail is not None else scanner.fed_to
    return AppendedLines(
        records=scanner.records,
        report=scanner.report,
        eager_lines=scanner.eager_lines,
        line_count=scanner.line_no,
        end=end,
    )


def scan_rest(path: Path, known: ScanResult, chunks: Iterable[bytes], size: int) -> ScanResult:
    """Finish the scan of a file of ``size`` bytes whose first ``known.size`` bytes (up to
    the end of a line) ``known`` describes: the same result as a scan of the whole file,
    reading only the rest (``chunks``, from ``known.size``)."""
    scanner = _continuing(path, known, MemoryBudget(path, size))
    scanner.records = known.records
    scanner.report = known.report
    tail = _feed_chunks(scanner, chunks, known.size)
    return scanner.finish(tail, size)


def _continuing(path: Path, known: ScanResult, budget: MemoryBudget) -> LineScanner:
    """A scanner that goes on after the lines ``known`` describes."""
    scanner = LineScanner(path, budget)
    scanner.result = ScanResult(
        header=known.header,
        header_data=known.header_data,
        version=known.version,
        title_slot=known.title_slot,
    )
    scanner.line_no = known.line_count
    return scanner


def _feed_chunks(scanner: LineScanner, chunks: Iterable[bytes], base: int) -> PartialLine | None:
    """Feed every complete line of ``chunks`` (the first at file offset ``base``) to the
    scanner; the unfinished last line, if any, is returned."""
    scanner.fed_to = base
    partial: PartialLine | None = None  # the line that runs on into the next chunk
    for chunk in _at_most_chunk_size(chunks):
        start = 0
        if partial is not None:
            first = chunk.find(b"\n")
            if first < 0:
                partial.extend(chunk)
                base += len(chunk)
                continue
            # Only the line that spans chunks is copied, never a whole chunk.
            partial.extend(memoryview(chunk)[:first])
            scanner.spanning_line(partial)
            partial = None
            start = first + 1
        end = chunk.rfind(b"\n") + 1
        if end > start:
            scanner.feed(chunk, start, end, base)
        rest = max(end, start)
        if rest < len(chunk):
            partial = PartialLine(base + rest)
            partial.extend(memoryview(chunk)[rest:])
        base += len(chunk)
        scanner.fed_to = base if partial is None else partial.offset
        scanner.chunk_done()
    return partial


def _at_most_chunk_size(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The chunks, cut to ``CHUNK_SIZE`` where longer: a line inside one chunk is then
    always shorter than ``MAX_LINE_BYTES``."""
    for chunk in chunks:
        if len(chunk) <= CHUNK_SIZE:
            yield chunk
        else:
            for start in range(0, len(chunk), CHUNK_SIZE):
                yield chunk[start : start + CHUNK_SIZE]
