"""Cancellation stops the HTTP request (the connection is closed, the answer not awaited);
API keys never show in errors or logs."""

from __future__ import annotations

import asyncio
import logging

import msgspec
import pytest
from llm_fakes import Reply, json_reply, openai_stream, sse_reply, wait_for

from sessiond.llm import CompletionRequest, ProviderError, SummarizerChain
from sessiond.llm.anthropic import AnthropicSummarizer
from sessiond.llm.openai import OpenAIChatSummarizer
from sessiond.llm.remote import RemoteSummarizer
from sessiond.settings import RetrySettings, SummarizerCandidate, SummarizerSettings

REQUEST = CompletionRequest(system_prompt="s", prompt="p", max_tokens=100)
KEY = "sk-proj-Z9y8X7w6V5u4T3s2R1q0"


async def _cancel_and_hang_up(task: asyncio.Task[object], server) -> None:
    """Cancel ``task`` while the server keeps it waiting: the task ends cancelled without
    an answer, and the client closes its connection (the request is stopped, not left
    running). The waits only bound the test: the server would answer never."""
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=30)
    assert done and task.cancelled()
    assert await asyncio.to_thread(server.hung_up.wait, 30), "the connection was left open"


@pytest.mark.parametrize("provider", ["openai", "anthropic", "remote"])
async def test_cancel_while_the_server_never_answers(server, provider):
    server.script("/v1/chat/completions", Reply(hang=True))
    server.script("/v1/messages", Reply(hang=True))
    server.script("/remote", Reply(hang=True))
    summarizer = {
        "openai": lambda: OpenAIChatSummarizer(model="m", base_url=f"{server.url}/v1"),
        "anthropic": lambda: AnthropicSummarizer(model="m", base_url=server.url),
        "remote": lambda: RemoteSummarizer(f"{server.url}/remote"),
    }[provider]()
    task = asyncio.create_task(summarizer.complete(REQUEST))
    await asyncio.to_thread(wait_for, server.received.is_set)
    await asyncio.sleep(0.05)  # let the client settle into waiting for the answer
    await _cancel_and_hang_up(task, server)


async def test_cancel_mid_stream_through_the_chain(server):
    events: list[bytes | float] = [*openai_stream(["part one"], finish=None, done=False), 30.0]
    server.script("/v1/chat/completions", sse_reply(events))
    settings = SummarizerSettings(
        candidates=[SummarizerCandidate(kind="openai", model="m", base_url=f"{server.url}/v1")]
    )
    received: list[int] = []
    task = asyncio.create_task(
        SummarizerChain(settings).complete(REQUEST, lambda p: received.append(p.chars))
    )
    while not received:
        await asyncio.sleep(0.005)
    await _cancel_and_hang_up(task, server)  # in the stream's 30 s pause
    assert received == [len("part one")]


def _echo_key_replies() -> list[Reply]:
    """Providers that quote the key back, in every place an error can come from."""
    return [
        json_reply({"error": {"message": f"Incorrect API key provided: {KEY}"}}, 500),
        Reply(
            status=502, body=f"<html>proxy saw header Authorization: Bearer {KEY}</html>".encode()
        ),
        sse_reply(
            [
                b'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n',
                f'data: {{"error": {{"message": "overloaded, token {KEY}"}}}}\n\n'.encode(),
            ]
        ),
        json_reply({"error": {"message": f"key {KEY} is not allowed"}}, 401),
    ]


async def test_keys_never_appear_in_errors_or_logs(server, caplog):
    caplog.set_level(logging.DEBUG)
    server.script("/v1/chat/completions", *_echo_key_replies())
    settings = SummarizerSettings(
        candidates=[
            SummarizerCandidate(
                kind="openai", model="m", base_url=f"{server.url}/v1", api_key_env="KEY_VAR"
            )
        ],
        extractive_fallback=False,
    )
    delays: list[float] = []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)

    summarizers = SummarizerChain(
        settings, RetrySettings(max_retries=3), sleep=sleep, environ={"KEY_VAR": KEY}
    )
    with pytest.raises(ProviderError) as caught:
        await summarizers.complete(REQUEST)
    # The key went out (so the test means something) ...
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in server.requests)
    assert len(server.requests) == 4
    # ... and came back in every error, but is nowhere in what sessiond kept.
    error = caught.value
    texts = [str(error), error.message, msgspec.json.encode(error.to_data()).decode()]
    texts += [msgspec.json.encode(a).decode() for a in error.attempts]
    texts += [record.getMessage() for record in caplog.records]
    texts += [str(record.args) for record in caplog.records]
    texts.append(caplog.text)
    assert caplog.records, "the chain should have logged the failures"
    for text in texts:
        assert KEY not in text
        assert KEY[8:] not in text
    assert any("[redacted]" in a.error for a in error.attempts if a.error)


async def test_unknown_key_shapes_are_scrubbed_too(server):
    leaked = "sk-other-ABCDEF0123456789"
    server.script("/v1/chat/completions", json_reply({"error": {"message": f"saw {leaked}"}}, 400))
    with pytest.raises(ProviderError) as caught:
        await OpenAIChatSummarizer(model="m", base_url=f"{server.url}/v1").complete(REQUEST)
    assert leaked not in caught.value.message


def test_repr_has_no_key():
    for summarizer in (
        OpenAIChatSummarizer(model="m", api_key=KEY),
        AnthropicSummarizer(model="m", api_key=KEY),
        RemoteSummarizer("http://127.0.0.1:1/x", api_key=KEY),
    ):
        assert KEY not in repr(summarizer)
