"""``compaction/*`` and ``agent/turnEnded``: compaction on request, pi's end-of-turn checks,
taking a compaction back, and what a summary stands for."""

from __future__ import annotations

import time
from typing import Literal

import msgspec

from sessiond.core.preparation import CompactionPreparation, NotCompactable
from sessiond.jsonrpc import RequestContext
from sessiond.service.actor import SessionActor
from sessiond.service.background import BackgroundEvent, BackgroundWork
from sessiond.service.compaction_history import covered_entries, undo_compaction
from sessiond.service.compaction_requests import (
    CompactionRequest,
    check_turn,
    compact_on_request,
)
from sessiond.service.compactor import prepare, raise_not_compactable
from sessiond.service.runs import CompactionEvent
from sessiond.service.usage import context_usage
from sessiond.settings import Settings
from sessiond.wire.compaction import CompactionEnded, CompactionStarted

from .background_progress import BackgroundProgress
from .daemon import Daemon
from .hooks import preparation_wire
from .methods import MethodTable
from .notification_types import CompactionEndedNotification, CompactionStartedNotification
from .notifications import announce_change
from .summarizing import end_progress, request_progress, request_summaries
from .types import (
    AbortResult,
    AutoCompactionReport,
    CompactionPreparationWire,
    CompactionSummaryInfo,
    CoveredParams,
    CoveredResult,
    PrepareCompactionParams,
    RunCompactionParams,
    RunCompactionResult,
    SessionRef,
    TurnEndedParams,
    TurnEndedResult,
    UndoCompactionParams,
    UndoCompactionResult,
)

METHODS = MethodTable()


def publish_event(
    actor: SessionActor, event: CompactionEvent, *, progress_token: str | None = None
) -> None:
    # Each notification is its event with the session named: copied whole, so a field
    # added to the event cannot be left behind.
    if isinstance(event, CompactionStarted):
        actor.publish(
            "compaction/started",
            CompactionStartedNotification(
                session_id=actor.session_id,
                progress_token=progress_token,
                **msgspec.structs.asdict(event),
            ),
        )
        return
    actor.publish("compaction/ended", ended_notification(actor, event))


def ended_notification(actor: SessionActor, event: CompactionEnded) -> CompactionEndedNotification:
    return CompactionEndedNotification(session_id=actor.session_id, **msgspec.structs.asdict(event))


def compaction_request(
    daemon: Daemon,
    ctx: RequestContext,
    actor: SessionActor,
    settings: Settings,
    mode: Literal["manual", "auto"],
) -> CompactionRequest:
    """The compaction use case's view of this request: its summarizer (with ``$/progress``
    on the request's token), the hooks of the session's clients, where its events go,
    and how a summary it starts in the background is shown."""

    def background_work() -> BackgroundWork:
        # Shown to the clients that have the session open now and take progress they
        # did not request; the request that started it is answered long before it ends.
        progress = BackgroundProgress(daemon.clients.taking_progress(actor.subscribers))

        def emit(event: BackgroundEvent) -> None:
            publish_event(actor, event, progress_token=progress.token)
            progress.follow(event)

        return BackgroundWork(
            request_summaries(daemon, ctx, actor, settings, "auto", progress.report), emit
        )

    return CompactionRequest(
        session=actor,
        settings=settings,
        hooks=daemon.hooks(actor, settings),
        summaries=lambda: request_summaries(
            daemon,
            ctx,
            actor,
            settings,
            mode,
            request_progress(daemon, ctx, "Compacting the session"),
        ),
        emit=lambda event: publish_event(actor, event),
        end_progress=lambda: end_progress(daemon, ctx, "Compaction finished"),
        background_work=background_work,
    )


@METHODS.request("compaction/prepare", PrepareCompactionParams)
def prepare_compaction(
    daemon: Daemon, ctx: RequestContext, params: PrepareCompactionParams
) -> CompactionPreparationWire:
    def work(actor: SessionActor) -> CompactionPreparationWire:
        settings = daemon.settings(ctx, actor, params.settings)
        preparation = prepare(actor.store, settings.compaction, actor.estimator(settings))
        if isinstance(preparation, NotCompactable):
            raise_not_compactable(preparation)
        assert isinstance(preparation, CompactionPreparation)
        return preparation_wire(preparation, actor.store, include_messages=params.include_messages)

    return daemon.on_session(params.session_id, work)


@METHODS.request("compaction/run", RunCompactionParams)
async def run_compaction(
    daemon: Daemon, ctx: RequestContext, params: RunCompactionParams
) -> RunCompactionResult:
    actor = await daemon.ready(params.session_id)
    settings = daemon.settings(ctx, actor, params.settings)
    request = compaction_request(daemon, ctx, actor, settings, "manual")
    try:
        outcome = await compact_on_request(
            request,
            custom_instructions=params.custom_instructions,
            supplied_summary=params.summary,
            expected_first_kept_id=params.first_kept_entry_id,
        )
    finally:
        end_progress(daemon, ctx, "Compaction finished")
    announce_change(actor, "compaction")
    return RunCompactionResult(
        entry=msgspec.Raw(actor.store.raw_line(actor.store.record(outcome.entry.id))),
        tokens_before=outcome.result.tokens_before,
        tokens_after=outcome.tokens_after,
        from_extension=outcome.from_extension,
    )


@METHODS.request("compaction/abort", SessionRef)
async def abort_compaction(daemon: Daemon, ctx: RequestContext, params: SessionRef) -> AbortResult:
    return AbortResult(aborted=await daemon.actor(params.session_id).abort("compaction"))


@METHODS.request("compaction/undo", UndoCompactionParams)
def undo_last_compaction(
    daemon: Daemon, ctx: RequestContext, params: UndoCompactionParams
) -> UndoCompactionResult:
    def work(actor: SessionActor) -> UndoCompactionResult:
        undone = undo_compaction(actor.store, params.entry_id)
        appended = [undone.marker_id, *undone.copied_ids]
        actor.appended([actor.store.entry_of(actor.store.record(i)) for i in appended])
        announce_change(actor, "undo", appended)
        leaf = actor.store.leaf_id
        assert leaf is not None
        return UndoCompactionResult(
            undone_entry_id=undone.compaction_id,
            marker_id=undone.marker_id,
            copied_ids=undone.copied_ids,
            copied_from=undone.copied_from,
            skipped_ids=undone.skipped_ids,
            leaf_id=leaf,
            usage=context_usage(actor, daemon.settings(ctx, actor), None),
        )

    return daemon.on_session(params.session_id, work)


@METHODS.request("compaction/covered", CoveredParams)
def covered_by_compaction(
    daemon: Daemon, ctx: RequestContext, params: CoveredParams
) -> CoveredResult:
    def work(actor: SessionActor) -> CoveredResult:
        found = covered_entries(actor.store, params.entry_id, params.offset, params.limit)
        end = params.offset + len(found.ids)
        return CoveredResult(
            entry_id=found.compaction_id,
            first_kept_entry_id=found.first_kept_entry_id,
            previous_compaction_id=found.previous_compaction_id,
            entry_ids=found.ids,
            total=found.total,
            next_offset=end if end < found.total else None,
        )

    return daemon.on_session(params.session_id, work)


@METHODS.request("agent/turnEnded", TurnEndedParams)
async def turn_ended(
    daemon: Daemon, ctx: RequestContext, params: TurnEndedParams
) -> TurnEndedResult:
    actor = await daemon.ready(params.session_id)
    settings = daemon.settings(ctx, actor)
    window = params.context_window or settings.context.default_context_window
    model = params.model if params.model is not None else actor.store.leaf_view.model
    request = compaction_request(daemon, ctx, actor, settings, "auto")
    check = await check_turn(
        request, context_window=window, model=model, now_ms=int(time.time() * 1000)
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
            prepared=check.ended is not None and check.ended.prepared,
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
