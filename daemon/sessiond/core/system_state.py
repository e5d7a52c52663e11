"""pi 1.6's system messages replayed: the current system prompt and tools at a point.

The leading system message is the system prompt; later ones append ``content``,
replace ``sections`` by name (``null`` removes one) and add or remove tools.
A compaction stores the replay of the context it compacts as its ``systemMessage``
checkpoint, so the compacted context still starts with the whole prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .messages import AnyMessage, Number, SystemMessage, TextContent


def system_text(content: str | list[TextContent]) -> str:
    """pi-ai's ``contentText``: the string, or the text blocks joined by newlines."""
    if isinstance(content, str):
        return content
    return "\n".join(block.text for block in content if isinstance(block, TextContent))


def current_tools(messages: Sequence[AnyMessage]) -> list[dict[str, Any]]:
    """The tools after every ``toolsRemoved`` / ``toolsAdded`` in order (by name)."""
    tools: dict[str, dict[str, Any]] = {}
    for message in messages:
        if not isinstance(message, SystemMessage):
            continue
        for removed in message.tools_removed or ():
            tools.pop(str(removed.get("name")), None)
        for added in message.tools_added or ():
            tools[str(added.get("name"))] = added
    return list(tools.values())


def current_system_message(
    messages: Sequence[AnyMessage], timestamp: Number | None = None
) -> SystemMessage | None:
    """pi-ai's ``getCurrentSystemMessage``: one system message holding the replayed state,
    or None when there is no system message and no tool. ``timestamp`` replaces the
    first system message's time (a compaction stamps its own)."""
    content: list[str] = []
    sections: dict[str, str] = {}
    first_time: Number | None = None
    seen = False
    for message in messages:
        if not isinstance(message, SystemMessage):
            continue
        if not seen:
            first_time = message.timestamp
            seen = True
        text = system_text(message.content)
        if text:
            content.append(text)
        for name, value in (message.sections or {}).items():
            if value is None:
                sections.pop(name, None)
            else:
                sections[name] = value
    tools = current_tools(messages)
    if not seen and not tools:
        return None
    return SystemMessage(
        content="\n\n".join(content),
        sections=dict(sections) if sections else None,
        tools_added=tools or None,
        timestamp=timestamp if timestamp is not None else (first_time or 0),
    )
