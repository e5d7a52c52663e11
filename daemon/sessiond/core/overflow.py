"""Context-overflow detection (pi 0.73.1): did the provider refuse or cut the prompt?

An error whose message matches what providers say when the prompt is too long
(pi's patterns, plus oh-my-pi's), unless it reads as rate limiting; or a
"silent" overflow: the provider answered normally but reports a prompt larger
than the window, or stopped for length without writing anything at a full
window.
"""

from __future__ import annotations

import re
from functools import cache

from .messages import AnyMessage, AssistantMessage

_OVERFLOW_PATTERNS: tuple[str, ...] = (
    # pi
    r"prompt is too long",
    r"input is too long for requested model",
    r"exceeds the context window",
    r"input token count.*exceeds the maximum",
    r"maximum prompt length is \d+",
    r"reduce the length of the messages",
    r"maximum context length is \d+ tokens",
    r"exceeds the limit of \d+",
    r"exceeds the available context size",
    r"greater than the context length",
    r"context window exceeds limit",
    r"exceeded model token limit",
    r"too large for model with \d+ maximum context length",
    r"model_context_window_exceeded",
    r"prompt too long; exceeded (?:max )?context length",
    r"context[_ ]length[_ ]exceeded",
    r"too many tokens",
    r"token limit exceeded",
    # oh-my-pi
    r"requested tokens?.*exceed.*context (window|length|size)",
    r"context (window|length|size).*(exceeded|overflow|too small)",
    r"(prompt|input).*(too long|too large).*(context|n_ctx)",
    r"requested tokens?.*(exceeds?|greater than).*(n_ctx|context)",
    r"request_too_large",
    r"request exceeds the maximum size",
    r"payload too large",
    r"entity too large",
    r"\b413\b.*\b(request|payload|entity)\b.*\btoo large\b",
)


@cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """Compiled on first use (start-up time): overflow, bare-status, not-overflow."""
    overflow = re.compile("|".join(f"(?:{p})" for p in _OVERFLOW_PATTERNS), re.IGNORECASE)
    # Cerebras and Mistral answer an oversized prompt with a bare status line.
    no_body = re.compile(r"^4(00|13)\s*(status code)?\s*\(no body\)", re.IGNORECASE)
    # Rate limiting can mention sizes too; pi 0.73.1 never treats these as overflow.
    not_overflow = re.compile(
        r"^(?:Throttling error|Service unavailable):|rate limit|too many requests", re.IGNORECASE
    )
    return overflow, no_body, not_overflow


# A "length" stop with no output at 99 % of the window: the prompt filled it.
_FULL_WINDOW_SHARE = 0.99


def is_overflow_error_message(text: str) -> bool:
    """True when a provider's error text says the prompt did not fit."""
    overflow, no_body, not_overflow = _patterns()
    if not_overflow.search(text):
        return False
    return bool(overflow.search(text) or no_body.search(text))


def is_context_overflow(message: AnyMessage, context_window: int | None = None) -> bool:
    """pi's ``isContextOverflow(assistantMsg, contextWindow?)``."""
    if not isinstance(message, AssistantMessage):
        return False
    if (
        message.stop_reason == "error"
        and message.error_message
        and is_overflow_error_message(message.error_message)
    ):
        return True
    if not context_window:
        return False
    prompt_tokens = message.usage.input + message.usage.cache_read
    if message.stop_reason == "stop" and prompt_tokens > context_window:
        return True
    return (
        message.stop_reason == "length"
        and message.usage.output == 0
        and prompt_tokens >= context_window * _FULL_WINDOW_SHARE
    )
