"""Small builders of typed entries and messages for tests (pure data, no I/O)."""

from __future__ import annotations

from typing import Any

from sessiond.core.entries import (
    BranchSummaryEntry,
    CompactionEntry,
    ContextEditEntry,
    ContextReplacement,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    MessageEntry,
    ModelChangeEntry,
    ThinkingLevelChangeEntry,
    UsageEntry,
)
from sessiond.core.messages import (
    AssistantMessage,
    SystemMessage,
    TextContent,
    TokenUsage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

_clock = [0]


def ts() -> str:
    """Increasing ISO timestamps, one second apart."""
    _clock[0] += 1
    seconds = _clock[0]
    return f"2026-01-01T{seconds // 3600 % 24:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.000Z"


def usage(
    input: int = 100, output: int = 50, cache_read: int = 0, cache_write: int = 0
) -> TokenUsage:
    return TokenUsage(
        input=input,
        output=output,
        cache_read=cache_read,
        cache_write=cache_write,
        total_tokens=input + output + cache_read + cache_write,
    )


def user(entry_id: str, parent: str | None, text: str) -> MessageEntry:
    return MessageEntry(entry_id, parent, ts(), message=UserMessage(content=text, timestamp=1))


def assistant(
    entry_id: str,
    parent: str | None,
    text: str = "ok",
    *,
    provider: str = "anthropic",
    model: str = "claude-test",
    stop_reason: str = "stop",
    the_usage: TokenUsage | None = None,
    tool_calls: list[ToolCall] | None = None,
    error_message: str | None = None,
) -> MessageEntry:
    content: list[Any] = [TextContent(text=text)] if text else []
    content += tool_calls or []
    return MessageEntry(
        entry_id,
        parent,
        ts(),
        message=AssistantMessage(
            content=content,
            api="anthropic-messages",
            provider=provider,
            model=model,
            usage=the_usage or usage(),
            stop_reason=stop_reason,
            error_message=error_message,
            timestamp=2,
        ),
    )


def tool_result(
    entry_id: str, parent: str | None, text: str, *, tool: str = "bash", call_id: str = "c1"
) -> MessageEntry:
    return MessageEntry(
        entry_id,
        parent,
        ts(),
        message=ToolResultMessage(
            tool_call_id=call_id,
            tool_name=tool,
            content=[TextContent(text=text)],
            is_error=False,
            timestamp=3,
        ),
    )


def compaction(
    entry_id: str, parent: str | None, summary: str, first_kept: str, tokens_before: int = 1000
) -> CompactionEntry:
    return CompactionEntry(
        entry_id,
        parent,
        ts(),
        summary=summary,
        first_kept_entry_id=first_kept,
        tokens_before=tokens_before,
    )


def branch_summary(
    entry_id: str, parent: str | None, summary: str, from_id: str
) -> BranchSummaryEntry:
    return BranchSummaryEntry(entry_id, parent, ts(), from_id=from_id, summary=summary)


def thinking(entry_id: str, parent: str | None, level: str | None) -> ThinkingLevelChangeEntry:
    return ThinkingLevelChangeEntry(entry_id, parent, ts(), thinking_level=level)


def model_change(
    entry_id: str, parent: str | None, provider: str, model_id: str
) -> ModelChangeEntry:
    return ModelChangeEntry(entry_id, parent, ts(), provider=provider, model_id=model_id)


def label(entry_id: str, parent: str | None, target: str, text: str | None) -> LabelEntry:
    return LabelEntry(entry_id, parent, ts(), target_id=target, label=text)


def custom(entry_id: str, parent: str | None, custom_type: str = "state") -> CustomEntry:
    return CustomEntry(entry_id, parent, ts(), custom_type=custom_type, data={"k": 1})


def custom_message(entry_id: str, parent: str | None, text: str) -> CustomMessageEntry:
    return CustomMessageEntry(
        entry_id, parent, ts(), custom_type="note", content=text, display=True
    )


def context_edit(
    entry_id: str, parent: str | None, target: str, replacement: Any = None
) -> ContextEditEntry:
    """pi 1.6's edit of ``target``: omitted when ``replacement`` is None, else its content
    replaced (a string stays a string; pi's appendContextEdit wraps it for answers)."""
    return ContextEditEntry(
        entry_id,
        parent,
        ts(),
        target_id=target,
        replacement=None if replacement is None else ContextReplacement(content=replacement),
    )


def system(
    entry_id: str,
    parent: str | None,
    text: str = "",
    *,
    sections: dict[str, str | None] | None = None,
    tools_added: list[dict[str, Any]] | None = None,
    tools_removed: list[dict[str, Any]] | None = None,
) -> MessageEntry:
    return MessageEntry(
        entry_id,
        parent,
        ts(),
        message=SystemMessage(
            content=text,
            sections=sections,
            tools_added=tools_added,
            tools_removed=tools_removed,
            timestamp=4,
        ),
    )


def usage_entry(entry_id: str, parent: str | None, tokens: int = 500) -> UsageEntry:
    return UsageEntry(
        entry_id,
        parent,
        ts(),
        kind="cache_warm",
        provider="anthropic",
        model="claude-test",
        usage=usage(input=0, output=0, cache_read=tokens),
    )
