"""oh-my-pi's context rules (``core.omp_context``), each on a small path.

The parity tests (``tests/parity/test_parity_omp.py``) hold these rules to oh-my-pi's own
code; these say what each rule is, and run where oh-my-pi is not installed."""

from __future__ import annotations

from typing import Any

from sessiond.core.decode import entry_from_dict
from sessiond.core.dialect import OMP, PI
from sessiond.core.entries import Entry
from sessiond.core.messages import (
    AssistantMessage,
    CompactionSummaryMessage,
    CustomMessage,
    DeveloperMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    UserMessage,
    message_role,
)
from sessiond.core.omp_context import omp_context_from_path
from sessiond.core.omp_convert import omp_convert_to_llm_tracked

USAGE = {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15}


class Path:
    """Builds a linear path of typed entries, each a child of the one before."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []

    def add(self, kind: str, **fields: Any) -> str:
        entry_id = f"e{len(self.entries):03d}"
        parent = self.entries[-1].id if self.entries else None
        data = {
            "type": kind,
            "id": entry_id,
            "parentId": parent,
            "timestamp": f"2026-09-27T10:00:{len(self.entries):02d}.000Z",
            **fields,
        }
        self.entries.append(entry_from_dict(data))
        return entry_id

    def user(self, text: str) -> str:
        return self.add("message", message={"role": "user", "content": text})

    def answer(self, *blocks: dict[str, Any], stop: str = "stop", **extra: Any) -> str:
        return self.add(
            "message",
            message={
                "role": "assistant",
                "content": list(blocks),
                "api": "anthropic-messages",
                "provider": "anthropic",
                "model": "claude",
                "usage": USAGE,
                "stopReason": stop,
                **extra,
            },
        )

    def result(self, call: str) -> str:
        return self.add(
            "message",
            message={
                "role": "toolResult",
                "toolCallId": call,
                "toolName": "read",
                "content": [{"type": "text", "text": "out"}],
                "isError": False,
            },
        )

    def roles(self) -> list[str]:
        return [message_role(m) for m in omp_context_from_path(self.entries).messages]


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def call(call_id: str) -> dict[str, Any]:
    return {"type": "toolCall", "id": call_id, "name": "read", "arguments": {}}


def test_a_reset_boundary_after_the_compaction_starts_the_context():
    path = Path()
    kept = path.user("before")
    path.answer(text("a"))
    path.add("compaction", summary="S", firstKeptEntryId=kept, tokensBefore=100)
    path.user("after the compaction")
    path.add("reset_boundary")
    path.user("after the clear")
    context = omp_context_from_path(path.entries)
    assert [m.content for m in context.messages] == ["after the clear"]  # type: ignore[union-attr]
    # pi's rules know no reset boundary: the summary and both user messages are there.
    assert len(PI.context_from_path(path.entries).messages) == 5


def test_a_reset_boundary_before_the_compaction_is_superseded():
    path = Path()
    path.user("before")
    path.add("reset_boundary")
    kept = path.user("kept")
    path.add("compaction", summary="S", firstKeptEntryId=kept, tokensBefore=100)
    path.user("after")
    assert path.roles() == ["compactionSummary", "user", "user"]


def test_the_summary_message_carries_the_display_fields():
    path = Path()
    kept = path.user("q")
    path.add(
        "compaction",
        summary="S",
        shortSummary="short",
        firstKeptEntryId=kept,
        tokensBefore=100,
        tokensAfter=40,
        method="handoff",
        warning="little freed",
    )
    summary = omp_context_from_path(path.entries).messages[0]
    assert isinstance(summary, CompactionSummaryMessage)
    assert (summary.short_summary, summary.tokens_after, summary.method, summary.warning) == (
        "short",
        40,
        "handoff",
        "little freed",
    )


def test_a_failed_turn_goes_with_its_tool_results():
    path = Path()
    path.user("run it")
    path.answer(call("c1"), stop="error", errorMessage="overloaded")
    path.result("c1")
    path.user("again")
    assert path.roles() == ["user", "user"]


def test_an_interrupted_answer_stays_when_the_note_follows_it():
    path = Path()
    path.user("think")
    path.answer({"type": "thinking", "thinking": "hm"}, stop="aborted")
    path.add(
        "custom_message",
        customType="interrupted-thinking",
        content="interrupted",
        display=False,
    )
    assert path.roles() == ["user", "assistant", "custom"]


def test_retried_and_empty_failed_answers_give_nothing():
    path = Path()
    path.user("q")
    path.answer(text("partial"), stop="error", retryRecovery={"kind": "auto-retry"})
    path.answer(text("   "), stop="error")
    path.answer(text("final"))
    assert path.roles() == ["user", "assistant"]


def test_unanswered_tool_calls_are_stripped_with_thinking_signatures():
    path = Path()
    path.user("read two")
    path.answer(
        {"type": "redactedThinking", "data": "opaque"},
        {"type": "thinking", "thinking": "two", "thinkingSignature": "sig"},
        call("c1"),
        call("c2"),
        stop="toolUse",
    )
    path.result("c1")
    path.answer(call("lonely"), stop="toolUse")
    context = omp_context_from_path(path.entries)
    answer = context.messages[1]
    assert isinstance(answer, AssistantMessage)
    assert [type(b).__name__ for b in answer.content] == ["ThinkingContent", "ToolCall"]
    assert isinstance(answer.content[0], ThinkingContent)
    assert answer.content[0].thinking_signature is None
    assert context.kept_blocks == {1: (1, 2)}
    # the last answer held only an unanswered call: it is gone
    assert [message_role(m) for m in context.messages] == ["user", "assistant", "toolResult"]


def test_context_notes_come_first_unless_a_clear_follows_them():
    path = Path()
    path.user("q")
    path.add("custom", customType="experimental_context_notes", data={"version": 1, "text": "N1"})
    path.add("custom", customType="experimental_context_notes", data={"version": 1, "x": 1})
    context = omp_context_from_path(path.entries)
    notes = context.messages[0]
    assert isinstance(notes, CustomMessage) and "N1" in str(notes.content)
    assert context.entry_ids[0] == "e001"
    path.add("reset_boundary")
    path.user("fresh")
    assert path.roles() == ["user"]


def test_the_model_is_restored_by_role():
    path = Path()
    path.answer(text("a"))  # names the default model until a change does
    assert _model(path) == ("anthropic", "claude")
    path.add("model_change", model="openai/gpt-5")
    path.add("model_change", model="openai/gpt-5-mini", role="smol")
    assert _model(path) == ("openai", "gpt-5-mini")
    path.add("model_change", model="openai/o3", role="fallback")
    assert _model(path) == ("openai", "gpt-5")
    path.answer(text("from another model"))
    assert _model(path) == ("openai", "gpt-5")


def _model(path: Path) -> tuple[str, str] | None:
    model = omp_context_from_path(path.entries).model
    return (model.provider, model.model_id) if model is not None else None


def test_custom_messages_are_developer_messages_in_the_provider_form():
    messages = [
        CustomMessage(custom_type="note", content="a note", display=True),
        CustomMessage(
            custom_type="skill-prompt", content="/skill", display=True, attribution="user"
        ),
        UserMessage(
            content=[
                TextContent(text="look"),
                ImageContent(data="blob:sha256:" + "ab" * 32, mime_type="image/png"),
            ]
        ),
        CompactionSummaryMessage(summary="S", tokens_before=1, method="handoff"),
    ]
    converted = omp_convert_to_llm_tracked(messages)
    assert [type(m).__name__ for m, _, _ in converted] == [
        "DeveloperMessage",
        "UserMessage",
        "UserMessage",
        "UserMessage",
    ]
    assert isinstance(converted[0][0], DeveloperMessage)
    image_note = converted[2][0]
    assert isinstance(image_note, UserMessage) and not isinstance(image_note.content, str)
    assert isinstance(image_note.content[1], TextContent)
    assert "blob store" in image_note.content[1].text
    assert converted[2][2] is False  # not the stored message: it is sent changed
    handoff = converted[3][0]
    assert isinstance(handoff, UserMessage) and "<handoff>" in str(handoff.content)
    # pi's form of the same custom message is a user message
    assert isinstance(PI.provider_form(messages[:1])[0][0], UserMessage)
    assert isinstance(OMP.provider_form(messages[:1])[0][0], DeveloperMessage)
