"""Reading entries and messages: strictly when they follow the schema, leniently when not.

Session files in the wild are looser than the schema (old pi versions, hand
edits, forks that add fields). A line that is valid JSON always becomes an
entry: the strict decoder handles the normal case fast; anything it rejects is
read field by field, filling what pi would have filled, and as a last resort
kept as an ``UnknownEntry``/``UnknownMessage`` that still holds its place in
the tree. Only a line that is not JSON at all, or has no string id, is damage.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any, Final, cast

import msgspec

from .entries import ENTRY_TYPES, Entry, KnownEntry, MessageEntry, UnknownEntry
from .messages import AgentMessage, AnyMessage, UnknownMessage


@cache
def _entry_decoder() -> msgspec.json.Decoder[KnownEntry]:
    # Built on first use: building decoders for these unions costs start-up time.
    return msgspec.json.Decoder(KnownEntry)


def decode_strict_entry(line: bytes) -> KnownEntry:
    """``line`` as a known entry, exactly by the schema (``msgspec.ValidationError`` if not)."""
    return _entry_decoder().decode(line)


@cache
def _message_decoder() -> msgspec.json.Decoder[AgentMessage]:
    return msgspec.json.Decoder(AgentMessage)


class NotAnEntry(ValueError):
    """A line that is JSON but cannot be an entry (no string id, not an object)."""


# What pi always writes, per role, for fields a loose file may lack. A null or missing
# content reads as pi 1.6 reads it: [] for user, assistant and tool-result messages,
# "" for system messages.
_MESSAGE_FILLERS: Final[dict[str, dict[str, Any]]] = {
    "user": {"content": []},
    "system": {"content": ""},
    "developer": {"content": ""},
    "assistant": {
        "content": [],
        "provider": "",
        "model": "",
        "usage": {},
        "stopReason": "stop",
    },
    "toolResult": {"toolCallId": "", "toolName": "", "content": [], "isError": False},
    "bashExecution": {"command": "", "output": "", "cancelled": False, "truncated": False},
    "pythonExecution": {"code": "", "output": "", "cancelled": False, "truncated": False},
    "custom": {"customType": "", "content": "", "display": True},
    "hookMessage": {"customType": "", "content": "", "display": True},
    "branchSummary": {"summary": "", "fromId": ""},
    "compactionSummary": {"summary": "", "tokensBefore": 0},
    "fileMention": {"files": []},
}
_USAGE_FIELDS: Final = ("input", "output", "cacheRead", "cacheWrite", "totalTokens")
_BLOCK_TYPES_BY_ROLE: Final[dict[str, frozenset[str]]] = {
    "assistant": frozenset({"text", "thinking", "toolCall", "redactedThinking"}),
}
_USER_BLOCK_TYPES: Final = frozenset({"text", "image"})


def decode_entry(line: bytes | memoryview) -> Entry:
    """One session line (not the header) as an entry.

    Raises ``msgspec.DecodeError`` when the line is not JSON and ``NotAnEntry``
    when it is JSON but has no place in the tree.
    """
    try:
        return _entry_decoder().decode(line)
    except msgspec.ValidationError:
        pass
    data = msgspec.json.decode(line)
    if not isinstance(data, dict):
        raise NotAnEntry("line is JSON but not an object")
    return entry_from_dict(data)


def entry_from_dict(data: dict[str, Any]) -> Entry:
    """An entry from a decoded line, as leniently as pi would read it."""
    entry_id = data.get("id")
    if not isinstance(entry_id, str):
        raise NotAnEntry("entry has no string id")
    parent_id = data.get("parentId")
    if not isinstance(parent_id, str):
        parent_id = None
    timestamp = data.get("timestamp")
    if not isinstance(timestamp, str):
        timestamp = ""
    entry_type = data.get("type")
    type_name = entry_type if isinstance(entry_type, str) else ""
    if type_name in ENTRY_TYPES:
        patched = dict(data, id=entry_id, parentId=parent_id, timestamp=timestamp)
        if type_name == "message" and isinstance(data.get("message"), dict):
            message = message_from_dict(data["message"])
            if not isinstance(message, UnknownMessage):
                return MessageEntry(entry_id, parent_id, timestamp, message=message)
        else:
            try:
                return cast(Entry, msgspec.convert(patched, KnownEntry))
            except msgspec.ValidationError:
                pass
    return UnknownEntry(
        type=type_name, id=entry_id, parent_id=parent_id, timestamp=timestamp, data=data
    )


def decode_message(raw: bytes | memoryview) -> AnyMessage:
    try:
        return _message_decoder().decode(raw)
    except msgspec.ValidationError:
        data = msgspec.json.decode(raw)
        if not isinstance(data, dict):
            return UnknownMessage(role="", data={"value": data})
        return message_from_dict(data)


def message_from_dict(data: dict[str, Any]) -> AnyMessage:
    """A message from decoded JSON, filling what pi always writes and dropping
    content blocks of unknown kinds, or an ``UnknownMessage`` if even that fails."""
    role = data.get("role")
    role_name = role if isinstance(role, str) else ""
    try:
        return cast(AgentMessage, msgspec.convert(data, AgentMessage))
    except msgspec.ValidationError:
        pass
    fillers = _MESSAGE_FILLERS.get(role_name)
    if fillers is None:
        return UnknownMessage(role=role_name, data=data)
    patched = {**fillers, **{k: v for k, v in data.items() if v is not None}}
    if role_name == "assistant":
        usage = patched.get("usage")
        usage_dict = usage if isinstance(usage, dict) else {}
        patched["usage"] = {
            **usage_dict,
            **{k: _int_or_zero(usage_dict.get(k)) for k in _USAGE_FIELDS},
        }
    content = patched.get("content")
    if isinstance(content, list):
        allowed = _BLOCK_TYPES_BY_ROLE.get(role_name, _USER_BLOCK_TYPES)
        patched["content"] = [
            block
            for block in content
            if isinstance(block, dict) and block.get("type") in allowed and _block_ok(block)
        ]
    try:
        return cast(AgentMessage, msgspec.convert(patched, AgentMessage))
    except msgspec.ValidationError:
        return UnknownMessage(role=role_name, data=data)


def _block_ok(block: dict[str, Any]) -> bool:
    from .messages import ContentBlock

    try:
        msgspec.convert(block, ContentBlock)
    except msgspec.ValidationError:
        return False
    return True


def _int_or_zero(value: Any) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    return 0
