"""pi's serializeConversation: the conversation as plain text for a summarizer.

Each message becomes labelled parts (``[User]: ...``, ``[Assistant]: ...``,
``[Assistant tool calls]: ...``, ``[Tool result]: ...``) joined by blank lines.
Thinking is left out (pi 1.2 on): it is a provider's summary of the reasoning, often
not part of the live context, and can make the request larger than what it summarizes.
System messages are prompt state, not conversation: left out too.
Tool results are cut to 2000 characters, counted as JavaScript counts them,
so that one huge output cannot crowd out the rest of the conversation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from .convert import LlmMessage
from .jsjson import js_stringify, utf16_length
from .messages import (
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

TOOL_RESULT_CHAR_LIMIT: Final = 2000


def serialize_conversation(
    messages: Sequence[LlmMessage], tool_result_limit: int = TOOL_RESULT_CHAR_LIMIT
) -> str:
    parts: list[str] = []
    for message in messages:
        if isinstance(message, UserMessage):
            text = (
                message.content
                if isinstance(message.content, str)
                else "".join(b.text for b in message.content if isinstance(b, TextContent))
            )
            if text:
                parts.append(f"[User]: {text}")
        elif isinstance(message, AssistantMessage):
            texts = [b.text for b in message.content if isinstance(b, TextContent)]
            calls = [b for b in message.content if isinstance(b, ToolCall)]
            if texts:
                parts.append("[Assistant]: " + "\n".join(texts))
            if calls:
                parts.append("[Assistant tool calls]: " + "; ".join(_call(c) for c in calls))
        elif isinstance(message, ToolResultMessage):
            text = "".join(b.text for b in message.content if isinstance(b, TextContent))
            if text:
                parts.append("[Tool result]: " + truncate_for_summary(text, tool_result_limit))
        # Developer messages are instructions to the agent, not conversation: skipped.
    return "\n\n".join(parts)


def _call(call: ToolCall) -> str:
    arguments = ", ".join(f"{key}={js_stringify(value)}" for key, value in call.arguments.items())
    return f"{call.name}({arguments})"


def truncate_for_summary(text: str, limit: int) -> str:
    """The first ``limit`` characters (UTF-16 units, as pi counts) and a note of the rest."""
    total = utf16_length(text)
    if total <= limit:
        return text
    kept = _utf16_prefix(text, limit)
    return f"{kept}\n\n[... {total - limit} more characters truncated]"


def _utf16_prefix(text: str, units: int) -> str:
    if text.isascii():
        return text[:units]
    used = 0
    for index, char in enumerate(text):
        used += 2 if ord(char) > 0xFFFF else 1
        if used > units:
            return text[:index]
    return text
