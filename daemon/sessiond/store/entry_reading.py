"""Entries read back from the session file: each line checked against its record
(``line_check``), decoded, and held by the index's cache."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from sessiond.core.entries import Entry
from sessiond.errors import FileChangedError
from sessiond.wire.recovery import DamagedLine, RecoveryReport

from . import line_check
from .catching_up import line_numbers
from .entry_index import EntryIndex
from .foreign_writes import ForeignWrites
from .records import EntryRecord
from .session_file import SessionFile

T = TypeVar("T")


class EntryReader:
    """Reads indexed entries from the file; a line that is not what was indexed there
    means the file changed behind the store, and the next look reads it again whole."""

    def __init__(self, file: SessionFile, index: EntryIndex, foreign: ForeignWrites) -> None:
        self._file = file
        self._index = index
        self._foreign = foreign

    def entry_of(self, record: EntryRecord, recovery: RecoveryReport) -> Entry:
        """The decoded entry of a record (cached by the index)."""
        cached = self._index.cached(record)
        if cached is not None:
            return cached
        entry = self._checked(record, line_check.checked_entry, recovery)
        self._index.keep(record, entry)
        return entry

    def raw_line(self, record: EntryRecord, recovery: RecoveryReport) -> bytes:
        """The entry's line as stored (without the newline), valid UTF-8 and strict JSON."""
        if record.offset < 0:
            return self._file.unwritten_line(record.id)
        return self._checked(record, line_check.checked_line, recovery)

    def second_headers(self, records: list[EntryRecord]) -> list[DamagedLine]:
        """Session headers after the first, as damaged lines with their line numbers."""
        numbers = line_numbers(self._file.reader(), records) if records else []
        return [
            DamagedLine(
                line=number,
                offset=record.offset,
                length=record.length,
                reason="a second session header",
                preview="",
            )
            for record, number in zip(records, numbers, strict=True)
        ]

    def _checked(
        self,
        record: EntryRecord,
        check: Callable[[EntryRecord, bytes, Path, RecoveryReport], T],
        recovery: RecoveryReport,
    ) -> T:
        data = self._file.read(record.offset, record.length)
        try:
            return check(record, data, self._file.path, recovery)
        except FileChangedError:
            self._foreign.suspect()
            raise
