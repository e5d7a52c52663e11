"""``agent/turnEnded`` answers, never fails, whatever becomes of its automatic compaction."""

from __future__ import annotations

import asyncio
from typing import Any

from sessiond_client import types as t
from tests.fake_provider import Answer, FakeProvider, default_answer

from .conftest import Connect
from .helpers import (
    COMPACTABLE,
    assistant,
    conversation,
    message,
    tool_result,
    user,
    with_candidates,
)

CLAUDE = t.ModelRef(provider="anthropic", model_id="claude-test")


def hold(body: dict[str, Any]) -> Answer:
    return Answer(hold=True)


async def _arrived(provider: FakeProvider) -> None:
    assert await asyncio.to_thread(provider.arrived.wait, 10), "the summary request never came"


async def test_an_aborted_automatic_compaction_is_an_answer(
    connect: Connect, project: str, provider: FakeProvider
) -> None:
    provider.responder = hold
    client = await connect()
    await client.initialize(settings=with_candidates(provider.candidate()))
    sid = (await client.new_session(cwd=project)).session_id
    ids = await conversation(client, sid)
    turn = asyncio.create_task(client.turn_ended(sid, context_window=600))
    await _arrived(provider)
    assert (await client.abort_compaction(sid)).aborted
    ended = await asyncio.wait_for(turn, 10)
    assert ended.action == "none" and ended.compaction is None and ended.error_message is None
    assert ended.auto_compaction == t.AutoCompactionReport(
        reason="threshold", outcome="aborted", message="Compaction cancelled"
    )
    assert (await client.tree(sid)).leaf_id == ids[-1]


async def test_a_manual_compaction_taking_over_is_reported_as_aborted(
    connect: Connect, project: str, provider: FakeProvider
) -> None:
    provider.responder = hold
    client = await connect()
    await client.initialize(settings=with_candidates(provider.candidate()))
    sid = (await client.new_session(cwd=project)).session_id
    await conversation(client, sid)
    turn = asyncio.create_task(client.turn_ended(sid, context_window=600))
    await _arrived(provider)
    provider.responder = default_answer  # the manual run's own request is answered
    manual = asyncio.create_task(client.compact(sid))
    ended = await asyncio.wait_for(turn, 10)
    assert ended.action == "none" and ended.compaction is None
    assert ended.auto_compaction is not None and ended.auto_compaction.outcome == "aborted"
    done = await asyncio.wait_for(manual, 10)
    assert (await client.tree(sid)).leaf_id == done.entry["id"]


async def test_a_hook_that_cancels_the_automatic_compaction(connect: Connect, project: str) -> None:
    client = await connect()

    @client.handle_before_compact
    async def veto(params: t.BeforeCompactHookParams) -> t.BeforeCompactHookResult:
        return t.BeforeCompactHookResult(cancel=True)

    await client.initialize(settings=COMPACTABLE)
    sid = (await client.new_session(cwd=project)).session_id
    ids = await conversation(client, sid)
    ended = await client.turn_ended(sid, context_window=600)
    assert ended.action == "none" and ended.compaction is None and ended.error_message is None
    assert ended.auto_compaction == t.AutoCompactionReport(
        reason="threshold", outcome="cancelled", message="Compaction cancelled"
    )
    assert (await client.tree(sid)).leaf_id == ids[-1]


async def test_an_overflow_with_nothing_to_compact(connect: Connect, project: str) -> None:
    client = await connect()
    await client.initialize(settings=COMPACTABLE)
    sid = (await client.new_session(cwd=project)).session_id
    overflowed = {
        **assistant(""),
        "content": [],
        "stopReason": "error",
        "errorMessage": "prompt is too long: 210000 tokens > 200000 maximum",
    }
    await client.append(sid, [message(user("a prompt too big to send")), message(overflowed)])
    ended = await client.turn_ended(sid, context_window=200_000, model=CLAUDE)
    assert ended.action == "none" and ended.compaction is None
    assert ended.auto_compaction == t.AutoCompactionReport(
        reason="overflow", outcome="skipped", message="Nothing to compact (session too small)"
    )


async def test_usage_after_pruning_kept_the_turn_under_the_threshold(
    connect: Connect, project: str
) -> None:
    client = await connect()
    await client.initialize(settings=COMPACTABLE)
    sid = (await client.new_session(cwd=project)).session_id
    entries = [message(user("run the tools"))]
    for index in range(6):
        call = {**assistant("", tool_call=f"c{index}"), "content": []}
        call["content"] = [
            {"type": "toolCall", "id": f"c{index}", "name": "bash", "arguments": {"n": index}}
        ]
        output = {**tool_result(f"c{index}", "o" * 60_000), "toolName": "bash"}  # not protected
        entries += [message(call), message(output)]
    last = {**assistant("summary of the work")}
    last["usage"] = {**last["usage"], "input": 89_000, "totalTokens": 89_050}
    entries.append(message(last))
    await client.append(sid, entries)
    ended = await client.turn_ended(sid, context_window=100_000, model=CLAUDE)
    # 89 050 tokens is over the threshold (83 616); pruning saves about 45 000
    assert ended.pruned_entries == 3 and ended.tokens_saved > 40_000
    assert ended.compaction is None and ended.auto_compaction is None
    assert ended.usage is not None and not ended.usage.should_compact
    # the pruning edits make the 89 050 measurement stale (pi 1.6): the size is the
    # estimate of the edited context, every message counted
    assert ended.usage.usage_tokens == 0
    # (three outputs of 15 000 kept, three notices of 9, and the small messages)
    assert ended.usage.tokens == ended.usage.trailing_tokens
    assert 45_000 + 3 * 9 < ended.usage.tokens < 45_100
    # context/usage agrees until the next answer measures the context anew
    assert await client.context_usage(sid, context_window=100_000) == ended.usage
    measured = {**assistant("next"), "usage": {**last["usage"], "input": 50_000}}
    measured["usage"]["totalTokens"] = 50_050
    appended = await client.append(sid, [message(user("go on")), message(measured)])
    assert appended.usage.usage_tokens == 50_050
