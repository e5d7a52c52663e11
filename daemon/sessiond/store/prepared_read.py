"""A file read again whole, made ready where it was read: its entry index and its leaf.

Taking a reread of a big file (another program replaced it) means indexing every record
and walking the path to the leaf: work in proportion to the file. ``prepare_read`` does
it where the file was read (a worker thread, on records no one else holds yet), so that
where the store is used ``ReadableSession.adopt`` only swaps it in.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from sessiond.core.dialect import Dialect, dialect_for
from sessiond.core.entries import Entry
from sessiond.core.title_slot import TitleSlot
from sessiond.wire.recovery import RecoveryReport

from . import line_check
from .entry_index import EntryIndex, IndexContents
from .leaf_view import LeafView
from .omp_leaf_view import OmpLeafView
from .records import EntryRecord
from .scan_result import ScanResult

# The view that keeps the current leaf's context, by the file's dialect.
ContextView = LeafView | OmpLeafView
VIEWS: Final[dict[str, type[ContextView]]] = {"pi": LeafView, "oh-my-pi": OmpLeafView}


@dataclass
class PreparedRead:
    """What a store holds of a file read whole, ready to be adopted as it is."""

    title_slot: TitleSlot | None
    dialect: Dialect
    recovery: RecoveryReport
    index: IndexContents
    # At the last entry; its entries were read through the preparing thread's descriptor
    # (the store gives it its own reader when it adopts it).
    view: ContextView


def prepare_read(result: ScanResult, path: Path, fd: int) -> PreparedRead:
    """The index and the leaf view of ``result`` (a scan of the file open on ``fd``,
    second session headers already taken out): file work and work in proportion to the
    file, for any thread."""

    # Lines are read back as the store reads them (``line_check``): invalid UTF-8 read as
    # pi reads it, a line that is not the indexed entry refused.
    def raw_line(record: EntryRecord) -> bytes:
        data = os.pread(fd, record.length, record.offset)
        return line_check.checked_line(record, data, path, result.report)

    def load(record: EntryRecord) -> Entry:
        data = os.pread(fd, record.length, record.offset)
        return line_check.checked_entry(record, data, path, result.report)

    index = EntryIndex()
    headers = index.load(result.records, result.eager_lines, raw_line, result.report)
    assert not headers, "second session headers are taken out before (prepare_lines)"
    dialect = dialect_for(result.title_slot is not None)
    view = VIEWS[dialect.name](load)
    leaf = index.last()
    view.reset(index.path_to(leaf) if leaf is not None else [])
    return PreparedRead(result.title_slot, dialect, result.report, index.contents(), view)
