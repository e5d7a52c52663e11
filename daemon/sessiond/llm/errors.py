"""Summarizer failures: one exception type and pi's rules for telling them apart.

The chain decides what to do next (retry, next candidate, give up) from
``error_kind`` alone, so every summarizer classifies its failures here: by HTTP
status when there is one, else by the text, with the regular expressions pi and
oh-my-pi use for retries (see protocol/behaviour.md#summarizer-requests).

An error's text is the provider's own words, so pi's
``Summarization failed: <err>`` reads as users know it. It must never carry an
API key, nor any part of one: every summarizer passes its secrets to ``scrub`` (or
``sessiond.redaction.clip`` for a piece cut from a body) before raising, and the
chain scrubs again against every candidate's secrets and every secret the process
knows (``sessiond.redaction.KNOWN``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Literal, TypeAlias

import msgspec

from sessiond.core.overflow import is_overflow_error_message
from sessiond.errors import SummarizerError
from sessiond.llm.base import Attempt
from sessiond.redaction import REDACTED, clip, redact

ErrorKind: TypeAlias = Literal[
    "auth", "rateLimit", "transient", "usageLimit", "overflow", "badResponse", "other"
]

# oh-my-pi's #isTransientErrorMessage pattern: outages, overload, rate limits, network faults.
_TRANSIENT_RE = re.compile(
    r"overloaded|provider.?returned.?error|rate.?limit|too many requests|429|500|502|503|504"
    r"|service.?unavailable|server.?error|internal.?error|retry your request|network.?error"
    r"|connection.?error|connection.?refused|other side closed|fetch failed|upstream.?connect"
    r"|reset before headers|socket hang up|timed? out|timeout|terminated|retry delay"
    r"|stream stall|no error details in response",
    re.IGNORECASE,
)
_SOCKET_CLOSED_RE = re.compile(
    r"socket.{0,40}closed unexpectedly|unexpected.{0,20}socket close", re.I
)
_USAGE_LIMIT_RE = re.compile(
    r"usage.?limit|usage_limit_reached|usage_not_included|limit_reached|quota.?exceeded"
    r"|resource.?exhausted",
    re.IGNORECASE,
)
_AUTH_RE = re.compile(r"auth_unavailable|no auth available", re.IGNORECASE)
_RATE_LIMIT_RE = re.compile(r"rate.?limit|too many requests", re.IGNORECASE)


def is_transient_error_message(text: str) -> bool:
    lowered = text.lower()
    if "anthropic stream envelope error:" in lowered and "before message_start" in lowered:
        return True
    return bool(_SOCKET_CLOSED_RE.search(text) or _TRANSIENT_RE.search(text))


def is_usage_limit_error_message(text: str) -> bool:
    return bool(_USAGE_LIMIT_RE.search(text))


def is_auth_error_message(text: str) -> bool:
    return bool(_AUTH_RE.search(text))


def classify(text: str, status: int | None = None) -> ErrorKind:
    """The kind of a failure, from its HTTP status (if any) and its text.

    Overflow comes first: a prompt that did not fit must go back to be
    shrunk, never be retried as it is (pi sends overflows to compaction, not to retry).
    """
    if is_overflow_error_message(text):
        return "overflow"
    if status in (401, 403) or is_auth_error_message(text):
        return "auth"
    if is_usage_limit_error_message(text):
        return "usageLimit"
    if status == 429 or _RATE_LIMIT_RE.search(text):
        return "rateLimit"
    if (status is not None and (status >= 500 or status == 408)) or is_transient_error_message(
        text
    ):
        return "transient"
    return "other"


class ProviderError(SummarizerError):
    """A summarizer failed. ``message`` is the provider's text, keys scrubbed.

    ``error_kind`` is the classification the chain acts on. (``kind`` is taken:
    it is the protocol's ``data.kind`` of every ``SessiondError``.)
    """

    def __init__(
        self,
        message: str,
        *,
        error_kind: ErrorKind | None = None,
        status: int | None = None,
        retry_after_ms: int | None = None,
        model: str | None = None,
    ) -> None:
        kind = error_kind if error_kind is not None else classify(message, status)
        details: dict[str, Any] = {"errorKind": kind}
        if status is not None:
            details["status"] = status
        if retry_after_ms is not None:
            details["retryAfterMs"] = retry_after_ms
        if model is not None:
            details["model"] = model
        super().__init__(message, **details)
        self.error_kind: ErrorKind = kind
        self.status = status
        self.retry_after_ms = retry_after_ms
        self.model = model
        # Filled in by the chain on the error it finally raises.
        self.attempts: list[Attempt] = []

    def with_message(self, message: str) -> ProviderError:
        """The same failure, told with other words (scrubbing, pi's fixed strings)."""
        copy = ProviderError(
            message,
            error_kind=self.error_kind,
            status=self.status,
            retry_after_ms=self.retry_after_ms,
            model=self.model,
        )
        copy.attempts = self.attempts
        return copy


# Tokens that look like credentials even when we do not know them (a key echoed
# by a proxy, a bearer header quoted in an error page).
# Both need a digit so that prose ("Bearer authentication required") survives, within
# the first 200 characters: unbounded, the look for it rescanned the rest of a run from
# every "sk-" in it ("sk-sk-sk-..." of 120 KB took 110 s). No real key goes 200
# characters without a digit.
_KEY_SHAPES = re.compile(
    r"(?i)\bbearer\s+(?=[A-Za-z._~+/=-]{0,200}\d)[A-Za-z0-9._~+/=-]{8,}"
    r"|\bsk-(?=[A-Za-z_-]{0,200}\d)[A-Za-z0-9_-]{12,}"
)


def scrub_secrets(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` without ``secrets`` or the process's known secrets, whole or any run of 8
    or more of their characters (a summary keeps key-shaped text it is about)."""
    return redact(text, secrets)


def scrub(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` without any secret (as ``scrub_secrets``) and without anything shaped like
    a key."""
    return _KEY_SHAPES.sub(REDACTED, redact(text, secrets))


def scrub_error(error: ProviderError, secrets: Iterable[str | None]) -> ProviderError:
    cleaned = scrub(error.message, secrets)
    return error if cleaned == error.message else error.with_message(cleaned)


def snippet(text: str, limit: int, secrets: Iterable[str | None]) -> str:
    """At most ``limit`` characters of ``text`` to quote in an error, scrubbed of secrets
    before and where it is cut (``sessiond.redaction.clip``) and of key shapes."""
    return _KEY_SHAPES.sub(REDACTED, clip(text, limit, secrets))


_MAX_ERROR_TEXT = 2000


def error_text_from_body(body: bytes, secrets: Iterable[str | None] = ()) -> str:
    """The human part of an error body: ``error.message`` and friends, else the raw text,
    scrubbed of ``secrets`` (before it is cut to a readable length).

    Handles OpenAI's ``{"error": {"message", "type", "code"}}``, Anthropic's
    ``{"type": "error", "error": {"type", "message"}}``, and the ``{"error": "..."}``,
    ``{"message": ...}`` and ``{"detail": ...}`` shapes of local servers.
    """
    text = body.decode("utf-8", errors="replace").strip()
    if not text:
        return ""
    try:
        data = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return _clip(text, secrets)
    found = _message_in(data)
    return _clip(found if found else text, secrets)


def _message_in(data: Any) -> str | None:
    if isinstance(data, list) and data:
        return _message_in(data[0])  # some gateways wrap the error in a list
    if not isinstance(data, dict):
        return None
    error = data.get("error")
    if isinstance(error, str) and error:
        return error
    if isinstance(error, dict):
        message = error.get("message")
        # Google puts the useful word in "status" and a number in "code".
        label = next(
            (v for k in ("type", "status", "code") if isinstance(v := error.get(k), str) and v),
            None,
        )
        if isinstance(message, str) and message:
            if label and label not in message:
                return f"{label}: {message}"
            return message
        if label:
            return label
    for key in ("message", "detail", "error_message"):
        value = data.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _clip(text: str, secrets: Iterable[str | None]) -> str:
    if len(text) <= _MAX_ERROR_TEXT:
        return scrub(text, secrets)
    shown = snippet(text, _MAX_ERROR_TEXT, secrets)
    return f"{shown}... [{len(text) - _MAX_ERROR_TEXT} more characters]"


def http_error_message(status: int, body: bytes, secrets: Iterable[str | None] = ()) -> str:
    """``"<status> <provider text>"``, the shape pi's SDK errors have.

    An empty body reads ``"<status> status code (no body)"``, which is what the
    overflow rules expect from Cerebras and Mistral (``core.overflow``).
    """
    text = error_text_from_body(body, secrets)
    return f"{status} {text}" if text else f"{status} status code (no body)"


def credentials_error(label: str | None) -> str:
    """oh-my-pi's text for a compaction without credentials, pointed at sessiond's setting."""
    if label is None:
        return (
            "Compaction requires a model with usable credentials, but no authenticated "
            "compaction model is available."
        )
    provider = label.split("/", 1)[0]
    return (
        f"Compaction requires usable credentials for {label}. Configure {provider} "
        "credentials or add an authenticated candidate to summarizer.candidates."
    )


NO_AVAILABLE_MODEL = "Compaction failed: no available model"
