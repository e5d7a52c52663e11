"""How full a session's context is at its leaf, against a context window."""

from __future__ import annotations

from sessiond.core.tokens import resolve_threshold_tokens, should_compact
from sessiond.errors import InvalidParamsError
from sessiond.settings import Settings
from sessiond.wire.usage import Usage

from .actor import SessionActor
from .turns import current_pause


def context_usage(actor: SessionActor, settings: Settings, window: int | None) -> Usage:
    """pi 1.6's projected estimate: the last measured usage plus the estimates after it,
    unless a compaction or a context edit (pruning's included) came after that
    measurement. ``window`` None: the configured default."""
    if window is not None and window <= 0:
        raise InvalidParamsError("contextWindow must be a positive number of tokens")
    context_window = window or settings.context.default_context_window
    estimator = actor.estimator(settings)
    estimate = actor.store.leaf_view.estimate_context(estimator)
    tokens = estimate.tokens
    threshold = resolve_threshold_tokens(context_window, settings.compaction)
    keep = settings.compaction.keep_recent_tokens
    return Usage(
        tokens=tokens,
        context_window=context_window,
        threshold=threshold,
        should_compact=should_compact(tokens, context_window, settings.compaction),
        percent=round(100 * tokens / context_window, 2),
        usage_tokens=estimate.usage_tokens,
        trailing_tokens=estimate.trailing_tokens,
        estimator=estimator.name,
        auto_compaction_paused=current_pause(actor.store, actor.compactions_left, threshold, keep)
        is not None,
    )
