"""OpenAI-compatible chat completions: OpenAI, OpenRouter, llama.cpp, vLLM, Ollama...

One POST to ``{base_url}/chat/completions`` with ``stream: true``. The answer is
read as an event stream of ``chat.completion.chunk`` objects; a server that
ignores ``stream`` and sends one JSON ``chat.completion`` is accepted too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing

import msgspec

from sessiond.llm.base import Completion, CompletionRequest, ProgressMeter, ProviderUsage
from sessiond.llm.errors import ProviderError, classify, scrub, snippet
from sessiond.llm.sse import PlainBody, decode_body
from sessiond.llm.streaming import StreamingSummarizer
from sessiond.llm.transport import MAX_BODY_BYTES, StallWatch, url_host

DEFAULT_BASE_URL = "https://api.openai.com/v1"
# How much of a malformed answer an error quotes.
_QUOTED_CHARS = 200


# --- request body -------------------------------------------------------------


class _OpenAIMessage(msgspec.Struct):
    role: str
    content: str


class _StreamOptions(msgspec.Struct):
    include_usage: bool


class _ChatRequest(msgspec.Struct, omit_defaults=True, kw_only=True):
    model: str
    messages: list[_OpenAIMessage]
    stream: bool
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    reasoning_effort: str | None = None
    stream_options: _StreamOptions | None = None


# --- response bodies (streamed chunks and the whole answer share a shape) ---------


class _OpenAIDelta(msgspec.Struct):
    content: str | None = None
    # Where DeepSeek, llama.cpp, vLLM and OpenRouter put reasoning: progress, not summary.
    reasoning_content: str | None = None
    reasoning: str | None = None


class _Choice(msgspec.Struct):
    index: int = 0
    delta: _OpenAIDelta | None = None
    message: _OpenAIDelta | None = None
    finish_reason: str | None = None


class _OpenAIUsage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class _OpenAIErrorObject(msgspec.Struct):
    message: str | None = None
    type: str | None = None
    code: str | int | None = None


class _Chunk(msgspec.Struct):
    choices: list[_Choice] | None = None
    usage: _OpenAIUsage | None = None
    error: _OpenAIErrorObject | str | None = None


_chunk_decoder = msgspec.json.Decoder(_Chunk)


class _OpenAIStreamState:
    def __init__(self) -> None:
        self.text: list[str] = []
        self.usage: ProviderUsage | None = None
        self.finish: str | None = None
        self.done = False

    def apply(self, chunk: _Chunk, meter: ProgressMeter) -> bool:
        """Take in one chunk; whether it carried any content (reasoning counts)."""
        progressed = False
        if chunk.usage is not None:
            self.usage = _usage(chunk.usage)
            if self.usage.output_tokens is not None:
                meter.tokens(self.usage.output_tokens)
        for choice in chunk.choices or ():
            if choice.index != 0:
                continue  # n > 1 is never asked for; ignore strays
            delta = choice.delta or choice.message
            if delta is not None:
                if delta.content:
                    self.text.append(delta.content)
                    meter.add(delta.content)
                    progressed = True
                thinking = delta.reasoning_content or delta.reasoning
                if thinking:
                    meter.add(thinking)
                    progressed = True
            if choice.finish_reason:
                self.finish = choice.finish_reason
        return progressed


class OpenAIChatSummarizer(StreamingSummarizer):
    default_base_url = DEFAULT_BASE_URL
    provider = "openai"

    def _endpoint(self) -> str:
        return f"{self.base_url}/chat/completions"

    def _official(self) -> bool:
        return url_host(self.base_url) == "api.openai.com"

    def _body(self, request: CompletionRequest) -> bytes:
        official = self._official()
        body = _ChatRequest(
            model=self.model,
            messages=[
                _OpenAIMessage(role="system", content=request.system_prompt),
                _OpenAIMessage(role="user", content=request.prompt),
            ],
            stream=True,
        )
        # OpenAI's reasoning models refuse max_tokens; most local servers only know it.
        if official:
            body.max_completion_tokens = request.max_tokens
            body.stream_options = _StreamOptions(include_usage=True)
        else:
            body.max_tokens = request.max_tokens
        effort = request.effort
        if effort is not None and self.reasoning:
            # pi's level as it is; "xhigh" only some models take, so it asks for "high".
            body.reasoning_effort = "high" if effort == "xhigh" else effort
        return msgspec.json.encode(body)

    def _request_headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        headers.update(self._headers)
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        return headers

    async def _read(self, lines: AsyncIterator[str], meter: ProgressMeter) -> Completion:
        watch = StallWatch(self.timeout_s)
        state = _OpenAIStreamState()
        items = decode_body(lines, on_line=lambda: watch.check(self.label), limit=MAX_BODY_BYTES)
        async with aclosing(items):
            async for item in items:
                if isinstance(item, PlainBody):
                    return self._whole_answer(item.text)
                if item.data.strip() == "[DONE]":
                    state.done = True
                    break
                chunk = self._decode(item.data, streamed=True)
                if chunk.error is not None or item.event == "error":
                    raise self._in_band_error(chunk, item.data)
                if state.apply(chunk, meter):
                    watch.progressed()
        if not state.done and state.finish is None:
            raise ProviderError(
                f"Stream from {url_host(self.base_url)} ended before completion "
                "(connection closed early, no [DONE])",
                error_kind="transient",
                model=self.label,
            )
        return self._result("".join(state.text), state.usage, state.finish)

    def _decode(self, data: str, *, streamed: bool) -> _Chunk:
        try:
            return _chunk_decoder.decode(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            what = "stream chunk" if streamed else "response (neither JSON nor an event stream)"
            quoted = snippet(data, _QUOTED_CHARS, self._secrets)
            raise ProviderError(
                f"Malformed {what} from {url_host(self.base_url)}: {quoted}",
                error_kind="badResponse",
                model=self.label,
            ) from None

    def _in_band_error(self, chunk: _Chunk, raw: str) -> ProviderError:
        error = chunk.error
        status: int | None = None
        if isinstance(error, _OpenAIErrorObject):
            message = error.message or error.type or str(error.code or "") or raw
            if error.type and error.type not in message:
                message = f"{error.type}: {message}"
            if isinstance(error.code, int):
                status = error.code
        elif isinstance(error, str):
            message = error
        else:
            message = raw
        message = scrub(message or "no error details in response", self._secrets)
        return ProviderError(
            message, error_kind=classify(message, status), status=status, model=self.label
        )

    def _whole_answer(self, body: str) -> Completion:
        chunk = self._decode(body, streamed=False)
        if chunk.error is not None:
            raise self._in_band_error(chunk, body)
        choices = chunk.choices or []
        first = choices[0] if choices else None
        message = first.message if first is not None else None
        if message is None or message.content is None:
            raise ProviderError(
                f"Response from {url_host(self.base_url)} has no choices[0].message.content",
                error_kind="badResponse",
                model=self.label,
            )
        usage = _usage(chunk.usage) if chunk.usage is not None else None
        return self._result(message.content, usage, first.finish_reason if first else None)

    def _result(self, text: str, usage: ProviderUsage | None, finish: str | None) -> Completion:
        if not text.strip():
            raise ProviderError(
                f"{self.label} returned no summary text (finish_reason: {finish or 'none'})",
                error_kind="badResponse",
                model=self.label,
            )
        return Completion(text=text, model=self.label, usage=usage, stop_reason=finish)


def _usage(raw: _OpenAIUsage) -> ProviderUsage:
    return ProviderUsage(input_tokens=raw.prompt_tokens, output_tokens=raw.completion_tokens)
