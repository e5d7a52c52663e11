"""The pieces of a Claude Code transcript record, read without trusting them.

A record is decoded loosely (``Record``: any field of the wrong type reads as absent) and
its ``message`` strictly where it is used (``RecordMessage``); content blocks stay plain
JSON and are read by the helpers here, each checking the type of what it takes. Nothing
here searches with a pattern that can backtrack, and nesting is measured without
recursion. ``store.claude_code`` puts the pieces together.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any, Final

import msgspec

from sessiond.core.messages import (
    AssistantContentBlock,
    Cost,
    ImageContent,
    RedactedThinkingContent,
    TextContent,
    ThinkingContent,
    TokenUsage,
    UserContentBlock,
)
from sessiond.errors import InvalidSessionFileError

# Claude Code's fixed text around a compaction summary (facts about its format).
SUMMARY_PREAMBLE: Final = "This session is being continued from a previous conversation"
SUMMARY_TRAILERS: Final = (
    "\nIf you need specific details from before compaction",
    "\nPlease continue the conversation from where we left off",
)
# Deeper JSON in a tool call's input is refused: readers of the session recurse on it.
MAX_INPUT_DEPTH: Final = 64
MAX_TIMESTAMP_CHARS: Final = 64


class RecordMessage(msgspec.Struct, kw_only=True):
    role: str = ""
    content: str | list[Any] = ""
    id: str | None = None
    model: str | None = None
    stop_reason: str | None = None
    usage: dict[str, Any] | None = None


class Record(msgspec.Struct, kw_only=True, rename="camel"):
    # Loose on purpose: records of kinds that are skipped may have any shape, and a
    # field of the wrong type is read as absent. ``message`` is checked where it is used.
    type: Any = None
    subtype: Any = None
    is_sidechain: Any = None
    is_compact_summary: Any = None
    is_api_error_message: Any = None
    timestamp: Any = None
    cwd: Any = None
    message: Any = None
    compact_metadata: Any = None


_DECODER: Final = msgspec.json.Decoder(Record)


class EntryIds:
    """Distinct 8-hex-digit ids without remembering them: a random start and a random odd
    step visit every 32-bit value once, so memory does not grow with the session."""

    def __init__(self) -> None:
        self._next = int.from_bytes(os.urandom(4), "big")
        self._step = int.from_bytes(os.urandom(4), "big") | 1

    def new(self) -> str:
        value = self._next
        self._next = (self._next + self._step) & 0xFFFFFFFF
        return f"{value:08x}"


def transcript_error(line: int, why: str) -> InvalidSessionFileError:
    return InvalidSessionFileError(
        f"line {line} of the transcript: {why}", reason="invalidTranscript", line=line
    )


def decode_record(line: int, data: bytes) -> Record:
    try:
        return _DECODER.decode(data)
    except msgspec.ValidationError as exc:
        raise transcript_error(line, f"not a Claude Code record ({exc})") from None
    except msgspec.DecodeError:
        raise transcript_error(line, "not JSON") from None
    except RecursionError:
        raise transcript_error(line, "JSON nested too deeply") from None


def summary_body(text: str) -> str:
    """A compaction summary without Claude Code's fixed opening and closing sentences."""
    body = text.strip()
    if body.startswith(SUMMARY_PREAMBLE):
        paragraph = body.find("\n\n")
        body = body[paragraph + 2 :] if paragraph >= 0 else ""
    for trailer in SUMMARY_TRAILERS:
        position = body.rfind(trailer)
        if position >= 0:
            body = body[:position]
    return body.strip()


def joined_blocks(blocks: list[UserContentBlock]) -> list[UserContentBlock]:
    """Neighbouring texts as one, a blank line between them (pi writes a message's text
    blocks out back to back); images stay where they were."""
    joined: list[UserContentBlock] = []
    for block in blocks:
        last = joined[-1] if joined else None
        if isinstance(block, TextContent) and isinstance(last, TextContent):
            joined[-1] = TextContent(text=f"{last.text}\n\n{block.text}")
        else:
            joined.append(block)
    return joined


def is_result(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "tool_result"


def texts(blocks: Any) -> list[str]:
    if isinstance(blocks, str):
        return [blocks] if blocks else []
    texts: list[str] = []
    for block in blocks if isinstance(blocks, list) else []:
        if isinstance(block, str):
            texts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            text = block.get("text")
            if isinstance(text, str) and text:
                texts.append(text)
    return texts


def joined_text(content: Any) -> str:
    return "\n".join(texts(content))


def images(blocks: list[Any]) -> list[UserContentBlock]:
    images: list[UserContentBlock] = []
    for block in blocks:
        if not isinstance(block, dict) or block.get("type") != "image":
            continue
        source = block.get("source")
        if not isinstance(source, dict):
            continue
        data, mime = source.get("data"), source.get("media_type")
        if isinstance(data, str) and isinstance(mime, str):
            images.append(ImageContent(data=data, mime_type=mime))
    return images


def between(text: str, tag: str) -> str | None:
    """The text inside the first ``<tag>...</tag>`` (found with str.find: linear)."""
    opening, closing = f"<{tag}>", f"</{tag}>"
    start = text.find(opening)
    if start < 0:
        return None
    end = text.find(closing, start + len(opening))
    return text[start + len(opening) : end if end >= 0 else len(text)].strip()


def typed_command(text: str) -> str:
    """A slash command as the user typed it: its name and its arguments."""
    name = between(text, "command-name") or ""
    arguments = between(text, "command-args") or ""
    return f"{name} {arguments}".strip()


def usage_of(data: dict[str, Any]) -> TokenUsage:
    def tokens(key: str) -> int:
        value = data.get(key)
        return value if isinstance(value, int) and value >= 0 else 0

    # Anthropic's input_tokens, like pi's usage.input, counts only what the cache did not hold.
    fresh, output = tokens("input_tokens"), tokens("output_tokens")
    cache_read, cache_write = (
        tokens("cache_read_input_tokens"),
        tokens("cache_creation_input_tokens"),
    )
    return TokenUsage(
        input=fresh,
        output=output,
        cache_read=cache_read,
        cache_write=cache_write,
        total_tokens=fresh + output + cache_read + cache_write,
        cost=Cost(),
    )


def epoch_ms(timestamp: str) -> int | None:
    if len(timestamp) > MAX_TIMESTAMP_CHARS:
        return None
    try:
        moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return int(moment.timestamp() * 1000)


def block_size(block: AssistantContentBlock | UserContentBlock) -> int:
    if isinstance(block, TextContent):
        return len(block.text)
    if isinstance(block, ThinkingContent):
        return len(block.thinking)
    if isinstance(block, (RedactedThinkingContent, ImageContent)):
        return len(block.data)
    return len(msgspec.json.encode(block.arguments))


def depth(value: Any, limit: int = MAX_INPUT_DEPTH + 1) -> int:
    """How deeply ``value`` nests, counted up to ``limit`` (iteratively: no recursion)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > deepest:
            deepest = depth
            if deepest >= limit:
                return deepest
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
    return deepest
