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
from sessiond.core.convert import convert_to_llm_with_origins
from sessiond.core.encoding import to_json

from .session import SessionStore

ContextFormat = Literal["agent", "llm"]


def messages_json(store: SessionStore, context: SessionContext, fmt: ContextFormat) -> bytes:
    """The context's messages as a JSON array, in the requested form."""
    parts: list[bytes] = []
    if fmt == "agent":
        for message, entry_id in zip(context.messages, context.entry_ids, strict=True):
            parts.append(_original_or_encoded(store, entry_id, message))
    else:
        converted, origins = convert_to_llm_with_origins(context.messages)
        for message, origin in zip(converted, origins, strict=True):
            if origin is None:
                parts.append(to_json(message))
            else:
                parts.append(_original_or_encoded(store, context.entry_ids[origin], message))
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


def _original_or_encoded(store: SessionStore, entry_id: str, message: object) -> bytes:
    record = store.record(entry_id)
    if record.type == "message":
        return store.raw_message(record)
    return to_json(message)
