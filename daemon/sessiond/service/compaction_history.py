"""Taking a compaction back, and what a summary stands for: the tree is append-only.

Undoing the context's newest compaction appends, under the entry the compaction
was written after, a marker (a ``custom`` entry, which no context shows) and copies
of the entries that followed the compaction on the path, and moves the leaf to the
last of them: the context is the one before the compaction, followed by what came
after it. Nothing is deleted or rewritten: the compaction and the entries after it
stay where they were, on the branch the leaf left. The copies' answers carry no
usage (their measurements described the compacted context, and cost totals would
count them twice), so the context's size is estimated until the next answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from sessiond.core.entries import CompactionEntry
from sessiond.errors import ConflictError, InvalidParamsError, NotFoundError, NothingToUndoError
from sessiond.store.records import EntryRecord
from sessiond.store.session import SessionStore

UNDONE_TYPE: Final = "sessiond.compactionUndone"
# Ids answered per page of ``covered``; the whole list is proportional to the session.
MAX_PAGE: Final = 10_000
_ZERO_USAGE: Final = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0}


@dataclass
class Undone:
    compaction_id: str
    marker_id: str
    # The copies, in order, and the entries they copy.
    copied_ids: list[str]
    copied_from: list[str]
    # Entries after the compaction that were not copied: a type the file's agent does
    # not take from clients, or a label or an edit of an entry that was copied.
    skipped_ids: list[str]


def undo_compaction(store: SessionStore, expected_id: str | None) -> Undone:
    path = store.path_records()
    index = next((i for i in range(len(path) - 1, -1, -1) if path[i].type == "compaction"), None)
    if index is None:
        raise NothingToUndoError("the context has no compaction to undo")
    compaction = path[index]
    if expected_id is not None and expected_id != compaction.id:
        raise ConflictError(
            f"the context's newest compaction is {compaction.id}, not {expected_id}",
            entryId=compaction.id,
            expectedEntryId=expected_id,
        )
    later = path[index + 1 :]
    later_ids = {r.id for r in later}
    types = store.dialect.appendable_types
    copied = [
        r
        for r in later
        if r.type in types and r.type != "compaction" and not _refers_to(store, r, later_ids)
    ]
    skipped = [r.id for r in later if r not in copied]
    marker: dict[str, Any] = {
        "type": "custom",
        "customType": UNDONE_TYPE,
        "data": {"compactionId": compaction.id, "copiedIds": [r.id for r in copied]},
    }
    bodies = [marker, *_copies(store, copied)]
    old_leaf = store.leaf_id
    parent = index - 1
    if parent >= 0:
        store.branch(path[parent].id)
    else:
        store.reset_leaf()
    try:
        entries = store.append_entries(bodies, types=types)
    except BaseException:
        if old_leaf is not None:
            store.branch(old_leaf)
        raise
    return Undone(
        compaction_id=compaction.id,
        marker_id=entries[0].id,
        copied_ids=[e.id for e in entries[1:]],
        copied_from=[r.id for r in copied],
        skipped_ids=skipped,
    )


def _refers_to(store: SessionStore, record: EntryRecord, ids: set[str]) -> bool:
    """Whether a label or an edit targets one of ``ids`` (the copies get new ids, and a
    batch cannot name them before it is written: such entries are not copied; the
    output an edit pruned is then whole again in the context, until pruned anew)."""
    if record.type not in ("label", "context_edit"):
        return False
    target = json.loads(store.raw_line(record)).get("targetId")
    return isinstance(target, str) and target in ids


def _copies(store: SessionStore, records: list[EntryRecord]) -> list[dict[str, Any]]:
    """The entries' bodies to append again, as they are but for id, parent, time, and
    the answers' usage."""
    bodies: list[dict[str, Any]] = []
    for record in records:
        body = json.loads(store.raw_line(record))
        for key in ("id", "parentId", "timestamp"):
            body.pop(key, None)
        message = body.get("message")
        if isinstance(message, dict) and message.get("role") == "assistant":
            message["usage"] = dict(_ZERO_USAGE)
        bodies.append(body)
    return bodies


@dataclass
class Covered:
    compaction_id: str
    first_kept_entry_id: str
    previous_compaction_id: str | None
    # A page of the ids of the entries the summary replaced, oldest first.
    ids: list[str]
    total: int


def covered_entries(store: SessionStore, entry_id: str, offset: int, limit: int) -> Covered:
    """The entries a compaction's summary stands for: on its path, from the previous
    compaction's first kept entry (or the root) to its own first kept entry, compaction
    entries left out (the previous summary is in ``previous_compaction_id``)."""
    if not store.has_entry(entry_id):
        raise NotFoundError(f"no entry {entry_id}", entryId=entry_id)
    entry = store.entry_of(store.record(entry_id))
    if not isinstance(entry, CompactionEntry):
        raise InvalidParamsError(f"entry {entry_id} is not a compaction", entryId=entry_id)
    if offset < 0 or not 1 <= limit <= MAX_PAGE:
        raise InvalidParamsError(f"offset must be >= 0 and limit 1..{MAX_PAGE}")
    path = store.path_records(entry_id)[:-1]
    previous: CompactionEntry | None = None
    for record in reversed(path):
        if record.type == "compaction":
            found = store.entry_of(record)
            if isinstance(found, CompactionEntry):
                previous = found
                break
    position = {record.id: i for i, record in enumerate(path)}
    start = position.get(previous.first_kept_entry_id, 0) if previous is not None else 0
    end = position.get(entry.first_kept_entry_id, len(path))
    ids = [r.id for r in path[start:end] if r.type != "compaction"]
    return Covered(
        compaction_id=entry_id,
        first_kept_entry_id=entry.first_kept_entry_id,
        previous_compaction_id=previous.id if previous is not None else None,
        ids=ids[offset : offset + limit],
        total=len(ids),
    )
