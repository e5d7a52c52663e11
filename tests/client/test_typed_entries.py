"""Typed entries and messages in the Python client, against a real daemon.

Appends built from the ``*EntryInput`` structs land as the same JSON a dict would
give; results read back into the file format's types with ``parse_entry`` /
``parse_message``, fields the types do not list are still in the dicts, and the
agent helper takes struct messages too.
"""

from __future__ import annotations

import pytest

from sessiond_client import AgentSession, InvalidEntryError, SessiondClient
from sessiond_client.entries import (
    AssistantMessage,
    AssistantMessageInput,
    CustomMessageEntry,
    CustomMessageEntryInput,
    LabelEntryInput,
    MessageEntry,
    MessageEntryInput,
    TextContent,
    TokenUsage,
    ToolCall,
    ToolResultMessage,
    UnknownEntry,
    UserMessage,
    entry_json,
    parse_entry,
    parse_message,
)

from .helpers import message, user


def _answer(text: str, *, call: str | None = None) -> AssistantMessageInput:
    tool_calls = [ToolCall(id=call, name="read", arguments={"path": "a.py"})] if call else []
    return AssistantMessageInput(
        content=[TextContent(text=text), *tool_calls],
        api="anthropic-messages",
        provider="anthropic",
        model="claude-test",
        usage=TokenUsage(input=100, output=50, cache_read=0, cache_write=0, total_tokens=150),
        stop_reason="toolUse" if call else "stop",
        timestamp=1767225600000,
    )


async def test_struct_entries_append_and_read_back_typed(
    client: SessiondClient, project: str
) -> None:
    sid = (await client.new_session(cwd=project)).session_id
    appended = await client.append(
        sid,
        [
            MessageEntryInput(message=UserMessage(content="read a.py", timestamp=1767225600000)),
            MessageEntryInput(message=_answer("reading", call="call-1")),
            MessageEntryInput(
                message=ToolResultMessage(
                    tool_call_id="call-1",
                    tool_name="read",
                    content=[TextContent(text="print('hi')")],
                    is_error=False,
                )
            ),
            CustomMessageEntryInput(custom_type="note", content="remember", display=False),
        ],
    )
    await client.append(sid, [LabelEntryInput(target_id=appended.ids[0], label="start")])

    stored = (await client.path(sid)).entries
    # On the wire a struct is exactly its JSON: camelCase, no unset optionals.
    assert stored[1]["message"]["stopReason"] == "toolUse"
    assert stored[1]["message"]["usage"]["totalTokens"] == 150
    assert "errorMessage" not in stored[1]["message"]
    typed = [parse_entry(entry) for entry in stored]
    assert [type(entry) for entry in typed[:4]] == [
        MessageEntry,
        MessageEntry,
        MessageEntry,
        CustomMessageEntry,
    ]
    assert isinstance(typed[1], MessageEntry) and isinstance(typed[1].message, AssistantMessage)
    assert typed[1].message.usage.total_tokens == 150
    assert isinstance(typed[1].message.content[1], ToolCall)
    assert typed[1].id == appended.ids[1] and typed[1].parent_id == appended.ids[0]

    context = await client.build_context(sid, format="llm")
    roles = [type(parse_message(m)) for m in context.messages]
    assert roles == [UserMessage, AssistantMessage, ToolResultMessage, UserMessage]


async def test_a_dict_keeps_fields_the_types_do_not_list(
    client: SessiondClient, project: str
) -> None:
    sid = (await client.new_session(cwd=project)).session_id
    body = message({**user("hi"), "futureField": {"x": 1}})
    assert entry_json(body) == body
    await client.append(sid, [body])
    (stored,) = (await client.path(sid)).entries
    assert stored["message"]["futureField"] == {"x": 1}
    assert isinstance(parse_entry(stored), MessageEntry)
    # What the types cannot read stays readable, as the daemon reads files.
    odd = parse_entry({"type": "from_a_newer_pi", "id": "e1", "parentId": None, "timestamp": "t"})
    assert isinstance(odd, UnknownEntry) and odd.type == "from_a_newer_pi"
    with pytest.raises(ValueError):
        parse_entry({"type": "message"})


async def test_an_assistant_message_without_api_is_refused(
    client: SessiondClient, project: str
) -> None:
    sid = (await client.new_session(cwd=project)).session_id
    loose = AssistantMessage(
        content=[TextContent(text="hi")],
        provider="anthropic",
        model="claude-test",
        usage=TokenUsage(input=1, output=1, cache_read=0, cache_write=0, total_tokens=2),
        stop_reason="stop",
    )
    with pytest.raises(InvalidEntryError) as refused:
        await client.append(sid, [message(entry_json(loose))])
    assert "`api`" in str(refused.value)
    assert refused.value.details["index"] == 0


async def test_the_agent_helper_records_struct_messages(
    client: SessiondClient, project: str
) -> None:
    sid = (await client.new_session(cwd=project)).session_id
    agent = AgentSession(client, sid)
    await agent.record(UserMessage(content="hi", timestamp=1767225600000))
    await agent.record(_answer("hello"))
    assert agent.model is not None and agent.model.model_id == "claude-test"
    entries = [parse_entry(e) for e in (await client.path(sid)).entries]
    assert [type(e.message) for e in entries if isinstance(e, MessageEntry)] == [
        UserMessage,
        AssistantMessage,
    ]
