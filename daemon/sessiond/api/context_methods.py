"""``context/*``: the context at a leaf, and how full it is."""

from __future__ import annotations

import msgspec

from sessiond.core.context import UNSET
from sessiond.core.tool_pairs import orphaned_tool_messages
from sessiond.jsonrpc import RequestContext
from sessiond.service.actor import SessionActor
from sessiond.service.usage import context_usage
from sessiond.store.export import llm_messages, messages_json
from sessiond.wire.usage import Usage

from .daemon import Daemon
from .methods import MethodTable
from .types import BuildContextParams, BuildContextResult, ContextUsageParams

METHODS = MethodTable()


@METHODS.request("context/build", BuildContextParams)
def build_context(
    daemon: Daemon, ctx: RequestContext, params: BuildContextParams
) -> BuildContextResult:
    return daemon.on_session(
        params.session_id, lambda actor: _built_context(daemon, ctx, actor, params)
    )


@METHODS.request("context/usage", ContextUsageParams)
def usage_of_context(daemon: Daemon, ctx: RequestContext, params: ContextUsageParams) -> Usage:
    return daemon.on_session(
        params.session_id,
        lambda actor: context_usage(actor, daemon.settings(ctx, actor), params.context_window),
    )


def _built_context(
    daemon: Daemon, ctx: RequestContext, actor: SessionActor, params: BuildContextParams
) -> BuildContextResult:
    store = actor.store
    if params.leaf_id is not None:
        store.record(params.leaf_id)  # an unknown id is an error, not pi's silent fallback
    context = store.build_context(params.leaf_id if params.leaf_id is not None else UNSET)
    at_leaf = params.leaf_id is None or params.leaf_id == store.leaf_id
    converted = llm_messages(context, store.dialect)
    return BuildContextResult(
        messages=msgspec.Raw(messages_json(store, context, params.format)),
        thinking_level=context.thinking_level,
        model=context.model,
        # the entry of each message, in the form asked for
        entry_ids=context.entry_ids
        if params.format == "agent"
        else [exported.entry_id for exported in converted],
        usage=context_usage(actor, daemon.settings(ctx, actor), params.context_window)
        if at_leaf
        else None,
        warnings=orphaned_tool_messages(
            [exported.message for exported in converted],
            [exported.entry_id for exported in converted],
        ),
    )
