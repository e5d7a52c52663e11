"""The Anthropic Messages summarizer against a real loopback server."""

from __future__ import annotations

import pytest
from llm_fakes import Reply, anthropic_stream, json_reply, sse, sse_reply

from sessiond.llm import CompletionRequest, Progress, ProviderError
from sessiond.llm.anthropic import AnthropicSummarizer, thinking_budget

REQUEST = CompletionRequest(
    system_prompt="System words.", prompt="Summarize this.", max_tokens=13107, reasoning=True
)
PATH = "/v1/messages"
KEY = "sk-ant-api03-secretsecret123"


def make(server, **kwargs) -> AnthropicSummarizer:
    options = {"model": "claude-x", "base_url": server.url, "api_key": KEY}
    options.update(kwargs)
    return AnthropicSummarizer(**options)


async def test_streaming_success(server):
    server.script(
        PATH, sse_reply(anthropic_stream([["## Go", "al"], ["second block"]], thinking=["hmm"]))
    )
    seen: list[Progress] = []
    result = await make(server).complete(REQUEST, seen.append)
    # Text blocks joined with a newline, as pi joins them; thinking left out.
    assert result.text == "## Goal\nsecond block"
    assert result.model == "anthropic/claude-x"
    assert result.stop_reason == "end_turn"
    assert result.usage is not None
    assert (result.usage.input_tokens, result.usage.output_tokens) == (25, 42)
    assert seen[-1].output_tokens == 42
    assert max(p.chars for p in seen) == len("hmm") + len("## Goal") + len("second block")
    (sent,) = server.requests
    assert sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    assert sent.body == {
        "model": "claude-x",
        "system": "System words.",
        "messages": [{"role": "user", "content": "Summarize this."}],
        "max_tokens": 13107,
        "stream": True,
    }


async def test_thinking_when_the_model_reasons(server):
    server.script(PATH, sse_reply(anthropic_stream([["ok"]])))
    await make(server, reasoning=True).complete(REQUEST)
    body = server.requests[0].body
    budget = body["thinking"]["budget_tokens"]
    assert body["thinking"]["type"] == "enabled"
    assert budget >= 1024
    assert body["max_tokens"] == 13107 + budget
    assert budget < body["max_tokens"] <= 32000


@pytest.mark.parametrize("wanted", [1, 512, 2048, 13107, 31000, 64000])
def test_thinking_budget_rules(wanted):
    budget, total = thinking_budget(wanted)
    assert budget >= 1024
    assert budget < total
    assert total - budget == wanted
    if wanted + 1024 <= 32000:
        assert total <= 32000


async def test_error_event_mid_stream(server):
    events = anthropic_stream([["partial"]], stop=False)[:4]
    events.append(
        sse(
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            "error",
        )
    )
    server.script(PATH, sse_reply(events))
    with pytest.raises(ProviderError) as caught:
        await make(server).complete(REQUEST)
    assert caught.value.message == "overloaded_error: Overloaded"
    assert caught.value.error_kind == "transient"


async def test_stream_ending_before_message_start(server):
    server.script(PATH, sse_reply([sse({"type": "ping"}, "ping")]))
    with pytest.raises(ProviderError) as caught:
        await make(server).complete(REQUEST)
    assert caught.value.error_kind == "transient"
    assert "anthropic stream envelope error" in caught.value.message
    assert "before message_start" in caught.value.message


async def test_stream_ending_before_message_stop(server):
    server.script(PATH, sse_reply(anthropic_stream([["cut"]], stop=False)))
    with pytest.raises(ProviderError) as caught:
        await make(server).complete(REQUEST)
    assert caught.value.error_kind == "transient"
    assert "before message_stop" in caught.value.message


async def test_garbage_event_is_a_bad_response(server):
    server.script(PATH, sse_reply([b"event: message_start\ndata: {{{\n\n"]))
    with pytest.raises(ProviderError) as caught:
        await make(server).complete(REQUEST)
    assert caught.value.error_kind == "badResponse"


async def test_non_streaming_message(server):
    answer = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "thinking", "thinking": "x"}, {"type": "text", "text": "plain"}],
        "stop_reason": "max_tokens",
        "usage": {"input_tokens": 5, "output_tokens": 6},
    }
    server.script(PATH, json_reply(answer))
    result = await make(server).complete(REQUEST)
    assert (result.text, result.stop_reason) == ("plain", "max_tokens")


@pytest.mark.parametrize(
    ("reply", "kind", "message"),
    [
        (
            json_reply(
                {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
                529,
            ),
            "transient",
            "529 overloaded_error: Overloaded",
        ),
        (
            json_reply(
                {
                    "type": "error",
                    "error": {
                        "type": "invalid_request_error",
                        "message": "prompt is too long: 210000 tokens > 200000 maximum",
                    },
                },
                400,
            ),
            "overflow",
            "400 invalid_request_error: prompt is too long: 210000 tokens > 200000 maximum",
        ),
        (
            json_reply(
                {
                    "type": "error",
                    "error": {"type": "authentication_error", "message": "invalid x-api-key"},
                },
                401,
            ),
            "auth",
            "401 authentication_error: invalid x-api-key",
        ),
        (Reply(status=200, body=b'{"type": "message"}'), "badResponse", "has no content"),
    ],
)
async def test_error_answers(server, reply, kind, message):
    server.script(PATH, reply)
    with pytest.raises(ProviderError) as caught:
        await make(server).complete(REQUEST)
    assert caught.value.error_kind == kind
    assert message in caught.value.message
