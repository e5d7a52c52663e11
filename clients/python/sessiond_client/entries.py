"""Typed entries and messages: the session file format's types, generated from the schema.

Results carry entries and messages as the JSON the session file holds (plain
``dict``s, so every field arrives, known or not). ``parse_entry`` and
``parse_message`` read one into its type; what the types cannot hold (an entry type
from a newer pi, a malformed line another program wrote) becomes an ``UnknownEntry`` /
``UnknownMessage`` rather than an error. To append, ``SessiondClient.append`` takes
``*EntryInput`` structs (typed: the constructor checks the fields) as well as plain
dicts::

    await client.append(sid, [MessageEntryInput(message=UserMessage(content="hi"))])

These are ``protocol/schema.json``'s ``$defs`` (``Entry``, ``AgentMessage``,
``EntryInput``, ``MessageInput``...), from ``sessiond_client.protocol``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

import msgspec

from .protocol import (
    AgentMessage,
    AssistantContentBlock,
    AssistantMessage,
    AssistantMessageInput,
    BashExecutionMessage,
    BranchSummaryEntry,
    BranchSummaryEntryInput,
    BranchSummaryMessage,
    CompactionEntry,
    CompactionEntryInput,
    CompactionSummaryMessage,
    ContextEditEntry,
    ContextEditEntryInput,
    ContextReplacement,
    Cost,
    CredentialPinEntry,
    CredentialPinEntryInput,
    CustomEntry,
    CustomEntryInput,
    CustomMessage,
    CustomMessageEntry,
    CustomMessageEntryInput,
    DeveloperMessage,
    EntryInput,
    FileMentionMessage,
    HookMessage,
    ImageContent,
    LabelEntry,
    LabelEntryInput,
    LlmMessage,
    McpToolSelectionEntry,
    McpToolSelectionEntryInput,
    MessageEntry,
    MessageEntryInput,
    MessageInput,
    ModeChangeEntry,
    ModeChangeEntryInput,
    ModelChangeEntry,
    ModelChangeEntryInput,
    ModelUsageEntry,
    ModelUsageEntryInput,
    PythonExecutionMessage,
    RedactedThinkingContent,
    ResetBoundaryEntry,
    ResetBoundaryEntryInput,
    ServiceTierChangeEntry,
    ServiceTierChangeEntryInput,
    SessionHeader,
    SessionInfoEntry,
    SessionInfoEntryInput,
    SessionInitEntry,
    SessionInitEntryInput,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ThinkingLevelChangeEntry,
    ThinkingLevelChangeEntryInput,
    TitleChangeEntry,
    TitleChangeEntryInput,
    TokenUsage,
    ToolCall,
    ToolResultMessage,
    TtsrInjectionEntry,
    TtsrInjectionEntryInput,
    UsageEntry,
    UsageEntryInput,
    UserContentBlock,
    UserMessage,
)
from .protocol import Entry as KnownEntry


class UnknownEntry(msgspec.Struct, kw_only=True):
    """An entry the types do not cover: its place in the tree, and its JSON as it is."""

    type: str
    id: str
    parent_id: str | None
    timestamp: str
    data: dict[str, Any]


class UnknownMessage(msgspec.Struct, kw_only=True):
    """A message the types do not cover: its role (or ""), and its JSON as it is."""

    role: str
    data: dict[str, Any]


# An entry read with parse_entry: a known type, or one the types do not cover.
StoredEntry: TypeAlias = KnownEntry | UnknownEntry
AnyMessage: TypeAlias = AgentMessage | UnknownMessage


def parse_entry(entry: Mapping[str, Any]) -> StoredEntry:
    """A stored entry (from ``entries``, ``path``, ``entry``, hooks...) as its type.

    Raises ``ValueError`` for an object without a string ``id``, which no result holds.
    """
    data = dict(entry)
    entry_id = data.get("id")
    if not isinstance(entry_id, str):
        raise ValueError("an entry needs a string id")
    try:
        known: KnownEntry = msgspec.convert(data, KnownEntry)
        return known
    except msgspec.ValidationError:
        pass
    kind, parent_id, timestamp = data.get("type"), data.get("parentId"), data.get("timestamp")
    return UnknownEntry(
        type=kind if isinstance(kind, str) else "",
        id=entry_id,
        parent_id=parent_id if isinstance(parent_id, str) else None,
        timestamp=timestamp if isinstance(timestamp, str) else "",
        data=data,
    )


def parse_message(message: Mapping[str, Any]) -> AnyMessage:
    """A message (from ``build_context``, a ``message`` entry, hooks...) as its type."""
    data = dict(message)
    try:
        known: AgentMessage = msgspec.convert(data, AgentMessage)
        return known
    except msgspec.ValidationError:
        role = data.get("role")
        return UnknownMessage(role=role if isinstance(role, str) else "", data=data)


def entry_json(entry: EntryInput | Mapping[str, Any]) -> dict[str, Any]:
    """An entry to append as the JSON object ``session/append`` takes."""
    if isinstance(entry, msgspec.Struct):
        built = msgspec.to_builtins(entry)
        assert isinstance(built, dict)
        return built
    return dict(entry)


def message_json(message: MessageInput | Mapping[str, Any]) -> dict[str, Any]:
    """A message to append as a JSON object."""
    if isinstance(message, msgspec.Struct):
        built = msgspec.to_builtins(message)
        assert isinstance(built, dict)
        return built
    return dict(message)


__all__ = [
    "AgentMessage",
    "AnyMessage",
    "AssistantContentBlock",
    "AssistantMessage",
    "AssistantMessageInput",
    "BashExecutionMessage",
    "BranchSummaryEntry",
    "BranchSummaryEntryInput",
    "BranchSummaryMessage",
    "CompactionEntry",
    "CompactionEntryInput",
    "CompactionSummaryMessage",
    "ContextEditEntry",
    "ContextEditEntryInput",
    "ContextReplacement",
    "Cost",
    "CredentialPinEntry",
    "CredentialPinEntryInput",
    "CustomEntry",
    "CustomEntryInput",
    "CustomMessage",
    "CustomMessageEntry",
    "CustomMessageEntryInput",
    "DeveloperMessage",
    "EntryInput",
    "FileMentionMessage",
    "HookMessage",
    "ImageContent",
    "KnownEntry",
    "LabelEntry",
    "LabelEntryInput",
    "LlmMessage",
    "McpToolSelectionEntry",
    "McpToolSelectionEntryInput",
    "MessageEntry",
    "MessageEntryInput",
    "MessageInput",
    "ModeChangeEntry",
    "ModeChangeEntryInput",
    "ModelChangeEntry",
    "ModelChangeEntryInput",
    "ModelUsageEntry",
    "ModelUsageEntryInput",
    "PythonExecutionMessage",
    "RedactedThinkingContent",
    "ResetBoundaryEntry",
    "ResetBoundaryEntryInput",
    "ServiceTierChangeEntry",
    "ServiceTierChangeEntryInput",
    "SessionHeader",
    "SessionInfoEntry",
    "SessionInfoEntryInput",
    "SessionInitEntry",
    "SessionInitEntryInput",
    "StoredEntry",
    "SystemMessage",
    "TextContent",
    "ThinkingContent",
    "ThinkingLevelChangeEntry",
    "ThinkingLevelChangeEntryInput",
    "TitleChangeEntry",
    "TitleChangeEntryInput",
    "TokenUsage",
    "ToolCall",
    "ToolResultMessage",
    "TtsrInjectionEntry",
    "TtsrInjectionEntryInput",
    "UnknownEntry",
    "UnknownMessage",
    "UsageEntry",
    "UsageEntryInput",
    "UserContentBlock",
    "UserMessage",
    "entry_json",
    "message_json",
    "parse_entry",
    "parse_message",
]
