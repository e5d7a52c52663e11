"""Anthropic's Messages API: one POST to ``{base_url}/v1/messages`` with ``stream: true``.

The event stream is ``message_start``, then per content block
``content_block_start`` / ``content_block_delta``... / ``content_block_stop``,
then ``message_delta`` (stop reason, output tokens) and ``message_stop``, with
``ping`` keep-alives anywhere and ``error`` events in place of the rest when the
API fails mid-answer. The summary is the text blocks joined with a newline, as
pi joins them; thinking only shows as progress.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing

import msgspec

from sessiond.llm.base import (
    Completion,
    CompletionRequest,
    ProgressMeter,
    ProviderUsage,
)
from sessiond.llm.errors import ProviderError, classify, scrub, snippet
from sessiond.llm.sse import PlainBody, decode_body
from sessiond.llm.streaming import StreamingSummarizer
from sessiond.llm.transport import MAX_BODY_BYTES, StallWatch, url_host
from sessiond.wire.completion import ReasoningLevel

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
# How much of a malformed answer an error quotes.
_QUOTED_CHARS = 200

# Extended thinking: the budget must be at least 1024 and below max_tokens, and
# max_tokens counts thinking plus text. 32000 is the smallest output limit of the
# models that can think (Opus 4/4.1), so staying under it is safe for them all.
_MIN_THINKING_BUDGET = 1024
_MAX_TOKENS_WITH_THINKING = 32000
# pi's thinking budget per level; "xhigh" gets "high"'s, as pi gives token-budget
# providers.
THINKING_BUDGETS: dict[ReasoningLevel, int] = {
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 16384,
    "xhigh": 16384,
}


def thinking_budget(max_tokens: int, level: ReasoningLevel = "high") -> tuple[int, int]:
    """``(budget_tokens, max_tokens)`` for a request that wants ``max_tokens`` of text."""
    text_tokens = max(1, max_tokens)
    room = _MAX_TOKENS_WITH_THINKING - text_tokens
    budget = max(_MIN_THINKING_BUDGET, min(THINKING_BUDGETS[level], room))
    return budget, text_tokens + budget


# --- request body -------------------------------------------------------------


class _AnthropicMessage(msgspec.Struct):
    role: str
    content: str


class _Thinking(msgspec.Struct):
    type: str
    budget_tokens: int


class _MessagesRequest(msgspec.Struct, omit_defaults=True, kw_only=True):
    model: str
    # Left out when empty: the API refuses an empty system text.
    system: str | None = None
    messages: list[_AnthropicMessage]
    max_tokens: int
    stream: bool
    thinking: _Thinking | None = None


# --- response events ----------------------------------------------------------


class _AnthropicUsage(msgspec.Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None


class _Block(msgspec.Struct):
    type: str = ""
    text: str | None = None
    thinking: str | None = None


class _AnthropicErrorObject(msgspec.Struct):
    type: str | None = None
    message: str | None = None


class _MessageBody(msgspec.Struct):
    type: str = "message"
    content: list[_Block] | None = None
    usage: _AnthropicUsage | None = None
    stop_reason: str | None = None
    error: _AnthropicErrorObject | None = None


class _AnthropicDelta(msgspec.Struct):
    type: str | None = None
    text: str | None = None
    thinking: str | None = None
    stop_reason: str | None = None


class _Event(msgspec.Struct):
    type: str = ""
    message: _MessageBody | None = None
    index: int = 0
    content_block: _Block | None = None
    delta: _AnthropicDelta | None = None
    usage: _AnthropicUsage | None = None
    error: _AnthropicErrorObject | None = None


_event_decoder = msgspec.json.Decoder(_Event)
_message_decoder = msgspec.json.Decoder(_MessageBody)


class _AnthropicStreamState:
    def __init__(self) -> None:
        self.started = False
        self.stopped = False
        self.blocks: dict[int, list[str]] = {}
        self.usage = ProviderUsage()
        self.stop_reason: str | None = None

    def add_usage(self, raw: _AnthropicUsage | None) -> None:
        if raw is None:
            return
        if raw.input_tokens is not None:
            self.usage.input_tokens = raw.input_tokens
        if raw.output_tokens is not None:
            self.usage.output_tokens = raw.output_tokens
        if raw.cache_read_input_tokens is not None:
            self.usage.cache_read_tokens = raw.cache_read_input_tokens
        if raw.cache_creation_input_tokens is not None:
            self.usage.cache_write_tokens = raw.cache_creation_input_tokens

    def text(self) -> str:
        return "\n".join("".join(self.blocks[index]) for index in sorted(self.blocks))

    def apply(self, kind: str, event: _Event, meter: ProgressMeter) -> bool:
        """Take in one event; whether it carried content (thinking counts).

        ``ping``, ``content_block_stop`` and event types added later change nothing.
        """
        if kind == "message_start":
            self.started = True
            if event.message is not None:
                self.add_usage(event.message.usage)
        elif kind == "content_block_start":
            block = event.content_block
            if block is not None and block.type == "text" and block.text:
                self.blocks.setdefault(event.index, []).append(block.text)
                meter.add(block.text)
                return True
            if block is not None and block.type == "text":
                self.blocks.setdefault(event.index, [])
        elif kind == "content_block_delta" and event.delta is not None:
            delta = event.delta
            if delta.type == "text_delta" and delta.text:
                self.blocks.setdefault(event.index, []).append(delta.text)
                meter.add(delta.text)
                return True
            if delta.type == "thinking_delta" and delta.thinking:
                meter.add(delta.thinking)
                return True
        elif kind == "message_delta":
            if event.delta is not None and event.delta.stop_reason:
                self.stop_reason = event.delta.stop_reason
            self.add_usage(event.usage)
            if event.usage is not None and event.usage.output_tokens is not None:
                meter.tokens(event.usage.output_tokens)
        elif kind == "message_stop":
            self.stopped = True
        return False


class AnthropicSummarizer(StreamingSummarizer):
    default_base_url = DEFAULT_BASE_URL
    provider = "anthropic"

    def _endpoint(self) -> str:
        return f"{self.base_url}/v1/messages"

    def _body(self, request: CompletionRequest) -> bytes:
        body = _MessagesRequest(
            model=self.model,
            system=request.system_prompt or None,
            messages=[_AnthropicMessage(role="user", content=request.prompt)],
            max_tokens=max(1, request.max_tokens),
            stream=True,
        )
        effort = request.effort
        if effort is not None and self.reasoning:
            budget, body.max_tokens = thinking_budget(request.max_tokens, effort)
            body.thinking = _Thinking(type="enabled", budget_tokens=budget)
        return msgspec.json.encode(body)

    def _request_headers(self) -> dict[str, str]:
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            "anthropic-version": API_VERSION,
        }
        headers.update(self._headers)
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    async def _read(self, lines: AsyncIterator[str], meter: ProgressMeter) -> Completion:
        watch = StallWatch(self.timeout_s)
        state = _AnthropicStreamState()
        items = decode_body(lines, on_line=lambda: watch.check(self.label), limit=MAX_BODY_BYTES)
        async with aclosing(items):
            async for item in items:
                if isinstance(item, PlainBody):
                    return self._whole_answer(item.text)
                event = self._decode_event(item.data)
                kind = event.type or item.event
                if kind == "error" or event.error is not None:
                    raise self._error(event.error, item.data)
                if state.apply(kind, event, meter):
                    watch.progressed()
                if state.stopped:
                    break
        if not state.started:
            raise ProviderError(
                "anthropic stream envelope error: the stream ended before message_start",
                error_kind="transient",
                model=self.label,
            )
        if not state.stopped:
            raise ProviderError(
                f"Stream from {url_host(self.base_url)} ended before message_stop "
                "(connection closed early)",
                error_kind="transient",
                model=self.label,
            )
        return self._result(state.text(), state.usage, state.stop_reason)

    def _decode_event(self, data: str) -> _Event:
        try:
            return _event_decoder.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise self._malformed("stream event", data) from None

    def _malformed(self, what: str, data: str) -> ProviderError:
        return ProviderError(
            f"Malformed {what} from {url_host(self.base_url)}: "
            f"{snippet(data, _QUOTED_CHARS, self._secrets)}",
            error_kind="badResponse",
            model=self.label,
        )

    def _error(self, error: _AnthropicErrorObject | None, raw: str) -> ProviderError:
        if error is None:
            message = raw or "no error details in response"
        elif error.message and error.type and error.type not in error.message:
            message = f"{error.type}: {error.message}"
        else:
            message = error.message or error.type or "no error details in response"
        message = scrub(message, self._secrets)
        return ProviderError(message, error_kind=classify(message), model=self.label)

    def _whole_answer(self, body: str) -> Completion:
        try:
            message = _message_decoder.decode(body)
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise self._malformed("response (neither JSON nor an event stream)", body) from None
        if message.type == "error" or message.error is not None:
            raise self._error(message.error, body)
        if message.content is None:
            raise ProviderError(
                f"Response from {url_host(self.base_url)} has no content",
                error_kind="badResponse",
                model=self.label,
            )
        state = _AnthropicStreamState()
        state.add_usage(message.usage)
        for index, block in enumerate(message.content):
            if block.type == "text":
                state.blocks[index] = [block.text or ""]
        return self._result(state.text(), state.usage, message.stop_reason)

    def _result(self, text: str, usage: ProviderUsage, stop_reason: str | None) -> Completion:
        if not text.strip():
            raise ProviderError(
                f"{self.label} returned no summary text (stop_reason: {stop_reason or 'none'})",
                error_kind="badResponse",
                model=self.label,
            )
        return Completion(text=text, model=self.label, usage=usage, stop_reason=stop_reason)
