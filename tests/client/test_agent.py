"""``AgentSession``: pi-style agent events in, session entries and end-of-turn actions out."""

from __future__ import annotations

from typing import Any

import pytest

from sessiond_client import AgentSession, ConflictError, SessiondClient
from sessiond_client import types as t

from .conftest import Connect
from .helpers import COMPACTABLE, assistant, conversation, message, tool_result, user


def _run(question: str) -> list[dict[str, Any]]:
    """The events of one pi agent run: a tool call, its result, an answer."""
    asked = user(question)
    calling = assistant("let me look", tool_call="call-1")
    result = tool_result("call-1", "print('hi')")
    answer = assistant("it prints hi")
    return [
        {"type": "agent_start"},
        {"type": "message_start", "message": asked},
        {"type": "message_end", "message": asked},
        {"type": "turn_start"},
        {"type": "message_update", "message": calling},
        {"type": "message_end", "message": calling},
        {"type": "tool_execution_end", "toolCallId": "call-1", "result": {}},
        {"type": "message_end", "message": result},
        {"type": "turn_end", "message": calling, "toolResults": [result]},
        {"type": "message_end", "message": answer},
        {"type": "message_end", "message": {"role": "custom", "customType": "ui", "content": "x"}},
        {"type": "agent_end", "messages": [asked, calling, result, answer]},
    ]


async def test_a_run_is_recorded_and_its_turn_ended(client: SessiondClient, project: str) -> None:
    sid = (await client.new_session(cwd=project)).session_id
    agent = AgentSession(client, sid, context_window=100_000)
    outcomes = [await agent.handle(event) for event in _run("what does a.py print?")]
    assert outcomes[:-1] == [None] * (len(outcomes) - 1)
    ended = outcomes[-1]
    assert isinstance(ended, t.TurnEndedResult) and ended.action == "none"
    entries = (await client.path(sid)).entries
    assert [e["message"]["role"] for e in entries] == [
        "user",
        "assistant",
        "toolResult",
        "assistant",
    ]
    assert agent.leaf_id == entries[-1]["id"]
    assert agent.model == t.ModelRef(provider="anthropic", model_id="claude-test")
    assert agent.usage is not None and agent.usage.context_window == 100_000


async def test_overflow_is_compacted_and_the_agent_told_to_retry(
    connect: Connect, project: str
) -> None:
    client = await connect()
    await client.initialize(settings=COMPACTABLE)
    sid = (await client.new_session(cwd=project)).session_id
    await conversation(client, sid)
    agent = AgentSession(client, sid, context_window=200_000)
    overflow = assistant("")
    overflow.update(
        stopReason="error", errorMessage="prompt is too long: 213462 tokens > 200000 maximum"
    )
    await agent.handle({"type": "message_end", "message": user("one more thing")})
    await agent.handle({"type": "message_end", "message": overflow})
    ended = await agent.handle({"type": "agent_end", "messages": []})
    assert isinstance(ended, t.TurnEndedResult)
    assert ended.action == "retry"
    assert ended.compaction is not None and ended.compaction.reason == "overflow"
    assert agent.leaf_id == ended.compaction.entry_id == (await client.tree(sid)).leaf_id


async def test_guarded_appends_refuse_a_concurrent_writer(
    client: SessiondClient, project: str
) -> None:
    sid = (await client.new_session(cwd=project)).session_id
    agent = AgentSession(client, sid, guard_leaf=True, leaf_id=None)
    await agent.record(user("first"))
    # Someone else writes to the session behind the agent's back.
    await client.append(sid, [message(user("interloper"))])
    with pytest.raises(ConflictError):
        await agent.record(assistant("answer to first"))
    assert [e["message"]["content"] for e in (await client.path(sid)).entries] == [
        "first",
        "interloper",
    ]
