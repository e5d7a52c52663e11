"""pi's end-of-turn checks (SPEC 10.1-10.2): overflow recovery, pruning, threshold.

The agent calls this after each turn with the assistant message appended.
An overflow answer is compacted (reason ``overflow``) and the client is told
to retry; a context over the threshold is pruned and compacted (``threshold``)
and the client is told to continue, with the auto-continue prompt. A second
overflow right after an overflow compaction fails with pi's one-shot message
instead of looping.
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
from sessiond.core.tokens import Estimator, calculate_context_tokens, should_compact
from sessiond.settings import Settings
from sessiond.store.session import SessionStore

from .compactor import CompactionOutcome
from .events import CompactionEnded, CompactionReason
from .pruning import prune_tool_outputs

OVERFLOW_ONE_SHOT_MESSAGE = (
    "Context overflow recovery failed after one compact-and-retry attempt. "
    "Try reducing context or switching to a larger-context model."
)

TurnAction = Literal["none", "retry", "continue"]
CompactFn = Callable[
    [CompactionReason, bool], Awaitable[tuple[CompactionOutcome | None, CompactionEnded]]
]


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
) -> TurnCheck:
    config = settings.compaction
    last = _last_assistant(store)
    if last is None or last.stop_reason == "aborted":
        return TurnCheck()
    compaction_ms = _latest_compaction_ms(store)
    stale = compaction_ms is not None and (last.timestamp or 0) <= compaction_ms
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
            return TurnCheck(ended=ended, error_message=OVERFLOW_ONE_SHOT_MESSAGE)
        if not enabled:
            return TurnCheck()
        guard.attempted = True
        outcome, ended = await compact("overflow", True)
        return TurnCheck(
            action="retry" if outcome is not None else "none",
            outcome=outcome,
            ended=ended,
            error_message=ended.error_message,
        )

    if not enabled or stale:
        return TurnCheck()
    if last.stop_reason == "error":
        # No usage on an error: measure the context from the last good answer (pi).
        estimate = store.leaf_view.estimate_context(estimator)
        usage_record = store.leaf_view.last_usage_record
        if usage_record is None:
            return TurnCheck()
        usage_entry = store.entry_of(usage_record)
        usage_ms = usage_entry.message.timestamp if isinstance(usage_entry, MessageEntry) else None
        if compaction_ms is not None and (usage_ms or 0) <= compaction_ms:
            return TurnCheck()
        tokens = estimate.tokens
    else:
        tokens = calculate_context_tokens(last.usage)

    pruned: PrunePlan | None = None
    if config.prune_tool_outputs and last.stop_reason != "error":
        pruned = prune_tool_outputs(store, estimator, now_ms)
        tokens = max(0, tokens - pruned.tokens_saved)
    if not should_compact(tokens, context_window, config):
        return TurnCheck(pruned=pruned, context_tokens=tokens)
    outcome, ended = await compact("threshold", False)
    if outcome is not None and config.auto_continue:
        return TurnCheck(
            action="continue",
            prompt=auto_continue_prompt(),
            outcome=outcome,
            ended=ended,
            pruned=pruned,
            context_tokens=tokens,
        )
    return TurnCheck(
        outcome=outcome,
        ended=ended,
        pruned=pruned,
        error_message=ended.error_message,
        context_tokens=tokens,
    )


def _last_assistant(store: SessionStore) -> AssistantMessage | None:
    """The answer that ended the turn: the newest assistant message on the path,
    unless a user message came after it (then no turn has ended yet)."""
    for record in reversed(store.path_records()):
        if record.type != "message":
            continue
        if record.role == "user":
            return None
        if record.role == "assistant":
            entry = store.entry_of(record)
            if isinstance(entry, MessageEntry) and isinstance(entry.message, AssistantMessage):
                return entry.message
            return None
    return None


def _latest_compaction_ms(store: SessionStore) -> int | None:
    for record in reversed(store.path_records()):
        if record.type == "compaction":
            entry = store.entry_of(record)
            if isinstance(entry, CompactionEntry):
                return iso_to_ms(entry.timestamp)
    return None
