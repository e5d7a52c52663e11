"""Building the summarizer a run uses, from the effective settings."""

from __future__ import annotations

import math
from typing import Literal

from sessiond.llm.base import Completion, CompletionRequest, ProgressCallback
from sessiond.llm.chain import SummarizerChain
from sessiond.llm.delegated import DelegatedComplete
from sessiond.settings import Settings

from .summarize import SummaryContext, TokenCounter

# Kinds whose model has a context window the request must fit.
_WINDOWED_KINDS = frozenset({"openai", "anthropic", "client"})


def token_counter(settings: Settings) -> TokenCounter:
    if settings.compaction.token_estimator == "chars":
        return lambda text: math.ceil(len(text) / 4)
    from sessiond.tiktoken_offline import count_tokens

    return count_tokens


def smallest_window(settings: Settings) -> int | None:
    """The smallest context window among the summarizer's model candidates."""
    windows = [
        candidate.context_window
        for candidate in settings.summarizer.candidates
        if candidate.kind in _WINDOWED_KINDS
    ]
    return min(windows) if windows else None


def summary_context(
    settings: Settings,
    *,
    mode: Literal["manual", "auto"],
    delegated: DelegatedComplete | None = None,
    progress: ProgressCallback | None = None,
) -> SummaryContext:
    """The summarizer chain of ``settings`` in ``mode``, ready for a summary run."""
    chain = SummarizerChain.from_settings(settings, delegated=delegated)

    async def complete(request: CompletionRequest, listener: ProgressCallback | None) -> Completion:
        return await chain.complete(request, listener, mode=mode)

    return SummaryContext(
        complete=complete,
        count_tokens=token_counter(settings),
        window=smallest_window(settings),
        progress=progress,
    )
