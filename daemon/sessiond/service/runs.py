"""A compaction run with its start and end events (pi's compaction_start/end).

Every run reports both events, manual ones included (pi's RPC does, 0.73.1 and 1.6).
Automatic runs never raise: what went wrong is in the end event's
``errorMessage`` with pi's prefixes. Manual runs raise after reporting.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from sessiond.errors import (
    AlreadyCompactedError,
    NothingToCompactError,
    OperationCancelledError,
    SessiondError,
)
from sessiond.wire.compaction import CompactionEnded, CompactionReason, CompactionStarted

from .compactor import CompactionOutcome, Compactor, PreparedSummary
from .summarize import SummaryContext

CompactionEvent = CompactionStarted | CompactionEnded
EventSink = Callable[[CompactionEvent], None]


def failure_message(reason: CompactionReason, message: str) -> str:
    if reason == "overflow":
        return f"Context overflow recovery failed: {message}"
    if reason == "threshold":
        return f"Auto-compaction failed: {message}"
    return f"Compaction failed: {message}"


async def run_compaction(
    compactor: Compactor,
    summaries: SummaryContext,
    *,
    reason: CompactionReason,
    will_retry: bool,
    emit: EventSink,
    custom_instructions: str | None = None,
    supplied_summary: str | None = None,
    expected_first_kept_id: str | None = None,
    ready: Callable[[], Awaitable[PreparedSummary | None]] | None = None,
) -> tuple[CompactionOutcome | None, CompactionEnded]:
    """``ready`` gives the summary written in the background, if one may be committed
    (waiting for it if it is still being written); without one a new one is written."""
    manual = reason == "manual"
    emit(CompactionStarted(reason=reason, will_retry=will_retry))
    try:
        prepared = await ready() if ready is not None else None
        outcome = await compactor.run(
            summaries,
            reason=reason,
            custom_instructions=custom_instructions,
            supplied_summary=supplied_summary,
            expected_first_kept_id=expected_first_kept_id,
            ready=prepared,
        )
    except asyncio.CancelledError:
        emit(CompactionEnded(reason=reason, aborted=True, will_retry=False))
        raise
    except (NothingToCompactError, AlreadyCompactedError) as exc:
        emit(CompactionEnded(reason=reason, aborted=False, will_retry=False, skipped=True))
        if manual:
            raise
        return None, CompactionEnded(
            reason=reason, aborted=False, will_retry=False, skipped=True, error_message=exc.message
        )
    except OperationCancelledError:
        ended = CompactionEnded(reason=reason, aborted=True, will_retry=False)
        emit(ended)
        if manual:
            raise
        return None, ended
    except SessiondError as exc:
        ended = CompactionEnded(
            reason=reason,
            aborted=False,
            will_retry=False,
            error_message=failure_message(reason, exc.message or "compaction failed"),
        )
        emit(ended)
        if manual:
            raise
        return None, ended
    ended = CompactionEnded(
        reason=reason,
        aborted=False,
        will_retry=will_retry,
        result=outcome.result,
        entry_id=outcome.entry.id,
        tokens_before=outcome.result.tokens_before,
        tokens_after=outcome.tokens_after,
        prepared=prepared is not None and not outcome.from_extension,
    )
    emit(ended)
    return outcome, ended
