"""Summarizers behind one interface (``Summarizer.complete``), and the chain that
tries the configured candidates with pi's retries.

Typical use, from compaction::

    chain = SummarizerChain.from_settings(settings, client=delegate_or_none)
    completion = await chain.complete(
        CompletionRequest(system_prompt=..., prompt=..., max_tokens=..., purpose="history"),
        progress=on_progress,
        mode="auto",
    )

httpx is imported only when a network summarizer actually sends a request.
"""

from __future__ import annotations

from sessiond.llm.base import (
    Attempt,
    Completion,
    CompletionRequest,
    Progress,
    ProgressCallback,
    Purpose,
    Summarizer,
    Usage,
)
from sessiond.llm.chain import Mode, RequestFitter, SleepFn, SummarizerChain, retry_delay_ms
from sessiond.llm.client import ClientComplete, ClientSummarizer
from sessiond.llm.errors import ErrorKind, ProviderError, classify
from sessiond.llm.extractive import ExtractiveSummarizer, extractive_summary

__all__ = [
    "Attempt",
    "ClientComplete",
    "ClientSummarizer",
    "Completion",
    "CompletionRequest",
    "ErrorKind",
    "ExtractiveSummarizer",
    "Mode",
    "Progress",
    "ProgressCallback",
    "ProviderError",
    "Purpose",
    "RequestFitter",
    "SleepFn",
    "Summarizer",
    "SummarizerChain",
    "Usage",
    "classify",
    "extractive_summary",
    "retry_delay_ms",
]
