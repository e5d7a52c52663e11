"""Context as JSON for clients: stored messages go out as their original JSON.

Re-encoding a decoded message would drop fields sessiond does not know (a
provider's replay data, a newer pi's additions). So a message that comes
straight from a ``message`` entry is sent as the bytes of that entry's
``message`` value; only messages sessiond builds itself (summaries, custom
messages, converted bash runs) are encoded from their types. A stored message
whose content a ``context_edit`` replaced, or whose content is null, goes out as
pi 1.6 gives it: the stored object with only ``content`` changed. An answer whose
unanswered tool calls oh-my-pi's rules removed is its stored JSON without them.
"""

from __future__ import annotations

from typing import Final

import msgspec

from sessiond.core.context import SessionContext
from sessiond.core.convert import LlmMessage
from sessiond.core.dialect import Dialect
from sessiond.core.encoding import to_json
from sessiond.core.messages import AnyMessage
from sessiond.wire.context import ContextFormat

from .session import SessionStore

_NULL_CONTENT: Final[dict[str, object]] = {
    "user": [],
    "assistant": [],
    "toolResult": [],
    "system": "",
}


class Exported(msgspec.Struct, frozen=True):
    """A message of the ``llm`` form and what its JSON is made from: the context message it
    came from (``index``), whether it is that message unchanged, whether a
    ``context_edit`` replaced its content, and the content blocks of its stored message it
    keeps (oh-my-pi's stripped answers)."""

    message: LlmMessage
    index: int
    entry_id: str
    unchanged: bool
    edited: bool
    kept_blocks: tuple[int, ...] | None


def llm_messages(context: SessionContext, dialect: Dialect) -> list[Exported]:
    """The context in the ``llm`` form of the file's dialect (``Dialect.provider_form``)."""
    return [
        Exported(
            message,
            index,
            context.entry_ids[index],
            unchanged,
            index in context.edited,
            context.kept_blocks.get(index),
        )
        for message, index, unchanged in dialect.provider_form(context.messages)
    ]


def message_json(
    store: SessionStore,
    entry_id: str,
    message: AnyMessage,
    unchanged: bool,
    edited: bool = False,
    kept_blocks: tuple[int, ...] | None = None,
) -> bytes:
    """A message as JSON: a stored message's original bytes when it is unchanged (its
    content as the context holds it when edited; only the blocks at ``kept_blocks``, when
    given)."""
    if unchanged and store.record(entry_id).type == "message":
        raw = store.raw_message(store.record(entry_id))
        if kept_blocks is not None:
            return _keep_blocks(raw, kept_blocks)
        return _stored_json(raw, message, edited)
    return to_json(message)


def _keep_blocks(raw: bytes, kept: tuple[int, ...]) -> bytes:
    """oh-my-pi's stripped answer: the stored message with the kept content blocks, their
    thinking signatures removed; every other field as stored."""
    data = msgspec.json.decode(raw)
    content = data.get("content")
    blocks = [content[i] for i in kept] if isinstance(content, list) else []
    for block in blocks:
        if isinstance(block, dict) and block.get("type") == "thinking":
            block.pop("thinkingSignature", None)
    data["content"] = blocks
    return msgspec.json.encode(data)


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
            message_json(
                store,
                entry_id,
                message,
                True,
                index in context.edited,
                context.kept_blocks.get(index),
            )
            for index, (message, entry_id) in enumerate(
                zip(context.messages, context.entry_ids, strict=True)
            )
        ]
    else:
        parts = [
            message_json(store, e.entry_id, e.message, e.unchanged, e.edited, e.kept_blocks)
            for e in llm_messages(context, store.dialect)
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
