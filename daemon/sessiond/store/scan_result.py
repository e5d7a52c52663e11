"""What a scan of a session file found: the records, the damage report, the header."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from sessiond.core.decode import NotAnEntry, decode_entry
from sessiond.core.entries import SessionHeader, UnknownEntry
from sessiond.core.title_slot import TitleSlot
from sessiond.wire.recovery import RecoveryReport

from .records import EntryRecord

# Entries the index decodes whole: small, and needed for labels and the name.
EAGER_TYPES: Final = frozenset({"label", "session_info"})


@dataclass
class ScanResult:
    header: SessionHeader
    header_data: dict[str, Any]
    version: int
    records: list[EntryRecord] = field(default_factory=list)
    report: RecoveryReport = field(default_factory=RecoveryReport)
    size: int = 0
    ends_with_newline: bool = True
    # Lines in the file (the header, blank and damaged ones included), for line numbers
    # in reports about lines found later.
    line_count: int = 0
    # Where the persistent index that this result started from ended (None: no index).
    indexed_size: int | None = None
    # Lines already in hand that the store decodes at once (metadata, repaired UTF-8).
    eager_lines: dict[int, bytes] = field(default_factory=dict)
    # oh-my-pi's title line, when the file starts with one (the header is the line after).
    title_slot: TitleSlot | None = None


def decode_metadata(record: EntryRecord, line: bytes, report: RecoveryReport) -> None:
    """Decode a label or name entry whole (the index needs its values)."""
    try:
        record.entry = decode_entry(line)
    except (msgspec.DecodeError, NotAnEntry, RecursionError):
        record.entry = None
    if isinstance(record.entry, UnknownEntry):
        report.unreadable_entries.append(record.id)
