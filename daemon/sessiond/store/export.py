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
from sessiond.core.convert import LlmMessage, convert_to_llm_with_origins
from sessiond.core.encoding import to_json
from sessiond.core.messages import AssistantMessage

from .session import SessionStore

ContextFormat = Literal["agent", "llm"]


def llm_messages(context: SessionContext) -> tuple[list[LlmMessage], list[str | None]]:
    """``convertToLlm`` of the context, minus failed answers, with each message's entry.

    pi's provider layer never sends an assistant message that ended in an error
    or was aborted (an incomplete turn); the "llm" form leaves them out too, so
    a client retrying after an overflow sends what pi would.
    """
    converted, origins = convert_to_llm_with_origins(context.messages)
    messages: list[LlmMessage] = []
    entry_ids: list[str | None] = []
    for message, origin in zip(converted, origins, strict=True):
        if isinstance(message, AssistantMessage) and message.stop_reason in ("error", "aborted"):
            continue
        messages.append(message)
        entry_ids.append(context.entry_ids[origin] if origin is not None else None)
    return messages, entry_ids


def messages_json(store: SessionStore, context: SessionContext, fmt: ContextFormat) -> bytes:
    """The context's messages as a JSON array, in the requested form."""
    parts: list[bytes] = []
    if fmt == "agent":
        for message, entry_id in zip(context.messages, context.entry_ids, strict=True):
            parts.append(_original_or_encoded(store, entry_id, message))
    else:
        converted, origins = convert_to_llm_with_origins(context.messages)
        for message, origin in zip(converted, origins, strict=True):
            if isinstance(message, AssistantMessage) and message.stop_reason in (
                "error",
                "aborted",
            ):
                continue
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
