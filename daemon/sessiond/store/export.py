"""Context as JSON for clients: stored messages go out as their original JSON.

Re-encoding a decoded message would drop fields sessiond does not know (a
provider's replay data, a newer pi's additions). So a message that comes
straight from a ``message`` entry is sent as the bytes of that entry's
``message`` value; only messages sessiond builds itself (summaries, custom
messages, converted bash runs) are encoded from their types.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from sessiond.core.context import SessionContext
from sessiond.core.convert import LlmMessage, convert_to_llm_tracked
from sessiond.core.encoding import to_json
from sessiond.core.messages import AssistantMessage

from .session import SessionStore

ContextFormat = Literal["agent", "llm"]


def llm_messages(context: SessionContext) -> list[tuple[LlmMessage, str, bool]]:
    """``convertToLlm`` of the context, minus failed answers: each message with the
    entry it came from and whether it is that entry's message unchanged.

    pi's provider layer never sends an assistant message that ended in an error
    or was aborted (an incomplete turn); the "llm" form leaves them out too, so
    a client retrying after an overflow sends what pi would.
    """
    return [
        (message, context.entry_ids[index], unchanged)
        for message, index, unchanged in convert_to_llm_tracked(context.messages)
        if not (
            isinstance(message, AssistantMessage) and message.stop_reason in ("error", "aborted")
        )
    ]


def message_json(store: SessionStore, entry_id: str, message: object, unchanged: bool) -> bytes:
    """A message as JSON: a stored message's original bytes when it is unchanged."""
    if unchanged and store.record(entry_id).type == "message":
        return store.raw_message(store.record(entry_id))
    return to_json(message)


def messages_json(store: SessionStore, context: SessionContext, fmt: ContextFormat) -> bytes:
    """The context's messages as a JSON array, in the requested form."""
    if fmt == "agent":
        parts = [
            message_json(store, entry_id, message, True)
            for message, entry_id in zip(context.messages, context.entry_ids, strict=True)
        ]
    else:
        parts = [
            message_json(store, entry_id, message, unchanged)
            for message, entry_id, unchanged in llm_messages(context)
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
