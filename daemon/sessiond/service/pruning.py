"""Pruning old tool outputs of a session, each agent's way: context edits appended on
pi's files, the tool results edited in place on oh-my-pi's (the originals copied to
``<session>.pruned`` first). The rules: protocol/behaviour.md, "Pruning old tool output".

The archive is ``store.pruned_archive``'s: when it refuses the file at its name,
nothing is pruned.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from sessiond.core.projected_path import ProjectedPath
from sessiond.core.pruning import PrunePlan, plan_pruning, pruning_edit, truncation_notice
from sessiond.core.tokens import Estimator
from sessiond.store.path_access import StorePath
from sessiond.store.pruned_archive import archive_lines, archive_path
from sessiond.store.rewriting import Rewritten, write_rewrite
from sessiond.store.session import SessionStore

from .workers import Exclusive, in_worker


async def prune_tool_outputs(
    store: SessionStore, estimator: Estimator, exclusive: Exclusive[None] | None = None
) -> PrunePlan:
    """Prune old tool outputs in the current context if that saves enough (``core.pruning``).
    With ``exclusive`` (a daemon's, ``SessionActor.exclusive``), oh-my-pi's rewrite of the
    file and the archive are written in a worker thread, alone on the session's file;
    without, here."""
    path = StorePath(store, store.path_records(), estimator)
    plan = plan_pruning(ProjectedPath(store.dialect.compaction_path(path), estimator))
    if plan.empty:
        return plan
    if not store.dialect.prunes_in_place:
        edits = store.append_entries([pruning_edit(candidate) for candidate in plan.candidates])
        plan.edit_ids = [edit.id for edit in edits]
    elif exclusive is None:
        work = _in_place(store, plan)
        work.take(work.write())
    else:

        async def apart() -> None:
            work = _in_place(store, plan)
            work.take(await in_worker(work.write))

        await exclusive(apart)
    return plan


@dataclass
class _InPlace:
    """oh-my-pi's way: the tool results themselves edited and the file rewritten, the
    originals archived first. ``write`` is the file work (any thread); ``take`` takes it
    into the store."""

    write: Callable[[], Rewritten | None]
    take: Callable[[Rewritten | None], None]


def _in_place(store: SessionStore, plan: PrunePlan) -> _InPlace:
    originals = [store.raw_line(store.record(c.entry_id)) for c in plan.candidates]
    pruned_at = time.time_ns() // 1_000_000
    replacements = {}
    for candidate, original in zip(plan.candidates, originals, strict=True):
        data = msgspec.json.decode(original)
        replacements[candidate.entry_id] = pruned_line_data(data, candidate.tokens, pruned_at)
    archive = archive_path(store.path) if store.persisted else None
    rewrite = store.plan_rewrite(replacements)

    def write() -> Rewritten | None:
        if archive is not None:
            archive_lines(archive, originals)
        return write_rewrite(rewrite) if rewrite is not None else None

    def take(done: Rewritten | None) -> None:
        if rewrite is not None and done is not None:
            store.take_rewrite(rewrite, done)

    return _InPlace(write, take)


def pruned_line_data(data: dict[str, Any], tokens: int, pruned_at: int) -> dict[str, Any]:
    """A tool-result entry (as decoded JSON) with its output replaced by the notice.

    Works on the JSON object so every other field, known or not, is kept."""
    message = dict(data["message"])
    message["content"] = [{"type": "text", "text": truncation_notice(tokens)}]
    message["prunedAt"] = pruned_at
    return {**data, "message": message}
