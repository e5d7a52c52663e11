"""One-line human descriptions of entries and messages (tree previews, the CLI)."""

from __future__ import annotations

from sessiond.core.entries import (
    BranchSummaryEntry,
    CompactionEntry,
    ContextEditEntry,
    CustomEntry,
    CustomMessageEntry,
    Entry,
    LabelEntry,
    MessageEntry,
    ModelChangeEntry,
    ResetBoundaryEntry,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    TitleChangeEntry,
    UnknownEntry,
    UsageEntry,
    entry_type,
)
from sessiond.core.inert import inert
from sessiond.core.messages import (
    AnyMessage,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UnknownMessage,
    UserMessage,
    text_of_blocks,
)


def shorten(text: str, width: int = 72) -> str:
    """One line of at most ``width`` characters, inert (``inert``): previews quote files."""
    flat = inert(" ".join(text.split()))
    return flat if len(flat) <= width else flat[: width - 1] + "\u2026"


def describe_message(message: AnyMessage, width: int = 72) -> str:
    """A one-line description of a message, inert (see ``describe_entry``)."""
    return inert(_describe_message(message, width))


def _describe_message(message: AnyMessage, width: int) -> str:
    """``role: preview`` for one message."""
    if isinstance(message, UserMessage):
        return f"user: {shorten(text_of_blocks(message.content), width)}"
    if isinstance(message, AssistantMessage):
        text = " ".join(b.text for b in message.content if isinstance(b, TextContent))
        calls = [b for b in message.content if isinstance(b, ToolCall)]
        shown = shorten(text, width) if text else ""
        if calls:
            names = ", ".join(_call(c) for c in calls[:3]) + (" ..." if len(calls) > 3 else "")
            shown = f"{shown} -> {names}" if shown else f"-> {names}"
        if message.stop_reason in ("error", "aborted"):
            shown = f"[{message.stop_reason}] {shorten(message.error_message or '', 40)} {shown}"
        return f"assistant: {shown.strip()}"
    if isinstance(message, ToolResultMessage):
        text = text_of_blocks(message.content)
        flag = " (error)" if message.is_error else ""
        pruned = " (pruned)" if message.pruned_at is not None else ""
        return f"toolResult {message.tool_name}{flag}{pruned}: {shorten(text, width)}"
    if isinstance(message, BashExecutionMessage):
        return f"bash: $ {shorten(message.command, width)}"
    if isinstance(message, SystemMessage):
        return f"system: {shorten(_system_summary(message), width)}"
    if isinstance(message, CustomMessage):
        return f"custom {message.custom_type}: {shorten(text_of_blocks(message.content), width)}"
    if isinstance(message, CompactionSummaryMessage):
        return f"compactionSummary: {shorten(message.summary, width)}"
    if isinstance(message, BranchSummaryMessage):
        return f"branchSummary: {shorten(message.summary, width)}"
    if isinstance(message, UnknownMessage):
        return f"{message.role or '?'}: (a message sessiond does not know)"
    return f"{type(message).__name__}"


def _system_summary(message: SystemMessage) -> str:
    content = message.content
    text = content if isinstance(content, str) else " ".join(block.text for block in content)
    changes = [f"section {name}" for name in message.sections or {}]
    changes += [f"+{tool.get('name')}" for tool in message.tools_added or []]
    changes += [f"-{tool.get('name')}" for tool in message.tools_removed or []]
    return " ".join(part for part in (text, ", ".join(changes)) if part) or "(empty)"


def _call(call: ToolCall) -> str:
    path = call.arguments.get("path") or call.arguments.get("command")
    return f"{call.name}({shorten(str(path), 30)})" if path else f"{call.name}()"


def describe_entry(entry: Entry, width: int = 72) -> str:
    """A one-line description of an entry (a tree row's preview), inert: every field of it
    comes from the file."""
    return inert(_describe(entry, width))


def _describe(entry: Entry, width: int) -> str:
    if isinstance(entry, MessageEntry):
        return _describe_message(entry.message, width)
    if isinstance(entry, CompactionEntry):
        return f"compaction ({entry.tokens_before:,} tokens before): {shorten(entry.summary, 48)}"
    if isinstance(entry, BranchSummaryEntry):
        return f"branch summary: {shorten(entry.summary, width)}"
    if isinstance(entry, ModelChangeEntry):
        model = entry.model or f"{entry.provider}/{entry.model_id}"
        return f"model -> {model}" + (f" ({entry.role})" if entry.role else "")
    if isinstance(entry, ThinkingLevelChangeEntry):
        return f"thinking -> {entry.thinking_level or 'off'}"
    if isinstance(entry, LabelEntry):
        return (
            f"label {entry.target_id} = {entry.label!r}"
            if entry.label
            else f"unlabel {entry.target_id}"
        )
    if isinstance(entry, SessionInfoEntry):
        return f"name = {entry.name!r}"
    if isinstance(entry, TitleChangeEntry):
        return f"name = {entry.title!r} ({entry.source})"
    if isinstance(entry, ResetBoundaryEntry):
        return "/clear: the context starts after this"
    if isinstance(entry, CustomMessageEntry):
        return (
            f"custom message {entry.custom_type}: "
            f"{shorten(text_of_blocks(entry.content or []), width)}"
        )
    if isinstance(entry, ContextEditEntry):
        if entry.replacement is None:
            return f"context edit: omit {entry.target_id}"
        content = entry.replacement.content
        text = (
            content
            if isinstance(content, str)
            else " ".join(b.text for b in content if isinstance(b, TextContent))
        )
        return f"context edit: replace {entry.target_id} with {shorten(text, width - 30)}"
    if isinstance(entry, UsageEntry):
        tokens = entry.usage.total_tokens
        return f"usage {entry.kind}: {tokens:,} tokens ({entry.provider}/{entry.model})"
    if isinstance(entry, CustomEntry):
        return f"custom {entry.custom_type}"
    if isinstance(entry, UnknownEntry):
        return f"{entry.type or '?'} (not understood; kept as is)"
    return entry_type(entry).replace("_", " ")
