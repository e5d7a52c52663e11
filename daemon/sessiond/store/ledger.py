"""The ledger: what a scan of the whole session file would find, kept up to date as lines
are read and written, and saved as the persistent index (``index_file``) at close."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import msgspec

from sessiond.core.title_slot import TitleSlot
from sessiond.wire.recovery import RecoveryReport

from . import index_file
from .records import EntryRecord
from .scan_result import ScanResult


class Ledger:
    """The scan-level description of the file (None while it cannot be kept: not written
    yet, read through a migrated copy, rewritten since)."""

    def __init__(self) -> None:
        self._scan: ScanResult | None = None
        self._saved_size = -1
        # Lines other programs added that the ledger does not have.
        self._unread_lines = 0

    def start(self, result: ScanResult | None) -> None:
        """Start again from a scan of the file (kept unless it left a torn tail in place)."""
        self._unread_lines = 0
        self._saved_size = -1
        self._scan = None
        if result is not None and (
            result.report.torn_tail is None or result.report.torn_tail.saved_to
        ):
            self._scan = _copy_of(result)

    def indexed_at(self, size: int | None) -> None:
        """The persistent index on disk already describes the file up to ``size``."""
        if size is not None:
            self._saved_size = size

    def written(self, result: ScanResult) -> None:
        """The file was just created with exactly what ``result`` describes."""
        self._scan = result

    def drop(self) -> None:
        """Offsets of lines the ledger cannot follow moved (a rewrite): the next open scans."""
        self._scan = None

    def appended(self, records: list[EntryRecord]) -> None:
        """The store appended these lines."""
        if self._scan is not None:
            self._scan.records.extend(records)
            self._scan.line_count += len(records)

    def took(
        self,
        records: list[EntryRecord],
        report: RecoveryReport,
        line_count: int,
        lines_before: int,
    ) -> None:
        """Another program's lines, scanned: ``line_count`` lines in the file after them,
        ``lines_before`` before."""
        if self._scan is not None:
            merge_reports(self._scan.report, report)
            self._scan.records.extend(records)
            self._scan.line_count = line_count
        else:
            self._unread_lines += line_count - lines_before

    def retitled(self, slot: TitleSlot) -> None:
        if self._scan is not None:
            self._scan.title_slot = slot

    @property
    def header_data(self) -> dict[str, Any]:
        return self._scan.header_data if self._scan is not None else {}

    def line_count(self, held: int) -> int:
        """Lines in the file up to the known end; ``held``: the lines the store holds."""
        return self._scan.line_count if self._scan is not None else held + self._unread_lines

    def save(
        self, path: Path, fd: int | None, size: int, header_line: bytes, *, apart: bool
    ) -> None:
        """Save the ledger as the persistent index of the file open on ``fd``, ending at
        ``size`` (at close). ``apart``: in a thread, never where the caller runs."""
        ledger = self._scan
        if ledger is None or size == self._saved_size or fd is None:
            return
        ledger.size = size
        ledger.ends_with_newline = True
        wait = index_file.seconds_until_trusted(os.fstat(fd))
        if wait <= 0 and not apart:
            index_file.save(path, fd, ledger, header_line)
            return
        # Written now, the index would be racy (the file changed within a timestamp tick)
        # and the next open would not trust it; written a tick later it is good. The store
        # is closing, so nothing changes the ledger meanwhile.
        timer = threading.Timer(wait, index_file.save_at_path, (path, ledger, header_line))
        timer.daemon = True
        timer.start()


def _copy_of(result: ScanResult) -> ScanResult:
    """A scan-level copy of ``result`` that the store's own bookkeeping leaves alone: the
    records list (the store filters it) and the report (the store adds to it)."""
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


def merge_reports(into: RecoveryReport, found: RecoveryReport) -> None:
    """Add what a scan of appended lines found to a report."""
    into.damaged_lines += found.damaged_lines
    into.invalid_utf8_lines += found.invalid_utf8_lines
    into.lone_surrogate_entries += found.lone_surrogate_entries
    into.blank_lines += found.blank_lines
