"""Context as JSON for clients: stored messages go out as their original JSON.

Re-encoding a decoded message would drop fields sessiond does not know (a
provider's replay data, a newer pi's additions). So a message that comes
straight from a ``message`` entry is sent as the bytes of that entry's
``message`` value; only messages sessiond builds itself (summaries, custom
messages, converted bash runs) are encoded from their types. A stored message
whose content a ``context_edit`` replaced, or whose content is null, goes out as
pi 1.6 gives it: the stored object with only ``content`` changed.
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec

from sessiond.core.context import SessionContext
from sessiond.core.convert import LlmMessage, convert_to_llm_tracked
from sessiond.core.encoding import to_json
from sessiond.core.messages import AnyMessage, AssistantMessage

from .session import SessionStore

ContextFormat = Literal["agent", "llm"]


_NULL_CONTENT: Final[dict[str, object]] = {
    "user": [],
    "assistant": [],
    "toolResult": [],
    "system": "",
}


def llm_messages(context: SessionContext) -> list[tuple[LlmMessage, str, bool, bool]]:
    """``convertToLlm`` of the context, minus failed answers: each message with the
    entry it came from, whether it is that entry's message unchanged, and whether a
    ``context_edit`` replaced its content.

    pi's provider layer never sends an assistant message that ended in an error
    or was aborted (an incomplete turn); the "llm" form leaves them out too, so
    a client retrying after an overflow sends what pi would.
    """
    return [
        (message, context.entry_ids[index], unchanged, index in context.edited)
        for message, index, unchanged in convert_to_llm_tracked(context.messages)
        if not (
            isinstance(message, AssistantMessage) and message.stop_reason in ("error", "aborted")
        )
    ]


def message_json(
    store: SessionStore, entry_id: str, message: AnyMessage, unchanged: bool, edited: bool = False
) -> bytes:
    """A message as JSON: a stored message's original bytes when it is unchanged."""
    if unchanged and store.record(entry_id).type == "message":
        return _stored_json(store.raw_message(store.record(entry_id)), message, edited)
    return to_json(message)


def _stored_json(raw: bytes, message: AnyMessage, edited: bool) -> bytes:
    """A stored message's JSON with its content as the context holds it (edited, or
    null read as pi 1.6 reads it); every other field as stored."""
    if not edited and b'"content":null' not in raw and b'"content"' in raw:
        return raw
    try:
        data = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return to_json(message)
    if not isinstance(data, dict):
        return raw
    role = data.get("role")
    if edited:
        data["content"] = msgspec.to_builtins(getattr(message, "content", None))
    elif data.get("content") is None and isinstance(role, str) and role in _NULL_CONTENT:
        data["content"] = _NULL_CONTENT[role]
    else:
        return raw
    return msgspec.json.encode(data)


def messages_json(store: SessionStore, context: SessionContext, fmt: ContextFormat) -> bytes:
    """The context's messages as a JSON array, in the requested form."""
    if fmt == "agent":
        parts = [
            message_json(store, entry_id, message, True, index in context.edited)
            for index, (message, entry_id) in enumerate(
                zip(context.messages, context.entry_ids, strict=True)
            )
        ]
    else:
        parts = [
            message_json(store, entry_id, message, unchanged, edited)
            for message, entry_id, unchanged, edited in llm_messages(context)
        ]
    return b"[" + b",".join(parts) + b"]"


def context_json(store: SessionStore, context: SessionContext, fmt: ContextFormat) -> bytes:
    """``{messages, thinkingLevel, model}`` as JSON."""
    model = msgspec.json.encode(context.model)
    thinking = msgspec.json.encode(context.thinking_level)
    return (
        b'{"messages":'
        + messages_json(store, context, fmt)
        + b',"thinkingLevel":'
        + thinking
        + b',"model":'
        + model
        + b"}"
    )
