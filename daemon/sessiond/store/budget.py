"""How much memory an open may take: about ten times the file's size, at most.

A session's index costs a few hundred bytes an entry (the record, its id, its place in
the id map) whatever the entry's size. Real entries are hundreds of bytes to megabytes
long (a pi entry has an id, a parent, a timestamp and a type before any content), so an
open holds well under the file's size; but a file of tiny lines (``{"id":"7"}``, twelve
bytes) would cost the daemon some thirty times its size, and a file of damaged
two-byte lines more than a hundred times, in records and report items. A scan therefore
counts what it keeps as it goes and stops, with ``limitExceeded``, once that would pass
``MEMORY_PER_FILE_BYTE`` times the file's size (``MEMORY_FLOOR`` at least, so that no
small file is ever refused). Such a file is not opened, listed or followed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from sessiond.errors import LimitExceededError
from sessiond.wire.recovery import RecoveryReport

MEMORY_PER_FILE_BYTE: Final = 10
MEMORY_FLOOR: Final = 16 * 1024 * 1024
# Measured with tracemalloc (CPython 3.11, 64-bit): a record with a short id, its list
# slot and its id-map entry; a reported damaged line with its reason and preview; an
# item of the report's other lists.
RECORD_BYTES: Final = 320
DAMAGED_LINE_BYTES: Final = 480
REPORT_ITEM_BYTES: Final = 64


class MemoryBudget:
    """What a scan of ``path`` (``size`` bytes) may keep: ``known`` records already held
    (a scan that goes on after an index or the lines read before) count too."""

    def __init__(self, path: Path, size: int, known: int = 0) -> None:
        self.path = path
        self.size = size
        self.known = known
        self.limit = max(MEMORY_PER_FILE_BYTE * size, MEMORY_FLOOR)

    def check(self, records: int, report: RecoveryReport) -> None:
        listed = (
            len(report.invalid_utf8_lines)
            + len(report.lone_surrogate_entries)
            + len(report.duplicate_ids)
            + len(report.unreadable_entries)
        )
        used = (
            (self.known + records) * RECORD_BYTES
            + len(report.damaged_lines) * DAMAGED_LINE_BYTES
            + listed * REPORT_ITEM_BYTES
        )
        if used > self.limit:
            raise LimitExceededError(
                f"{self.path}: holding this file's {self.known + records} lines or more "
                f"would take over {used >> 20} MiB, more than {MEMORY_PER_FILE_BYTE} times its "
                f"{self.size} bytes (what sessiond holds for a file at most): it is mostly "
                "lines too short to be pi entries, or damage, and is not opened",
                limit="openMemory",
                maximum=self.limit,
                path=str(self.path),
            )
