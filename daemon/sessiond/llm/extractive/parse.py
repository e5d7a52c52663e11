"""Reading a summarization prompt back into its pieces.

The extractive summarizer gets exactly the text a model would (``core.summary_prompts``;
protocol/behaviour.md#summarizer-requests): ``<conversation>`` with the serialized
messages (``core.serialize``), then
optionally ``<previous-summary>`` and ``<additional-context>``, then the
instructions. Serialized parts start with a role marker and are separated by a
blank line; a part's own text may contain blank lines too, so a split happens
only where a blank line is followed by a marker.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

Role: TypeAlias = Literal["user", "thinking", "assistant", "toolCalls", "toolResult"]

_MARKERS: tuple[tuple[str, Role], ...] = (
    ("[User]: ", "user"),
    ("[Assistant thinking]: ", "thinking"),
    ("[Assistant tool calls]: ", "toolCalls"),
    ("[Assistant]: ", "assistant"),
    ("[Tool result]: ", "toolResult"),
)
_PART_BOUNDARY = re.compile(
    r"\n\n(?=\[(?:User|Assistant thinking|Assistant tool calls|Assistant|Tool result)\]: )"
)
_CONVERSATION_OPEN = "<conversation>\n"
_CONVERSATION_CLOSE = "\n</conversation>"
# How convertToLlm wraps compaction and branch summaries it turns into user text.
_SUMMARY_OPEN, _SUMMARY_CLOSE = "<summary>", "</summary>"
# A wrapped summary's tag comes after the short sentence that introduces it.
_SUMMARY_WITHIN = 400
_FOCUS = re.compile(r"(?:^|\n)Additional focus: (.+)\s*$", re.DOTALL)


@dataclass(frozen=True)
class ToolCallInfo:
    name: str
    args: dict[str, Any]


@dataclass(frozen=True)
class Part:
    role: Role
    text: str
    calls: tuple[ToolCallInfo, ...] = ()


@dataclass
class ParsedPrompt:
    parts: list[Part] = field(default_factory=list)
    previous_summary: str | None = None
    additional_context: list[str] = field(default_factory=list)
    focus: str | None = None


def parse_prompt(prompt: str) -> ParsedPrompt:
    parsed = ParsedPrompt()
    start = prompt.find(_CONVERSATION_OPEN)
    if start < 0:
        return parsed
    body_start = start + len(_CONVERSATION_OPEN)
    end = _conversation_end(prompt, body_start - 1)
    if end < 0:
        end = len(prompt)
    parsed.parts = parse_conversation(prompt[body_start:end])
    rest = prompt[end + len(_CONVERSATION_CLOSE) :]
    previous, rest = _block(rest, "previous-summary")
    parsed.previous_summary = previous
    context, rest = _block(rest, "additional-context")
    if context is not None:
        parsed.additional_context = [
            line[2:].strip() for line in context.splitlines() if line.startswith("- ")
        ]
    focus = _FOCUS.search(rest)
    if focus is not None:
        parsed.focus = focus.group(1).strip()
    return parsed


def _conversation_end(prompt: str, search_from: int) -> int:
    """The closing tag that ends the conversation, not one quoted inside it."""
    position = prompt.find(_CONVERSATION_CLOSE, search_from)
    while position >= 0:
        after = prompt[position + len(_CONVERSATION_CLOSE) :]
        if not after.strip() or (after.startswith("\n\n") and not _starts_with_marker(after[2:])):
            return position
        position = prompt.find(_CONVERSATION_CLOSE, position + 1)
    return -1


def _starts_with_marker(text: str) -> bool:
    return any(text.startswith(marker) for marker, _role in _MARKERS)


def _block(text: str, tag: str) -> tuple[str | None, str]:
    """The body of ``<tag>\\n...\\n</tag>`` if ``text`` has one, and the text after it."""
    opening, closing = f"<{tag}>\n", f"\n</{tag}>"
    start = text.find(opening)
    if start < 0:
        return None, text
    end = text.find(closing, start + len(opening) - 1)
    if end < 0:
        return None, text
    return text[start + len(opening) : end], text[end + len(closing) :]


def parse_conversation(text: str) -> list[Part]:
    parts: list[Part] = []
    for chunk in _PART_BOUNDARY.split(text):
        if not chunk.strip():
            continue
        for marker, role in _MARKERS:
            if chunk.startswith(marker):
                body = chunk[len(marker) :]
                calls = parse_tool_calls(body) if role == "toolCalls" else ()
                parts.append(Part(role=role, text=body, calls=calls))
                break
        else:
            # Text before the first marker (a hand-made prompt): read it as the user's.
            parts.append(Part(role="user", text=chunk))
    return parts


def unwrap_summary(user_text: str) -> str | None:
    """The summary inside a user part that is a wrapped compaction or branch summary: a
    short introduction, ``<summary>`` on a line of its own, and the text ending with
    ``</summary>`` (a ``<summary>`` inside other markup, such as a client's task
    notification, is not one)."""
    # Found with str.find, not a lazy regex search: that rescanned to the end of the
    # text from every "<summary>" without a closing tag, quadratic in hostile text.
    opening = user_text.find(_SUMMARY_OPEN + "\n", 0, _SUMMARY_WITHIN + len(_SUMMARY_OPEN))
    if opening < 0 or (opening > 0 and user_text[opening - 1] != "\n"):
        return None
    body = user_text.rstrip()
    if not body.endswith(_SUMMARY_CLOSE) or len(body) - len(_SUMMARY_CLOSE) < opening:
        return None
    return body[opening + len(_SUMMARY_OPEN) : len(body) - len(_SUMMARY_CLOSE)].strip()


_CALL_NAME = re.compile(r"\s*([^\s(;]+)\(")
_ARG_KEY = re.compile(r"\s*([^=\s,()]+)=")
_json = json.JSONDecoder()


def parse_tool_calls(text: str) -> tuple[ToolCallInfo, ...]:
    """``name(k="v", n=1); other(...)``: each call with its JSON arguments.

    A call whose arguments cannot be read keeps the ones read so far, and parsing
    stops there: the rest of the line is not trustworthy.
    """
    calls: list[ToolCallInfo] = []
    position = 0
    while position < len(text):
        name_match = _CALL_NAME.match(text, position)
        if name_match is None:
            break
        position = name_match.end()
        args: dict[str, Any] = {}
        complete = False
        while position < len(text):
            if text.startswith(")", position):
                position += 1
                complete = True
                break
            key_match = _ARG_KEY.match(text, position)
            if key_match is None:
                break
            try:
                value, position = _json.raw_decode(text, key_match.end())
            except (json.JSONDecodeError, RecursionError):
                break
            args[key_match.group(1)] = value
            if text.startswith(", ", position):
                position += 2
        calls.append(ToolCallInfo(name=name_match.group(1), args=args))
        if not complete or not text.startswith("; ", position):
            break
        position += 2
    return tuple(calls)
