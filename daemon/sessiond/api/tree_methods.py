"""``tree/*``: navigating the session tree, with a summary of the branch left behind."""

from __future__ import annotations

import asyncio

import msgspec

from sessiond.jsonrpc import RequestContext
from sessiond.service.navigator import NavigationResult, navigate_tree

from .daemon import Daemon
from .methods import MethodTable
from .notifications import announce_change
from .summarizing import end_progress, request_progress, request_summaries
from .types import AbortResult, NavigateParams, NavigateResult, SessionRef

METHODS = MethodTable()


@METHODS.request("tree/navigate", NavigateParams)
async def navigate_tree_to(
    daemon: Daemon, ctx: RequestContext, params: NavigateParams
) -> NavigateResult:
    actor = await daemon.ready(params.session_id)
    settings = daemon.settings(ctx, actor)
    abort = asyncio.Event()
    summaries = (
        request_summaries(
            daemon,
            ctx,
            actor,
            settings,
            "manual",
            request_progress(daemon, ctx, "Summarizing the branch"),
        )
        if params.summarize
        else None
    )

    async def work() -> NavigationResult:
        return await navigate_tree(
            actor.store,
            settings,
            actor.estimator(settings),
            target_id=params.target_id,
            summaries=summaries,
            summarize=params.summarize,
            custom_instructions=params.custom_instructions,
            replace_instructions=params.replace_instructions,
            label=params.label,
            context_window=params.context_window or settings.context.default_context_window,
            hooks=daemon.hooks(actor, settings),
            abort=abort,
        )

    store = actor.store
    count, leaf = store.entry_count, store.leaf_id
    try:
        result = await actor.run_long("navigation", work, abort_event=abort)
    finally:
        if summaries is not None:
            end_progress(daemon, ctx, "Branch summary finished")
    if not result.cancelled and (store.entry_count, store.leaf_id) != (count, leaf):
        # every entry the navigation wrote: the summary and a label
        written = [record.id for record in store.records()[count:]]
        actor.appended([store.entry_of(store.record(i)) for i in written])
        announce_change(actor, "navigate", written)
    return NavigateResult(
        cancelled=result.cancelled,
        aborted=result.aborted,
        leaf_id=result.leaf_id,
        editor_text=result.editor_text,
        summary_entry=msgspec.Raw(store.raw_line(store.record(result.summary_entry.id)))
        if result.summary_entry is not None
        else None,
    )


@METHODS.request("tree/abort", SessionRef)
async def abort_navigation(daemon: Daemon, ctx: RequestContext, params: SessionRef) -> AbortResult:
    return AbortResult(aborted=await daemon.actor(params.session_id).abort("navigation"))
