"""Summarizers behind one interface (``Summarizer.complete``), and the chain that
tries the configured candidates with pi's retries.

Typical use, from compaction::

    chain = SummarizerChain.from_settings(settings, delegated=delegate_or_none)
    completion = await chain.complete(
        CompletionRequest(system_prompt=..., prompt=..., max_tokens=..., purpose="history"),
        progress=on_progress,
        mode="auto",
    )

httpx is imported only when a network summarizer actually sends a request.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Where each public name lives. Imported on first use (PEP 562): the daemon
# answers its first request before any summarizer module is needed.
_EXPORTS = {
    "Attempt": "base",
    "Completion": "base",
    "CompletionRequest": "base",
    "Progress": "base",
    "ProgressCallback": "base",
    "Summarizer": "base",
    "ProviderUsage": "base",
    "Mode": "chain",
    "RequestFitter": "chain",
    "SleepFn": "chain",
    "SummarizerChain": "chain",
    "retry_delay_ms": "chain",
    "DelegatedComplete": "delegated",
    "DelegatedSummarizer": "delegated",
    "ErrorKind": "errors",
    "ProviderError": "errors",
    "classify": "errors",
    "ExtractiveSummarizer": "extractive",
    "extractive_summary": "extractive",
}

__all__ = [
    "Attempt",
    "Completion",
    "CompletionRequest",
    "DelegatedComplete",
    "DelegatedSummarizer",
    "ErrorKind",
    "ExtractiveSummarizer",
    "Mode",
    "Progress",
    "ProgressCallback",
    "ProviderError",
    "ProviderUsage",
    "RequestFitter",
    "SleepFn",
    "Summarizer",
    "SummarizerChain",
    "classify",
    "extractive_summary",
    "retry_delay_ms",
]

if TYPE_CHECKING:
    from sessiond.llm.base import (
        Attempt,
        Completion,
        CompletionRequest,
        Progress,
        ProgressCallback,
        ProviderUsage,
        Summarizer,
    )
    from sessiond.llm.chain import Mode, RequestFitter, SleepFn, SummarizerChain, retry_delay_ms
    from sessiond.llm.delegated import DelegatedComplete, DelegatedSummarizer
    from sessiond.llm.errors import ErrorKind, ProviderError, classify
    from sessiond.llm.extractive import ExtractiveSummarizer, extractive_summary


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'sessiond.llm' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"sessiond.llm.{module}"), name)
    globals()[name] = value
    return value
