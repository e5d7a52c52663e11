"""Tool calls without results, and results without calls, in a provider-ready context.

Providers reject a tool call that has no result before the next turn, and a
result whose call is missing. pi's provider layer patches the first with
synthetic results at request time; sessiond reports both (``context/build``
``warnings``) so the client can see a session that was cut or edited badly.
"""

from __future__ import annotations

from collections.abc import Sequence

from .convert import LlmMessage
from .messages import AssistantMessage, ToolCall, ToolResultMessage, UserMessage


def orphaned_tool_messages(
    messages: Sequence[LlmMessage], entry_ids: Sequence[str | None]
) -> list[str]:
    """Human-readable warnings, naming the entries involved."""
    warnings: list[str] = []
    open_calls: dict[str, str | None] = {}
    known_calls: set[str] = set()

    def close_batch() -> None:
        for call_id, entry_id in open_calls.items():
            where = f" (entry {entry_id})" if entry_id else ""
            warnings.append(f"tool call {call_id}{where} has no result")
        open_calls.clear()

    for message, entry_id in zip(messages, entry_ids, strict=True):
        if isinstance(message, AssistantMessage):
            close_batch()
            for block in message.content:
                if isinstance(block, ToolCall):
                    open_calls[block.id] = entry_id
                    known_calls.add(block.id)
        elif isinstance(message, ToolResultMessage):
            if message.tool_call_id in open_calls:
                del open_calls[message.tool_call_id]
            elif message.tool_call_id not in known_calls:
                where = f" (entry {entry_id})" if entry_id else ""
                warnings.append(f"tool result for {message.tool_call_id}{where} has no tool call")
        elif isinstance(message, UserMessage):
            close_batch()
    close_batch()
    return warnings
