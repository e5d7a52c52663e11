"""Compaction as a client asks for it: ``compaction/run`` and ``agent/turnEnded`` on a session.

One place decides, for both, which summary is committed (one written in the
background, or a new one), what the run reports, and what the no-loop rule must
remember; the protocol handlers only translate parameters and results.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import msgspec

from sessiond.core.context import ModelRef
from sessiond.core.preparation import NotCompactable
from sessiond.core.tokens import Estimator, resolve_threshold_tokens
from sessiond.settings import Settings
from sessiond.store.session import SessionStore
from sessiond.tiktoken_offline import estimator as estimator_named
from sessiond.wire.compaction import CompactionEnded, CompactionReason

from .actor import LongKind
from .background import BackgroundSummaries, BackgroundWork, background_keep
from .compactor import CompactionOutcome, Compactor, PreparedSummary
from .hooks import Hooks
from .loop_rule import CompactionsLeft
from .runs import CompactionEvent, run_compaction
from .summarize import SummaryContext
from .turns import OverflowGuard, TurnCheck, end_of_turn

T = TypeVar("T")


class CompactingSession(Protocol):
    """What a compaction needs of the session it runs on: the daemon's ``SessionActor``,
    or ``OfflineSession`` for a process that holds the file alone (the CLI)."""

    store: SessionStore
    guard: OverflowGuard
    background: BackgroundSummaries
    compactions_left: CompactionsLeft
    changes: int

    def estimator(self, settings: Settings | None = None) -> Estimator: ...

    async def run_long(
        self, kind: LongKind, work: Callable[[], Awaitable[T]], *, preempt: bool = False
    ) -> T: ...

    async def exclusive(self, work: Callable[[], Awaitable[T]]) -> T: ...


@dataclass
class OfflineSession:
    """A session this process holds alone: nothing runs beside a compaction."""

    store: SessionStore
    guard: OverflowGuard = field(default_factory=OverflowGuard)
    background: BackgroundSummaries = field(default_factory=BackgroundSummaries)
    compactions_left: CompactionsLeft = field(default_factory=CompactionsLeft)
    changes: int = 0

    def estimator(self, settings: Settings | None = None) -> Estimator:
        name = settings.compaction.token_estimator if settings is not None else "tiktoken"
        return estimator_named(name)

    async def run_long(
        self, kind: LongKind, work: Callable[[], Awaitable[T]], *, preempt: bool = False
    ) -> T:
        return await work()

    async def exclusive(self, work: Callable[[], Awaitable[T]]) -> T:
        return await work()


@dataclass
class CompactionRequest:
    """What a compaction needs from the daemon for one request on one session."""

    session: CompactingSession
    settings: Settings
    hooks: Hooks
    # A summarizer for this request, reporting its progress to the client that asked.
    summaries: Callable[[], SummaryContext]
    emit: Callable[[CompactionEvent], None]
    # Ends the progress a summarizer with progress began.
    end_progress: Callable[[], None]
    # How a background summary this request starts is written and shown (it outlives
    # the request); None where no turn is checked, so none starts (the CLI).
    background_work: Callable[[], BackgroundWork] | None = None

    @property
    def estimator(self) -> Estimator:
        return self.session.estimator(self.settings)

    def compactor(self, settings: Settings | None = None) -> Compactor:
        config = (settings or self.settings).compaction
        return Compactor(self.session.store, config, self.estimator, self.hooks)

    async def ready_summary(self, limit: int | None) -> PreparedSummary | None:
        session = self.session
        return await session.background.take(
            session.store, self.estimator, changes=session.changes, limit=limit
        )

    def remember(self, outcome: CompactionOutcome | None) -> None:
        if outcome is not None:
            self.session.compactions_left.record(
                outcome.entry.id, outcome.tokens_after, self.settings.compaction.keep_recent_tokens
            )


async def compact_on_request(
    request: CompactionRequest,
    *,
    custom_instructions: str | None,
    supplied_summary: str | None,
    expected_first_kept_id: str | None,
) -> CompactionOutcome:
    """``compaction/run``: commits the background summary when there is one and the
    client asked for nothing it does not say (instructions, its own summary, a cut);
    otherwise drops it and writes a new one."""
    session = request.session
    plain = custom_instructions is None and supplied_summary is None
    plain = plain and expected_first_kept_id is None
    if not plain:
        session.background.abort()
    summaries = request.summaries()

    async def work() -> CompactionOutcome:
        outcome, _ = await run_compaction(
            request.compactor(),
            summaries,
            reason="manual",
            will_retry=False,
            emit=request.emit,
            custom_instructions=custom_instructions,
            supplied_summary=supplied_summary,
            expected_first_kept_id=expected_first_kept_id,
            ready=(lambda: request.ready_summary(None)) if plain else None,
        )
        assert outcome is not None
        return outcome

    outcome = await session.run_long("compaction", work, preempt=True)
    request.remember(outcome)
    return outcome


async def check_turn(
    request: CompactionRequest,
    *,
    context_window: int,
    model: ModelRef | None,
    now_ms: int,
) -> TurnCheck:
    """``agent/turnEnded``: pi's end-of-turn checks, with the background summary and the
    no-loop rule."""
    session = request.session
    settings = request.settings

    async def compact(
        reason: CompactionReason, will_retry: bool
    ) -> tuple[CompactionOutcome | None, CompactionEnded]:
        summaries = request.summaries()
        threshold = resolve_threshold_tokens(context_window, settings.compaction)

        async def work() -> tuple[CompactionOutcome | None, CompactionEnded]:
            return await run_compaction(
                request.compactor(),
                summaries,
                reason=reason,
                will_retry=will_retry,
                emit=request.emit,
                ready=lambda: request.ready_summary(threshold),
            )

        try:
            outcome, ended = await session.run_long("compaction", work)
        finally:
            request.end_progress()
        request.remember(outcome)
        return outcome, ended

    def start_background(tokens: int, threshold: int) -> None:
        _start_background(request, tokens, threshold)

    return await end_of_turn(
        session.store,
        settings,
        request.estimator,
        context_window=context_window,
        model=model,
        guard=session.guard,
        compact=compact,
        emit_ended=request.emit,
        now_ms=now_ms,
        exclusive=session.exclusive,
        left=session.compactions_left,
        start_background=start_background,
    )


def _start_background(request: CompactionRequest, tokens: int, threshold: int) -> None:
    """Prepare the compaction the threshold would make and have it summarized now."""
    session = request.session
    background = session.background
    if request.background_work is None:
        return
    if background.active and background.valid_now(session.store, session.changes):
        return
    config = request.settings.compaction
    keep = background_keep(config.keep_recent_tokens, tokens, threshold)
    settings = msgspec.structs.replace(
        request.settings, compaction=msgspec.structs.replace(config, keep_recent_tokens=keep)
    )
    compactor = request.compactor(settings)
    preparation = compactor.prepare()
    if isinstance(preparation, NotCompactable):
        return
    background.start(compactor, preparation, request.background_work(), changes=session.changes)
