from sessiond.core.messages import (
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from sessiond.core.tool_pairs import orphaned_tool_messages

from ..builders import usage


def call(*ids):
    return AssistantMessage(
        content=[ToolCall(id=i, name="bash", arguments={}) for i in ids],
        provider="p",
        model="m",
        usage=usage(),
        stop_reason="toolUse",
    )


def result(call_id):
    return ToolResultMessage(
        tool_call_id=call_id, tool_name="bash", content=[TextContent(text="x")], is_error=False
    )


def test_paired_calls_give_no_warnings():
    messages = [
        UserMessage(content="go"),
        call("a", "b"),
        result("b"),
        result("a"),
        UserMessage(content="next"),
    ]
    assert orphaned_tool_messages(messages, [None] * 5) == []


def test_missing_result_and_stray_result_are_named():
    messages = [
        UserMessage(content="go"),
        call("a", "b"),
        result("a"),
        UserMessage(content="next"),
        result("zzz"),
    ]
    warnings = orphaned_tool_messages(messages, ["u", "e1", "e2", "u2", "e3"])
    assert warnings == [
        "tool call b (entry e1) has no result",
        "tool result for zzz (entry e3) has no tool call",
    ]


def test_call_left_open_at_the_end():
    assert orphaned_tool_messages([call("a")], ["e1"]) == ["tool call a (entry e1) has no result"]
