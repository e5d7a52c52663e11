"""The OpenAI-compatible summarizer against a real loopback server."""

from __future__ import annotations

import time

import pytest
from llm_fakes import Reply, json_reply, openai_stream, sse, sse_reply

from sessiond.llm import CompletionRequest, Progress, ProviderError
from sessiond.llm.openai import OpenAIChatSummarizer

REQUEST = CompletionRequest(
    system_prompt="You summarize.",
    prompt="<conversation>\n[User]: hi\n</conversation>",
    max_tokens=1234,
    reasoning=True,
    purpose="history",
)
PATH = "/v1/chat/completions"


def make(server, **kwargs) -> OpenAIChatSummarizer:
    options = {"model": "m-1", "base_url": f"{server.url}/v1", "api_key": "sk-test-000111222333"}
    options.update(kwargs)
    return OpenAIChatSummarizer(**options)


async def test_streaming_success_sends_the_wire_format(server):
    server.script(PATH, sse_reply(openai_stream(["## Goal", "\nShip it."], usage=True)))
    seen: list[Progress] = []
    result = await make(server).complete(REQUEST, seen.append)
    assert result.text == "## Goal\nShip it."
    assert result.model == "openai/m-1"
    assert result.stop_reason == "stop"
    assert result.usage is not None and result.usage.output_tokens == 7
    assert result.extractive is False
    (sent,) = server.requests
    assert sent.path == PATH
    assert sent.headers["authorization"] == "Bearer sk-test-000111222333"
    assert sent.body["model"] == "m-1"
    assert sent.body["stream"] is True
    assert sent.body["max_tokens"] == 1234
    assert sent.body["messages"] == [
        {"role": "system", "content": "You summarize."},
        {"role": "user", "content": REQUEST.prompt},
    ]
    # The candidate does not say its model reasons: no reasoning_effort.
    assert "reasoning_effort" not in sent.body
    assert [p.chars for p in seen if p.output_tokens is None] == [7, 16]
    assert seen[-1].output_tokens == 7


async def test_reasoning_and_no_key(server):
    server.script(PATH, sse_reply(openai_stream(["ok"])))
    await make(server, api_key=None, reasoning=True).complete(REQUEST)
    sent = server.requests[0]
    assert sent.body["reasoning_effort"] == "high"
    assert "authorization" not in sent.headers


async def test_reasoning_deltas_count_as_progress_not_text(server):
    events = [
        sse({"choices": [{"index": 0, "delta": {"reasoning_content": "thinking hard"}}]}),
        *openai_stream(["summary"]),
    ]
    server.script(PATH, sse_reply(events))
    seen: list[Progress] = []
    result = await make(server).complete(REQUEST, seen.append)
    assert result.text == "summary"
    assert seen[-1].chars == len("thinking hard") + len("summary")


async def test_non_streaming_answer_is_accepted(server):
    answer = {
        "id": "x",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "whole"},
                "finish_reason": "length",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2},
    }
    server.script(PATH, json_reply(answer))
    result = await make(server).complete(REQUEST)
    assert (result.text, result.stop_reason) == ("whole", "length")
    assert result.usage is not None and result.usage.input_tokens == 3


@pytest.mark.parametrize(
    ("reply", "kind", "needle"),
    [
        (json_reply({"object": "chat.completion", "choices": []}), "badResponse", "no choices"),
        (Reply(body=b"<html>oops</html>"), "badResponse", "neither JSON"),
        (sse_reply([b"data: {not json\n\n"]), "badResponse", "Malformed stream chunk"),
        (sse_reply(openai_stream([" "])), "badResponse", "no summary text"),
        (sse_reply(openai_stream(["half"], finish=None, done=False)), "transient", "ended before"),
        (
            sse_reply([*openai_stream(["half"], finish=None, done=False)], cut=True),
            "transient",
            "Connection error",
        ),
    ],
)
async def test_malformed_and_truncated_answers(server, reply, kind, needle):
    server.script(PATH, reply)
    with pytest.raises(ProviderError) as caught:
        await make(server).complete(REQUEST)
    assert caught.value.error_kind == kind
    assert needle in caught.value.message


async def test_finish_reason_without_done_is_complete(server):
    server.script(PATH, sse_reply(openai_stream(["fine"], done=False)))
    assert (await make(server).complete(REQUEST)).text == "fine"


async def test_error_object_in_stream(server):
    events = [
        *openai_stream(["par"], finish=None, done=False),
        sse(
            {
                "error": {
                    "message": "The server had an error while processing",
                    "type": "server_error",
                }
            }
        ),
    ]
    server.script(PATH, sse_reply(events))
    with pytest.raises(ProviderError) as caught:
        await make(server).complete(REQUEST)
    assert caught.value.error_kind == "transient"
    assert caught.value.message == "server_error: The server had an error while processing"


@pytest.mark.parametrize(
    ("reply", "kind", "message", "retry_after"),
    [
        (
            json_reply(
                {"error": {"message": "Rate limit reached", "type": "requests"}},
                429,
                headers={"retry-after": "3"},
            ),
            "rateLimit",
            "429 requests: Rate limit reached",
            3000,
        ),
        (
            json_reply({"error": {"message": "Incorrect API key provided"}}, 401),
            "auth",
            "401 Incorrect API key provided",
            None,
        ),
        (
            json_reply(
                {"error": {"message": "This model's maximum context length is 8192 tokens"}}, 400
            ),
            "overflow",
            "400 This model's maximum context length is 8192 tokens",
            None,
        ),
        (Reply(status=502, body=b"Bad gateway"), "transient", "502 Bad gateway", None),
        (Reply(status=413), "overflow", "413 status code (no body)", None),
        (json_reply({"error": "model not found"}, 404), "other", "404 model not found", None),
    ],
)
async def test_http_errors_are_classified(server, reply, kind, message, retry_after):
    server.script(PATH, reply)
    with pytest.raises(ProviderError) as caught:
        await make(server).complete(REQUEST)
    assert caught.value.error_kind == kind
    assert caught.value.message == message
    assert caught.value.retry_after_ms == retry_after
    assert caught.value.status == reply.status


async def test_hanging_stream_hits_the_read_timeout(server):
    # The stream stalls for a minute: only the 0.3 s read timeout can end it sooner, and
    # it ends with the timeout's error (a stream that ended would be another error).
    events = [*openai_stream(["start"], finish=None, done=False), 60.0]
    server.script(PATH, sse_reply(events))
    started = time.perf_counter()
    with pytest.raises(ProviderError) as caught:
        await make(server, timeout_s=0.3).complete(REQUEST)
    elapsed = time.perf_counter() - started
    assert caught.value.error_kind == "transient"
    assert "timed out" in caught.value.message
    assert elapsed >= 0.3  # never before it is due


async def test_no_answer_at_all_times_out(server):
    server.script(PATH, Reply(hang=True))
    with pytest.raises(ProviderError) as caught:
        await make(server, timeout_s=0.3).complete(REQUEST)
    assert "timed out" in caught.value.message
    assert caught.value.error_kind == "transient"


async def test_keep_alives_without_content_are_a_stall(server):
    events: list[bytes | float] = [*openai_stream(["a"], finish=None, done=False)]
    events += [0.1, b": keep-alive\n\n"] * 12
    server.script(PATH, sse_reply(events))
    with pytest.raises(ProviderError) as caught:
        await make(server, timeout_s=0.35).complete(REQUEST)
    assert caught.value.message.startswith("stream stall")
    assert caught.value.error_kind == "transient"


async def test_refused_connection_is_transient(server):
    port = server.httpd.server_address[1]
    server.stop()
    with pytest.raises(ProviderError) as caught:
        await OpenAIChatSummarizer(model="m", base_url=f"http://127.0.0.1:{port}/v1").complete(
            REQUEST
        )
    assert caught.value.error_kind == "transient"
    assert "Connection error" in caught.value.message


async def test_official_api_uses_max_completion_tokens():
    body = OpenAIChatSummarizer(model="o3", api_key="k" * 20)._body(REQUEST)
    assert b'"max_completion_tokens":1234' in body
    assert b'"max_tokens"' not in body
    assert b'"stream_options":{"include_usage":true}' in body


@pytest.mark.parametrize("base_url", ["notaurl", "ftp://127.0.0.1/v1", "http://[::1/v1"])
async def test_a_bad_base_url_is_not_retryable(base_url):
    with pytest.raises(ProviderError) as caught:
        await OpenAIChatSummarizer(model="m", base_url=base_url).complete(REQUEST)
    assert caught.value.error_kind == "other"


async def test_configured_headers_are_sent_and_the_key_header_is_not_doubled(server):
    server.script(PATH, sse_reply(openai_stream(["ok"])))
    headers = {"Authorization": "Bearer stale-settings-value", "HTTP-Referer": "https://x.test"}
    await make(server, headers=headers).complete(REQUEST)
    sent = server.requests[0]
    auth = [value for name, value in sent.raw_headers if name.lower() == "authorization"]
    assert auth == ["Bearer sk-test-000111222333"]
    assert sent.headers["http-referer"] == "https://x.test"
