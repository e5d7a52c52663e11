"""pi's remote endpoint and the client-delegated summarizer."""

from __future__ import annotations

import asyncio

import pytest
from llm_fakes import Reply, json_reply

from sessiond.errors import OperationCancelledError
from sessiond.llm import CompletionRequest, DelegatedSummarizer, ProviderError, SummarizerChain
from sessiond.llm.remote import RemoteSummarizer
from sessiond.settings import SummarizerCandidate, SummarizerSettings

REQUEST = CompletionRequest(system_prompt="sys", prompt="the prompt", max_tokens=100)


async def test_remote_success(server):
    server.script("/compact", json_reply({"summary": "remote words", "shortSummary": "ignored"}))
    result = await RemoteSummarizer(f"{server.url}/compact").complete(REQUEST)
    assert result.text == "remote words"
    assert result.model == "remote/127.0.0.1"
    (sent,) = server.requests
    assert sent.headers["content-type"] == "application/json"
    assert sent.body == {"systemPrompt": "sys", "prompt": "the prompt"}
    assert "authorization" not in sent.headers


@pytest.mark.parametrize(
    ("reply", "message", "kind"),
    [
        (
            Reply(status=503, body=b"down"),
            "Remote compaction failed (503 Service Unavailable)",
            "transient",
        ),
        (
            Reply(status=418, reason="Short And Stout", body=b""),
            "Remote compaction failed (418 Short And Stout)",
            "other",
        ),
        (json_reply({"error": "no"}, 401), "Remote compaction failed (401 Unauthorized)", "auth"),
        (
            json_reply({"text": "wrong field"}),
            "Remote compaction response missing summary",
            "badResponse",
        ),
        (json_reply({"summary": 42}), "Remote compaction response missing summary", "badResponse"),
        (
            Reply(body=b"not json at all"),
            "Remote compaction response missing summary",
            "badResponse",
        ),
    ],
)
async def test_remote_failures_use_pis_strings(server, reply, message, kind):
    server.script("/compact", reply)
    with pytest.raises(ProviderError) as caught:
        await RemoteSummarizer(f"{server.url}/compact").complete(REQUEST)
    assert caught.value.message == message
    assert caught.value.error_kind == kind


async def test_client_delegated_passes_the_request_and_returns_the_text():
    got: list[CompletionRequest] = []

    async def delegate(request: CompletionRequest) -> str:
        got.append(request)
        return "from the editor"

    result = await DelegatedSummarizer(delegate).complete(REQUEST)
    assert result.text == "from the editor"
    assert result.model == "client/editor"
    assert got == [REQUEST]


def test_llm_complete_params_are_a_request_with_nothing_left_out() -> None:
    """``llm/complete`` sends the request copied whole: the same fields, all required."""
    import msgspec

    from sessiond.api.hook_types import LlmCompleteParams

    request = {f.name: f.type for f in msgspec.structs.fields(CompletionRequest)}
    wire = msgspec.structs.fields(LlmCompleteParams)
    assert {f.name: f.type for f in wire} == request
    assert all(f.required for f in wire)
    params = msgspec.to_builtins(LlmCompleteParams(**msgspec.structs.asdict(REQUEST)))
    assert params == {
        "systemPrompt": "sys",
        "prompt": "the prompt",
        "maxTokens": 100,
        "reasoning": False,
        "purpose": "history",
        "reasoningLevel": None,
    }


async def test_client_errors_become_provider_errors():
    async def delegate(request: CompletionRequest) -> str:
        raise RuntimeError("429 Too Many Requests from the editor's model")

    with pytest.raises(ProviderError) as caught:
        await DelegatedSummarizer(delegate).complete(REQUEST)
    assert caught.value.error_kind == "rateLimit"
    assert "editor's model" in caught.value.message


async def test_client_cancel_answer_is_not_a_failure_to_fall_back_from():
    async def delegate(request: CompletionRequest) -> str:
        raise OperationCancelledError("the user cancelled")

    chain = SummarizerChain(
        SummarizerSettings(candidates=[SummarizerCandidate(kind="client")]), delegated=delegate
    )
    with pytest.raises(OperationCancelledError):
        await chain.complete(REQUEST)


async def test_cancelling_the_chain_cancels_the_delegate():
    entered = asyncio.Event()
    cancelled = asyncio.Event()

    async def delegate(request: CompletionRequest) -> str:
        entered.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    chain = SummarizerChain(
        SummarizerSettings(candidates=[SummarizerCandidate(kind="client")]), delegated=delegate
    )
    task = asyncio.create_task(chain.complete(REQUEST))
    await asyncio.wait_for(entered.wait(), 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled.is_set()


async def test_client_candidate_without_a_client_is_skipped():
    chain = SummarizerChain(SummarizerSettings(candidates=[SummarizerCandidate(kind="client")]))
    result = await chain.complete(REQUEST)
    assert result.extractive is True
    assert result.attempts[0].outcome == "skipped"
    assert result.fallback_reason == "Compaction failed: no available model"
