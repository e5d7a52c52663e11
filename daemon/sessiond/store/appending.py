"""Putting validated entries into the session file: held until pi would write the file,
then appended in one ``write()``, fsynced as the policy and the entry types require."""

from __future__ import annotations

from typing import Final

import msgspec

from sessiond.core.entries import CURRENT_SESSION_VERSION, MessageEntry, SessionHeader
from sessiond.core.messages import AssistantMessage
from sessiond.core.title_slot import TitleSlot
from sessiond.wire.recovery import RecoveryReport

from . import title_line
from .catching_up import Grown
from .entry_index import EntryIndex
from .entry_validation import Prepared
from .foreign_writes import ForeignWrites
from .ledger import Ledger
from .scan_result import ScanResult
from .session_file import SessionFile

# Entries that are fsynced before an append returns, whatever the policy.
_ALWAYS_SYNCED: Final = frozenset({"compaction", "branch_summary"})


class EntryWriter:
    """Writes a session's validated entries, keeping the file's end, the ledger and what
    the store saw of the file in step."""

    def __init__(
        self,
        file: SessionFile,
        index: EntryIndex,
        ledger: Ledger,
        foreign: ForeignWrites,
        *,
        header: SessionHeader,
        header_line: bytes,
    ) -> None:
        self._file = file
        self._index = index
        self._ledger = ledger
        self._foreign = foreign
        self._header = header
        self._header_line = header_line

    def write(
        self, prepared: list[Prepared], *, title_slot: TitleSlot | None, recovery: RecoveryReport
    ) -> Grown | None:
        """Put a batch on disk (or hold it, before the first assistant message, as pi
        does). Lines another program appended just before ours, in the same instant,
        are indexed and come back (``ForeignWrites.place_among_others``)."""
        file = self._file
        if not file.persisted:
            file.hold([(record, line) for record, _, line in prepared])
            new_assistant = any(
                isinstance(entry, MessageEntry) and isinstance(entry.message, AssistantMessage)
                for _, entry, _ in prepared
            )
            if new_assistant or self._index.has_assistant:
                try:
                    self.write_held(title_slot)
                except BaseException:
                    file.unhold(len(prepared))
                    raise
            return None
        force = any(record.type in _ALWAYS_SYNCED for record, _, _ in prepared)
        start = file.size
        data, offsets = file.append([line for _, _, line in prepared], sync=force)
        self._index.bump()
        for (record, _, _), offset in zip(prepared, offsets, strict=True):
            record.offset = offset
        status = file.appended_status()
        raced = status.st_size != file.size
        before: Grown | None = None
        if raced:
            # Another program appended between our look at the file and our write: the
            # lines are whole (both sides append whole lines), but ours are elsewhere.
            before = self._foreign.place_among_others(prepared, data, start, recovery, title_slot)
        self._ledger.appended([record for record, _, _ in prepared])
        self._foreign.saw(None if raced else status)
        if raced:
            self._foreign.look_again()
        return before

    def write_held(self, title_slot: TitleSlot | None) -> None:
        """Create the file with the header and every line held (pi's ``ensureOnDisk``)."""
        first = title_line.first_line(title_slot)
        held = len(self._index)
        # The batch being written is indexed after this returns.
        written = [
            r for r in self._file.write_held(first, self._header_line) if r.id not in self._index
        ]
        self._index.bump()
        self._ledger.written(
            ScanResult(
                header=self._header,
                header_data=msgspec.json.decode(self._header_line),
                version=CURRENT_SESSION_VERSION,
                records=list(self._index.records) + written,
                size=self._file.size,
                line_count=1 + bool(first) + held + len(written),
                title_slot=title_slot,
            )
        )
        self._foreign.saw()
