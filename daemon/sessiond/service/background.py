"""Background compaction: a summary written while the agent works, committed at the threshold.

Once the context passes the soft mark (``compaction.backgroundAt`` of the threshold),
the end-of-turn check prepares a compaction and has it summarized here, in a task of
its own, while the agent goes on. The cut is chosen as the threshold would choose it:
what the agent appends until then is expected to stay in the kept part, so the kept
part is the given ``keepRecentTokens`` again when the summary is committed, and
compactions come no more often than blocking ones would.

A session holds at most one such summary. It is committed by the next compaction
that finds it still valid (``take``): prepared on the current path, no compaction
written since, the file neither rewritten nor written by another program since, and
the kept part plus the summary under the threshold. Anything else drops it, and the
compaction is written as it would have been without it. Nothing is written to the
session until the commit.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass

import msgspec

from sessiond.core.dialect import CompactionFields
from sessiond.core.preparation import CompactionPreparation
from sessiond.core.tokens import Estimator
from sessiond.errors import SessiondError
from sessiond.store.session import SessionStore
from sessiond.wire.compaction import CompactionEnded, CompactionStarted

from .compactor import Compactor, PreparedSummary
from .summarize import SummaryContext

_log = logging.getLogger(__name__)

BackgroundEvent = CompactionStarted | CompactionEnded
BackgroundFailed = "Background compaction failed"


@dataclass(frozen=True)
class BackgroundWork:
    """How a background summary is written and shown: its summarizer (whose progress goes
    to whoever follows the work) and where its events go."""

    summaries: SummaryContext
    emit: Callable[[BackgroundEvent], None]


@dataclass
class _Job:
    task: asyncio.Task[PreparedSummary]
    # ``SessionActor.changes`` when the work started: a rewrite or another program's
    # write since makes the summary stale.
    changes: int
    prepared_leaf: str | None


def background_keep(keep_recent_tokens: int, tokens: int, threshold: int) -> int:
    """The ``keepRecentTokens`` of a cut made at ``tokens`` so that, once the context has
    grown to the threshold, the kept part is about ``keep_recent_tokens`` again. At
    least a quarter of it is kept, so that the newest turn is never summarized away."""
    return max(keep_recent_tokens // 4, keep_recent_tokens - max(0, threshold - tokens))


class BackgroundSummaries:
    """The session's one background summary: started, awaited, taken or dropped."""

    def __init__(self) -> None:
        self._job: _Job | None = None

    @property
    def active(self) -> bool:
        """Whether a summary is being written or waits to be committed."""
        return self._job is not None

    def start(
        self,
        compactor: Compactor,
        preparation: CompactionPreparation,
        work: BackgroundWork,
        *,
        changes: int,
    ) -> None:
        self.abort()
        task = asyncio.ensure_future(_write(compactor, preparation, work))
        # A failure is reported by the events and the commit's fallback, not by the loop.
        task.add_done_callback(_consume)
        self._job = _Job(task, changes, compactor.store.leaf_id)

    def valid_now(self, store: SessionStore, changes: int) -> bool:
        """Whether the summary (written or being written) could still be committed."""
        job = self._job
        if job is None or job.changes != changes:
            return False
        path = store.path_records()
        index = next((i for i, r in enumerate(path) if r.id == job.prepared_leaf), None)
        return index is not None and not any(r.type == "compaction" for r in path[index + 1 :])

    def abort(self) -> bool:
        """Drop the summary, stopping its requests if they still run."""
        job, self._job = self._job, None
        if job is None:
            return False
        job.task.cancel()
        return True

    async def take(
        self,
        store: SessionStore,
        estimator: Estimator,
        *,
        changes: int,
        limit: int | None,
    ) -> PreparedSummary | None:
        """The summary to commit, waited for if it is still being written; None if there
        is none, it failed, or it became stale (then it is dropped)."""
        job = self._job
        if job is None:
            return None
        try:
            # Not shielded: cancelling whoever waits (compaction/abort) stops it too.
            ready = await job.task
        except asyncio.CancelledError:
            if self._job is job:
                self._job = None
            if job.task.cancelled() and not _cancelling():
                return None
            raise
        except Exception:  # a failed summary: reported by its events, written afresh now
            if self._job is job:
                self._job = None
            return None
        if self._job is job:
            self._job = None
        stale = stale_reason(store, ready, estimator, changed=changes != job.changes, limit=limit)
        if stale is not None:
            _log.info("background summary of %s dropped: %s", store.path, stale)
            return None
        return ready


def stale_reason(
    store: SessionStore,
    ready: PreparedSummary,
    estimator: Estimator,
    *,
    changed: bool,
    limit: int | None,
) -> str | None:
    """Why ``ready`` must not be committed now (None: it may)."""
    if changed:
        return "the file was rewritten or written by another program"
    prepared = ready.prepared_leaf
    path = store.path_records()
    index = next((i for i, record in enumerate(path) if record.id == prepared), None)
    if index is None:
        return "the leaf moved to another branch"
    if any(record.type == "compaction" for record in path[index + 1 :]):
        return "another compaction was written since"
    if limit is not None:
        body = store.dialect.compaction_body(
            CompactionFields(
                summary=ready.result.summary,
                first_kept_entry_id=ready.result.first_kept_entry_id,
                tokens_before=0,
            )
        )
        after = store.estimate_after(body, estimator)
        if after > limit:
            return f"the kept part and the summary ({after} tokens) are over the threshold"
    return None


async def _write(
    compactor: Compactor, preparation: CompactionPreparation, work: BackgroundWork
) -> PreparedSummary:
    emit = work.emit
    emit(CompactionStarted(reason="background", will_retry=False))
    try:
        ready = await compactor.write_ahead(preparation, work.summaries)
    except asyncio.CancelledError:
        emit(CompactionEnded(reason="background", aborted=True, will_retry=False))
        raise
    except SessiondError as exc:
        message = f"{BackgroundFailed}: {exc.message or 'compaction failed'}"
        emit(
            CompactionEnded(
                reason="background", aborted=False, will_retry=False, error_message=message
            )
        )
        raise
    emit(
        CompactionEnded(
            reason="background",
            aborted=False,
            will_retry=False,
            result=msgspec.structs.replace(ready.result),
        )
    )
    return ready


def _consume(task: asyncio.Task[PreparedSummary]) -> None:
    with suppress(BaseException):
        task.result()


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
