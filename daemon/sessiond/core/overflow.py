"""Context-overflow detection (SPEC 4.4): did the provider refuse or cut the prompt?

Two ways to tell. An error whose message matches what providers say when the
prompt is too long (pi's patterns and oh-my-pi's, together). Or a "silent"
overflow: the provider answered, but the prompt it reports is larger than the
model's window (oh-my-pi's broader form: any stop reason, cache writes counted).
"""

from __future__ import annotations

import re

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

_OVERFLOW_RE = re.compile("|".join(f"(?:{p})" for p in _OVERFLOW_PATTERNS), re.IGNORECASE)
# Cerebras and Mistral answer an oversized prompt with a bare status line.
_NO_BODY_RE = re.compile(r"^4(00|13)\s*(status code)?\s*\(no body\)", re.IGNORECASE)


def is_overflow_error_message(text: str) -> bool:
    """True when a provider's error text says the prompt did not fit."""
    return bool(_OVERFLOW_RE.search(text) or _NO_BODY_RE.search(text))


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
    if context_window:
        usage = message.usage
        prompt_tokens = usage.input + usage.cache_read + usage.cache_write
        if prompt_tokens > context_window:
            return True
    return False
