"""Applying a pruning plan to a session file.

The pruned outputs are not thrown away: their original lines are appended to
``<session>.pruned`` (fsynced) before the session is rewritten, so the file
the agent reads shrinks while the full history stays recoverable. The archive is
opened like every file beside a session (``store.safe_files``): a link, a FIFO or a
file others can write, planted at its name, is refused, and then nothing is pruned.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from sessiond.core.entries import CompactionEntry
from sessiond.core.pruning import PrunePlan, plan_pruning, pruned_line_data
from sessiond.core.tokens import Estimator
from sessiond.errors import StorageError
from sessiond.store.fileio import fsync_directory, write_all
from sessiond.store.path_access import StorePath
from sessiond.store.records import EntryRecord
from sessiond.store.safe_files import open_regular
from sessiond.store.session import SessionStore


def context_start(store: SessionStore, records: list[EntryRecord]) -> int:
    """Index in ``records`` where the current context starts (the latest compaction's
    kept region, or the root)."""
    for index in range(len(records) - 1, -1, -1):
        if records[index].type != "compaction":
            continue
        entry = store.entry_of(records[index])
        if isinstance(entry, CompactionEntry):
            for kept in range(index - 1, -1, -1):
                if records[kept].id == entry.first_kept_entry_id:
                    return kept
        return index + 1
    return 0


def prune_tool_outputs(store: SessionStore, estimator: Estimator, now_ms: int) -> PrunePlan:
    """Prune old tool outputs in the current context if that saves enough (``core.pruning``)."""
    records = store.path_records()
    path = StorePath(store, records, estimator)
    plan = plan_pruning(path, context_start(store, records))
    if plan.empty:
        return plan
    originals = [store.raw_line(records[candidate.index]) for candidate in plan.candidates]
    if store.persisted:
        _archive(store, originals)
    replacements = {}
    for candidate, original in zip(plan.candidates, originals, strict=True):
        data = msgspec.json.decode(original)
        replacements[candidate.entry_id] = pruned_line_data(data, candidate.tokens, now_ms)
    store.rewrite_entries(replacements)
    return plan


def archive_path(store: SessionStore) -> str:
    return str(store.path) + ".pruned"


def _archive(store: SessionStore, lines: list[bytes]) -> None:
    path = Path(archive_path(store))
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
    try:
        fd = open_regular(path, flags, what="pruned-output archive", sidecar=True)
        try:
            write_all(fd, b"".join(line + b"\n" for line in lines))
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise StorageError(
            f"cannot write pruned outputs to {path}: {exc.strerror or exc}", path=str(path)
        ) from None
    fsync_directory(store.path.parent)
