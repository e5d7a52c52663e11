"""pi's end-of-turn checks (``checkCompaction``): overflow recovery, pruning, threshold.

The agent calls this after each turn with the assistant message appended.
An overflow answer is compacted (reason ``overflow``) and the client is told
to retry; a context over the threshold is pruned and compacted (``threshold``)
and the client is told to continue, with the auto-continue prompt. A second
overflow right after an overflow compaction fails with pi's one-shot message
instead of looping, and a compaction that left the context over the threshold
pauses threshold compactions (``loop_rule``). Between the soft mark and the
threshold, a compaction's summary is started in the background (``background``).
Whatever becomes of the compaction (written, failed, skipped, paused, cancelled by
a hook, aborted) is reported, never raised.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from sessiond.core.context import ModelRef, iso_to_ms
from sessiond.core.entries import CompactionEntry, Entry, MessageEntry
from sessiond.core.messages import AssistantMessage, UserMessage
from sessiond.core.overflow import is_context_overflow
from sessiond.core.pruning import PrunePlan
from sessiond.core.summary_prompts import auto_continue_prompt
from sessiond.core.tokens import (
    Estimator,
    calculate_context_tokens,
    resolve_threshold_tokens,
    should_compact,
)
from sessiond.errors import OperationCancelledError
from sessiond.settings import Settings
from sessiond.store.records import EntryRecord
from sessiond.store.session import SessionStore
from sessiond.wire.compaction import CompactionEnded, CompactionReason

from .compactor import COMPACTION_CANCELLED, CompactionOutcome
from .loop_rule import CompactionsLeft, Pause
from .pruning import prune_tool_outputs
from .workers import Exclusive

OVERFLOW_ONE_SHOT_MESSAGE = (
    "Context overflow recovery failed after one compact-and-retry attempt. "
    "Try reducing context or switching to a larger-context model."
)

TurnAction = Literal["none", "retry", "continue"]
# What became of the compaction the checks called for (see ``TurnCheck``).
AutoOutcome = Literal["compacted", "failed", "skipped", "cancelled", "aborted", "paused"]
AutoReason = Literal["threshold", "overflow"]
CompactFn = Callable[
    [CompactionReason, bool], Awaitable[tuple[CompactionOutcome | None, CompactionEnded]]
]
# Starts a background summary, given the context's size and the threshold.
StartBackgroundFn = Callable[[int, int], None]


@dataclass
class OverflowGuard:
    """pi's ``_overflowRecoveryAttempted``: one compact-and-retry per overflow."""

    attempted: bool = False

    def observe(self, entry: Entry) -> None:
        """A user message, or an assistant answer that is not an error, re-arms it."""
        if not isinstance(entry, MessageEntry):
            return
        message = entry.message
        if isinstance(message, UserMessage) or (
            isinstance(message, AssistantMessage) and message.stop_reason != "error"
        ):
            self.attempted = False


@dataclass
class TurnCheck:
    action: TurnAction = "none"
    prompt: str | None = None
    outcome: CompactionOutcome | None = None
    ended: CompactionEnded | None = None
    pruned: PrunePlan | None = None
    error_message: str | None = None
    context_tokens: int | None = None
    # Set when the checks called for a compaction.
    auto: AutoReport | None = None


@dataclass
class AutoReport:
    """What became of an automatic compaction. ``cancelled``: a hook (or the client's
    ``llm/complete``) cancelled it; ``aborted``: ``compaction/abort``, or a manual
    compaction that took over. Neither fails the turn: pi ends such a run quietly."""

    reason: AutoReason
    outcome: AutoOutcome
    message: str | None = None


@dataclass
class _AutoRun:
    outcome: CompactionOutcome | None
    ended: CompactionEnded
    report: AutoReport


async def _auto_compact(compact: CompactFn, reason: AutoReason, will_retry: bool) -> _AutoRun:
    try:
        outcome, ended = await compact(reason, will_retry)
    except OperationCancelledError as exc:
        # Aborted from outside; the run has reported its end event already.
        ended = CompactionEnded(reason=reason, aborted=True, will_retry=False)
        return _AutoRun(None, ended, AutoReport(reason, "aborted", exc.message))
    if outcome is not None:
        return _AutoRun(outcome, ended, AutoReport(reason, "compacted"))
    if ended.aborted:
        return _AutoRun(None, ended, AutoReport(reason, "cancelled", COMPACTION_CANCELLED))
    kind: AutoOutcome = "skipped" if ended.skipped else "failed"
    return _AutoRun(None, ended, AutoReport(reason, kind, ended.error_message))


async def end_of_turn(
    store: SessionStore,
    settings: Settings,
    estimator: Estimator,
    *,
    context_window: int,
    model: ModelRef | None,
    guard: OverflowGuard,
    compact: CompactFn,
    emit_ended: Callable[[CompactionEnded], None],
    now_ms: int,
    exclusive: Exclusive[None] | None = None,
    left: CompactionsLeft | None = None,
    start_background: StartBackgroundFn | None = None,
) -> TurnCheck:
    config = settings.compaction
    path = store.path_records()
    found = _last_assistant(store, path)
    if found is None or found[1].stop_reason == "aborted":
        return TurnCheck()
    last_index, last = found
    compaction = _latest_compaction(store, path)
    stale = _from_before(compaction, last_index, last.timestamp)
    same_model = model is None or (last.provider, last.model) == (model.provider, model.model_id)
    enabled = config.enabled and config.strategy != "off"

    if same_model and not stale and is_context_overflow(last, context_window):
        if guard.attempted:
            ended = CompactionEnded(
                reason="overflow",
                aborted=False,
                will_retry=False,
                error_message=OVERFLOW_ONE_SHOT_MESSAGE,
            )
            emit_ended(ended)
            return TurnCheck(
                ended=ended,
                error_message=OVERFLOW_ONE_SHOT_MESSAGE,
                auto=AutoReport("overflow", "failed", OVERFLOW_ONE_SHOT_MESSAGE),
            )
        if not enabled:
            return TurnCheck()
        guard.attempted = True
        run = await _auto_compact(compact, "overflow", True)
        return TurnCheck(
            action="retry" if run.outcome is not None else "none",
            outcome=run.outcome,
            ended=run.ended,
            error_message=run.ended.error_message,
            auto=run.report,
        )

    if not enabled or stale:
        return TurnCheck()
    if store.leaf_view.has_edits:
        # pi 1.6: with context edits in the context, its projected estimate.
        tokens = store.leaf_view.estimate_context(estimator).tokens
    elif last.stop_reason == "error" or calculate_context_tokens(last.usage) == 0:
        # No usage on an error (or an all-zero one): measure the context from the last
        # good answer (pi).
        estimate = store.leaf_view.estimate_context(estimator)
        usage_record = store.leaf_view.last_usage_record
        if usage_record is None:
            return TurnCheck()
        usage_entry = store.entry_of(usage_record)
        usage_ms = usage_entry.message.timestamp if isinstance(usage_entry, MessageEntry) else None
        if _from_before(compaction, _index_on(path, usage_record), usage_ms):
            return TurnCheck()
        tokens = estimate.tokens
    else:
        tokens = calculate_context_tokens(last.usage)

    pruned: PrunePlan | None = None
    if config.prune_tool_outputs and last.stop_reason != "error":
        pruned = await prune_tool_outputs(store, estimator, exclusive)
        if not pruned.empty:
            # The edits make the answer's measurement stale: the size is now pi 1.6's
            # estimate of the edited context.
            tokens = store.leaf_view.estimate_context(estimator).tokens
    threshold = resolve_threshold_tokens(context_window, config)
    pause = (
        left.pause(compaction.id if compaction else None, threshold, config.keep_recent_tokens)
        if left is not None
        else None
    )
    if not should_compact(tokens, context_window, config):
        if (
            start_background is not None
            and pause is None
            and config.background_at > 0
            and tokens > int(threshold * config.background_at)
        ):
            start_background(tokens, threshold)
        return TurnCheck(pruned=pruned, context_tokens=tokens)
    if pause is not None:
        ended = CompactionEnded(
            reason="threshold",
            aborted=False,
            will_retry=False,
            skipped=True,
            paused=True,
            error_message=pause.message,
        )
        if pause.first and compaction is not None and left is not None:
            left.announced(compaction.id)
            emit_ended(ended)
        return TurnCheck(
            ended=ended,
            pruned=pruned,
            context_tokens=tokens,
            auto=AutoReport("threshold", "paused", pause.message),
        )
    run = await _auto_compact(compact, "threshold", False)
    continuing = run.outcome is not None and config.auto_continue
    return TurnCheck(
        action="continue" if continuing else "none",
        prompt=auto_continue_prompt() if continuing else None,
        outcome=run.outcome,
        ended=run.ended,
        pruned=pruned,
        error_message=run.ended.error_message,
        context_tokens=tokens,
        auto=run.report,
    )


def _last_assistant(
    store: SessionStore, path: list[EntryRecord]
) -> tuple[int, AssistantMessage] | None:
    """The answer that ended the turn and its index on ``path``: the newest assistant
    message, unless a user message came after it (then no turn has ended yet)."""
    for index in range(len(path) - 1, -1, -1):
        record = path[index]
        if record.type != "message":
            continue
        if record.role == "user":
            return None
        if record.role == "assistant":
            entry = store.entry_of(record)
            if isinstance(entry, MessageEntry) and isinstance(entry.message, AssistantMessage):
                return index, entry.message
            return None
    return None


def _index_on(path: list[EntryRecord], record: EntryRecord) -> int:
    """Where ``record`` is on ``path`` (-1, before everything, if it is not)."""
    for index in range(len(path) - 1, -1, -1):
        if path[index].id == record.id:
            return index
    return -1


def current_pause(
    store: SessionStore, left: CompactionsLeft, threshold: int, keep_recent_tokens: int
) -> Pause | None:
    """The no-loop pause in force at the leaf now, if any. Costs nothing until a
    compaction was remembered, then a walk back to the context's newest compaction."""
    if left.empty:
        return None
    compaction = _latest_compaction(store, store.path_records())
    return left.pause(compaction.id if compaction else None, threshold, keep_recent_tokens)


@dataclass
class _LatestCompaction:
    index: int
    ms: int | None
    id: str


def _latest_compaction(store: SessionStore, path: list[EntryRecord]) -> _LatestCompaction | None:
    for index in range(len(path) - 1, -1, -1):
        record = path[index]
        if record.type == "compaction":
            entry = store.entry_of(record)
            if isinstance(entry, CompactionEntry):
                return _LatestCompaction(index, iso_to_ms(entry.timestamp), entry.id)
    return None


def _from_before(
    compaction: _LatestCompaction | None, index: int, message_ms: float | None
) -> bool:
    """Whether a message measured the context before the latest compaction (pi ignores
    those). One that precedes the compaction on the path did; one after it did not,
    unless its own timestamp says it was made earlier. Timestamps alone cannot tell:
    an answer appended in the same millisecond as the compaction ties with it."""
    if compaction is None:
        return False
    if index < compaction.index:
        return True
    return compaction.ms is not None and (message_ms or 0) < compaction.ms
