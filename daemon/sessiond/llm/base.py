"""The one summarizer interface and the values that cross it.

Every summarizer (OpenAI-compatible chat, Anthropic messages, pi's remote
endpoint, the client-delegated one, the offline extractive one, and the chain
that tries them in turn) takes a ``CompletionRequest`` and returns a
``Completion`` or raises ``sessiond.llm.errors.ProviderError``.

Cancellation is asyncio's: cancelling the task that awaits ``complete`` drops the
HTTP request at once. There is no separate abort signal to pass around.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Literal, Protocol, TypeAlias

import msgspec

from sessiond.wire.completion import Purpose, ReasoningLevel

_log = logging.getLogger(__name__)

# camelCase on the wire, unset optionals left out: a completion's attempts end up
# in a compaction entry's ``details``.
_WIRE: dict[str, Any] = {"rename": "camel", "kw_only": True, "omit_defaults": True}


class CompletionRequest(msgspec.Struct, kw_only=True):
    """What a summarizer is asked. Not itself on the wire: ``llm/complete`` sends it as
    ``LlmCompleteParams``, the same fields with none left out (callers here may)."""

    system_prompt: str
    prompt: str
    max_tokens: int
    # The caller wants extended reasoning; a candidate uses it only when it says
    # its model supports it (pi's rule: reasoning only if ``model.reasoning``).
    reasoning: bool = False
    purpose: Purpose = "history"
    # How much (the session's thinking level, as pi passes it); null when
    # ``reasoning`` is false. ``reasoning`` alone means "high".
    reasoning_level: ReasoningLevel | None = None

    @property
    def effort(self) -> ReasoningLevel | None:
        """The level to ask a reasoning model for, or None for no reasoning."""
        if not self.reasoning:
            return None
        return self.reasoning_level or "high"


class ProviderUsage(msgspec.Struct, **_WIRE):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None


class Attempt(msgspec.Struct, **_WIRE):
    """One try of one candidate, as the chain saw it."""

    candidate: str
    attempt: int
    outcome: Literal["ok", "error", "skipped"]
    error_kind: str | None = None
    error: str | None = None
    status: int | None = None
    # The wait before the next try of the same candidate, when there was one.
    delay_ms: int | None = None


class Completion(msgspec.Struct, **_WIRE):
    text: str
    # "provider/model" of the summarizer that produced the text.
    model: str
    extractive: bool = False
    usage: ProviderUsage | None = None
    # The provider's own stop reason ("stop", "length", "end_turn", "max_tokens"...).
    stop_reason: str | None = None
    attempts: list[Attempt] = msgspec.field(default_factory=list)
    # Set when the extractive summarizer stood in for models that all failed.
    fallback_reason: str | None = None


class Progress(msgspec.Struct, **_WIRE):
    """How much of the answer has arrived, for ``$/progress``."""

    model: str
    # Characters received so far, reasoning included (it shows the model is working).
    chars: int
    # Output tokens when the provider reports them mid-stream, else None.
    output_tokens: int | None = None


ProgressCallback: TypeAlias = Callable[[Progress], None]


class Summarizer(Protocol):
    """Anything that turns a summarization request into text."""

    async def complete(
        self, request: CompletionRequest, progress: ProgressCallback | None = None
    ) -> Completion: ...


class ProgressMeter:
    """Counts what a stream delivered and tells the callback, if there is one.

    A failing callback must not fail the summary: it is only a display.
    """

    def __init__(self, callback: ProgressCallback | None, model: str) -> None:
        self._callback = callback
        self._model = model
        self.chars = 0
        self.output_tokens: int | None = None

    def add(self, text: str) -> None:
        if not text:
            return
        self.chars += len(text)
        self._emit()

    def tokens(self, output_tokens: int) -> None:
        self.output_tokens = output_tokens
        self._emit()

    def _emit(self) -> None:
        if self._callback is None:
            return
        try:
            self._callback(
                Progress(model=self._model, chars=self.chars, output_tokens=self.output_tokens)
            )
        except Exception:
            _log.debug("progress callback failed", exc_info=True)
