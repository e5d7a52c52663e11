"""``compaction/*`` and ``agent/turnEnded``: compaction on request and pi's end-of-turn checks."""

from __future__ import annotations

import time
from typing import Any

import msgspec

from sessiond.core.preparation import CompactionPreparation, NotCompactable
from sessiond.jsonrpc import RequestContext
from sessiond.service.actor import SessionActor
from sessiond.service.compactor import Compactor, prepare, raise_not_compactable
from sessiond.service.events import CompactionEnded, CompactionStarted
from sessiond.service.runs import CompactionEvent, run_compaction
from sessiond.service.turns import end_of_turn
from sessiond.service.usage import context_usage

from .daemon import Daemon
from .hooks import preparation_wire
from .notification_types import CompactionEndedNotification, CompactionStartedNotification
from .notifications import announce_change
from .summarizing import end_progress, request_summaries
from .types import (
    AbortResult,
    AutoCompactionReport,
    CompactionPreparationWire,
    CompactionSummaryInfo,
    PrepareCompactionParams,
    RunCompactionParams,
    RunCompactionResult,
    SessionRef,
    TurnEndedParams,
    TurnEndedResult,
)


def publish_event(actor: SessionActor, event: CompactionEvent) -> None:
    if isinstance(event, CompactionStarted):
        actor.publish(
            "compaction/started",
            CompactionStartedNotification(
                session_id=actor.session_id, reason=event.reason, will_retry=event.will_retry
            ),
        )
        return
    actor.publish("compaction/ended", ended_notification(actor, event))


def ended_notification(actor: SessionActor, event: CompactionEnded) -> CompactionEndedNotification:
    return CompactionEndedNotification(
        session_id=actor.session_id,
        reason=event.reason,
        aborted=event.aborted,
        will_retry=event.will_retry,
        result=event.result,
        error_message=event.error_message,
        skipped=event.skipped,
        entry_id=event.entry_id,
        tokens_before=event.tokens_before,
        tokens_after=event.tokens_after,
    )


def register(daemon: Daemon) -> None:
    router = daemon.router

    @router.request("compaction/prepare", PrepareCompactionParams)
    def prepare_(ctx: RequestContext, params: PrepareCompactionParams) -> CompactionPreparationWire:
        return daemon.on_session(params.session_id, lambda actor: _prepare(ctx, actor, params))

    def _prepare(
        ctx: RequestContext, actor: SessionActor, params: PrepareCompactionParams
    ) -> CompactionPreparationWire:
        settings = daemon.settings(ctx, actor, params.settings)
        preparation = prepare(actor.store, settings.compaction, actor.estimator(settings))
        if isinstance(preparation, NotCompactable):
            raise_not_compactable(preparation)
        assert isinstance(preparation, CompactionPreparation)
        return preparation_wire(preparation, actor.store, include_messages=params.include_messages)

    @router.request("compaction/run", RunCompactionParams)
    async def run(ctx: RequestContext, params: RunCompactionParams) -> RunCompactionResult:
        actor = await daemon.ready(params.session_id)
        settings = daemon.settings(ctx, actor, params.settings)
        summaries = request_summaries(
            daemon, ctx, actor, settings, "manual", "Compacting the session"
        )
        compactor = Compactor(
            actor.store,
            settings.compaction,
            actor.estimator(settings),
            daemon.hooks(actor, settings),
        )

        async def work() -> RunCompactionResult:
            outcome, _ = await run_compaction(
                compactor,
                summaries,
                reason="manual",
                will_retry=False,
                emit=lambda event: publish_event(actor, event),
                custom_instructions=params.custom_instructions,
                supplied_summary=params.summary,
                expected_first_kept_id=params.first_kept_entry_id,
            )
            assert outcome is not None
            return RunCompactionResult(
                entry=msgspec.Raw(actor.store.raw_line(actor.store.record(outcome.entry.id))),
                tokens_before=outcome.result.tokens_before,
                tokens_after=outcome.tokens_after,
                from_extension=outcome.from_extension,
            )

        try:
            result = await actor.run_long("compaction", work, preempt=True)
        finally:
            end_progress(daemon, ctx, "Compaction finished")
        announce_change(actor, "compaction")
        return result

    @router.request("compaction/abort", SessionRef)
    async def abort(ctx: RequestContext, params: SessionRef) -> AbortResult:
        actor = daemon.actor(params.session_id)
        return AbortResult(aborted=await actor.abort("compaction"))

    @router.request("agent/turnEnded", TurnEndedParams)
    async def turn_ended(ctx: RequestContext, params: TurnEndedParams) -> TurnEndedResult:
        actor = await daemon.ready(params.session_id)
        settings = daemon.settings(ctx, actor)
        estimator = actor.estimator(settings)
        window = params.context_window or settings.context.default_context_window
        model = params.model if params.model is not None else actor.store.leaf_view.model

        async def compact(reason: Any, will_retry: bool) -> Any:
            summaries = request_summaries(
                daemon, ctx, actor, settings, "auto", "Compacting the session"
            )
            compactor = Compactor(
                actor.store, settings.compaction, estimator, daemon.hooks(actor, settings)
            )

            async def work() -> Any:
                return await run_compaction(
                    compactor,
                    summaries,
                    reason=reason,
                    will_retry=will_retry,
                    emit=lambda event: publish_event(actor, event),
                )

            try:
                return await actor.run_long("compaction", work)
            finally:
                end_progress(daemon, ctx, "Compaction finished")

        check = await end_of_turn(
            actor.store,
            settings,
            estimator,
            context_window=window,
            model=model,
            guard=actor.guard,
            compact=compact,
            emit_ended=lambda event: publish_event(actor, event),
            now_ms=int(time.time() * 1000),
            exclusive=actor.exclusive,
        )
        if check.pruned is not None and not check.pruned.empty:
            # pi's files: appended edits; oh-my-pi's: the file rewritten in place
            pruned = check.pruned
            announce_change(actor, "append" if pruned.edit_ids else "rewrite", pruned.edit_ids)
        if check.outcome is not None:
            announce_change(actor, "compaction")
        outcome = check.outcome
        return TurnEndedResult(
            action=check.action,
            prompt=check.prompt,
            compaction=CompactionSummaryInfo(
                entry_id=outcome.entry.id,
                reason=check.ended.reason if check.ended is not None else "threshold",
                tokens_before=outcome.result.tokens_before,
                tokens_after=outcome.tokens_after,
            )
            if outcome is not None
            else None,
            auto_compaction=AutoCompactionReport(
                reason=check.auto.reason, outcome=check.auto.outcome, message=check.auto.message
            )
            if check.auto is not None
            else None,
            error_message=check.error_message,
            pruned_entries=len(check.pruned.candidates) if check.pruned is not None else 0,
            tokens_saved=check.pruned.tokens_saved if check.pruned is not None else 0,
            usage=context_usage(actor, settings, window),
        )
