"""Typed entries and messages: the session file format's own types, the daemon's.

Results carry entries and messages as the JSON the session file holds (plain
``dict``s, so every field arrives, known or not). ``parse_entry`` and
``parse_message`` read one into its type the way the daemon reads a file: what
the types cannot hold becomes an ``UnknownEntry`` / ``UnknownMessage`` rather
than an error. To append, ``SessiondClient.append`` takes ``*EntryInput``
structs (typed: the constructor checks the fields) as well as plain dicts::

    await client.append(sid, [MessageEntryInput(message=UserMessage(content="hi"))])

These are the types ``protocol/schema.json`` is generated from (its ``$defs``
``Entry``, ``AgentMessage``, ``EntryInput``, ``MessageInput``...).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

import msgspec

from sessiond.core.decode import entry_from_dict, message_from_dict
from sessiond.core.entries import (
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    KnownEntry,
    LabelEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionHeader,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    UnknownEntry,
)
from sessiond.core.messages import (
    AgentMessage,
    AnyMessage,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    Cost,
    CustomMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownMessage,
    UserMessage,
)
from sessiond.core.messages import Usage as TokenUsage
from sessiond.rpc.entry_types import (
    AssistantMessageInput,
    BranchSummaryEntryInput,
    CompactionEntryInput,
    CustomEntryInput,
    CustomMessageEntryInput,
    EntryInput,
    LabelEntryInput,
    MessageEntryInput,
    MessageInput,
    ModelChangeEntryInput,
    SessionInfoEntryInput,
    ThinkingLevelChangeEntryInput,
)

# An entry read with parse_entry: a known type, or one the types do not cover.
StoredEntry: TypeAlias = KnownEntry | UnknownEntry


def parse_entry(entry: Mapping[str, Any]) -> StoredEntry:
    """A stored entry (from ``entries``, ``path``, ``entry``, hooks...) as its type.

    Raises ``ValueError`` for an object without a string ``id``, which no result holds.
    """
    return entry_from_dict(dict(entry))


def parse_message(message: Mapping[str, Any]) -> AnyMessage:
    """A message (from ``build_context``, a ``message`` entry, hooks...) as its type."""
    return message_from_dict(dict(message))


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
    "AssistantMessage",
    "AssistantMessageInput",
    "BashExecutionMessage",
    "BranchSummaryEntry",
    "BranchSummaryEntryInput",
    "BranchSummaryMessage",
    "CompactionEntry",
    "CompactionEntryInput",
    "CompactionSummaryMessage",
    "Cost",
    "CustomEntry",
    "CustomEntryInput",
    "CustomMessage",
    "CustomMessageEntry",
    "CustomMessageEntryInput",
    "EntryInput",
    "ImageContent",
    "KnownEntry",
    "LabelEntry",
    "LabelEntryInput",
    "MessageEntry",
    "MessageEntryInput",
    "MessageInput",
    "ModelChangeEntry",
    "ModelChangeEntryInput",
    "SessionHeader",
    "SessionInfoEntry",
    "SessionInfoEntryInput",
    "StoredEntry",
    "TextContent",
    "ThinkingContent",
    "ThinkingLevelChangeEntry",
    "ThinkingLevelChangeEntryInput",
    "TokenUsage",
    "ToolCall",
    "ToolResultMessage",
    "UnknownEntry",
    "UnknownMessage",
    "UserMessage",
    "entry_json",
    "message_json",
    "parse_entry",
    "parse_message",
]
