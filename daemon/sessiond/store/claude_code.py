"""Claude Code transcripts read as pi session entries.

A Claude Code transcript (``~/.claude/projects/<project>/<session>.jsonl``) has one JSON
record a line. The main conversation is its ``user`` and ``assistant`` records that are
not ``isSidechain`` (a sub-agent's records are); they are taken in file order. Claude
Code writes one record per content block of a model answer, and the results of parallel
tool calls between them, so the records of one answer (same ``message.id``) become one
pi assistant message followed by one ``toolResult`` message per call, in call order. A
result is paired with its call by id, or, where ids were redacted or do not match, with
the oldest call still unanswered. A ``compact_boundary`` record and the summary record
after it become a compaction entry holding the model's summary (Claude Code's fixed
sentences around it removed) that keeps nothing before it, as Claude Code kept nothing.

What only Claude Code's terminal showed is left out: the caveat before a local command
and the command's output (``/context``, ``/clear``); a slash command is kept as the user
typed it, and a ``!`` shell run as a pi ``bashExecution`` message. Progress, snapshot and
queue records carry no conversation and are skipped.

The transcript is untrusted input: every record is checked before use, nothing is
searched with a pattern that can backtrack, and memory does not grow with the file
(one answer's records are held at a time, and an answer too big to hold is written in
parts). ``store.transcripts`` reads the file; this module only converts records.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

import msgspec

from sessiond.core.entries import CompactionEntry, Entry, MessageEntry
from sessiond.core.messages import (
    AgentMessage,
    AssistantContentBlock,
    AssistantMessage,
    BashExecutionMessage,
    Cost,
    ImageContent,
    RedactedThinkingContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserContentBlock,
    UserMessage,
)
from sessiond.errors import InvalidSessionFileError

# Claude Code's fixed text around a compaction summary (facts about its format).
SUMMARY_PREAMBLE: Final = "This session is being continued from a previous conversation"
SUMMARY_TRAILERS: Final = (
    "\nIf you need specific details from before compaction",
    "\nPlease continue the conversation from where we left off",
)
_LOCAL_OUTPUT: Final = ("<local-command-stdout>", "<local-command-stderr>")
_CAVEAT: Final = "<local-command-caveat>"
_STOP_REASONS: Final = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "toolUse",
    "max_tokens": "length",
    "refusal": "error",
}
# One answer is held until it is complete; past these it is written in parts (a hostile
# transcript could otherwise make one "answer" of the whole file).
MAX_ANSWER_BLOCKS: Final = 4096
MAX_ANSWER_CHARS: Final = 64 * 1024 * 1024
# Deeper JSON in a tool call's input is refused: readers of the session recurse on it.
MAX_INPUT_DEPTH: Final = 64
_MAX_TIMESTAMP_CHARS: Final = 64


class _Message(msgspec.Struct, kw_only=True):
    role: str = ""
    content: str | list[Any] = ""
    id: str | None = None
    model: str | None = None
    stop_reason: str | None = None
    usage: dict[str, Any] | None = None


class _Record(msgspec.Struct, kw_only=True, rename="camel"):
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


_DECODER: Final = msgspec.json.Decoder(_Record)


@dataclass
class ImportStats:
    """What the conversion took in and what it left out, for the user's report."""

    records: int = 0
    messages: int = 0
    tool_calls: int = 0
    compactions: int = 0
    sidechain_records: int = 0
    unpaired_results: int = 0
    paired_by_order: int = 0
    cwd: str = ""
    first_timestamp: str | None = None


@dataclass
class _Answer:
    """The records of one model answer, gathered until the next record that is not its own."""

    message_id: str | None
    model: str
    timestamp: str
    blocks: list[AssistantContentBlock] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    source_ids: list[str] = field(default_factory=list)
    results: dict[int, ToolResultMessage] = field(default_factory=dict)
    usage: Usage | None = None
    stop_reason: str | None = None
    error: str | None = None
    chars: int = 0

    def answer(self, tool_use_id: str) -> int | None:
        """The index of the call a result answers: the first unanswered one with its id,
        else the oldest unanswered one (ids redacted or not matching)."""
        unanswered = [i for i in range(len(self.calls)) if i not in self.results]
        if not unanswered:
            return None
        return next((i for i in unanswered if self.source_ids[i] == tool_use_id), unanswered[0])


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


def _refuse(line: int, why: str) -> InvalidSessionFileError:
    return InvalidSessionFileError(
        f"line {line} of the transcript: {why}", reason="invalidTranscript", line=line
    )


def decode_record(line: int, data: bytes) -> _Record:
    try:
        return _DECODER.decode(data)
    except msgspec.ValidationError as exc:
        raise _refuse(line, f"not a Claude Code record ({exc})") from None
    except msgspec.DecodeError:
        raise _refuse(line, "not JSON") from None
    except RecursionError:
        raise _refuse(line, "JSON nested too deeply") from None


class ClaudeCodeReader:
    """Records in, entries out: ``feed`` each line's record, then ``finish``."""

    def __init__(self, ids: EntryIds | None = None) -> None:
        self.stats = ImportStats()
        self._ids = ids or EntryIds()
        self._parent: str | None = None
        self._answer: _Answer | None = None
        self._shell_command: tuple[str, str] | None = None  # (command, timestamp)
        self._said: tuple[list[UserContentBlock], str] | None = None  # user text gathered
        self._boundary_tokens: int | None = None
        self._timestamp = "1970-01-01T00:00:00.000Z"
        self._line = 0

    def entries(self, records: Iterable[tuple[int, bytes]]) -> Iterator[Entry]:
        for line, data in records:
            yield from self.feed(line, decode_record(line, data))
        yield from self.finish()

    def feed(self, line: int, record: _Record) -> Iterator[Entry]:
        self._line = line
        self.stats.records += 1
        if record.is_sidechain is True:
            self.stats.sidechain_records += 1
            return
        if record.type not in ("user", "assistant", "system"):
            return
        if isinstance(record.timestamp, str) and _epoch_ms(record.timestamp) is not None:
            self._timestamp = record.timestamp
            if self.stats.first_timestamp is None:
                self.stats.first_timestamp = record.timestamp
        if isinstance(record.cwd, str) and record.cwd and not self.stats.cwd:
            self.stats.cwd = record.cwd
        if record.type == "system":
            if record.subtype == "compact_boundary":
                yield from self._flush()
                metadata = record.compact_metadata
                tokens = metadata.get("preTokens") if isinstance(metadata, dict) else None
                self._boundary_tokens = tokens if isinstance(tokens, int) and tokens >= 0 else 0
            return
        if record.message is None:
            return
        try:
            message = msgspec.convert(record.message, _Message)
        except msgspec.ValidationError as exc:
            raise _refuse(
                line, f"a {record.type} record's message is not readable ({exc})"
            ) from None
        if record.type == "assistant":
            yield from self._assistant(record, message)
        else:
            yield from self._user(record, message)

    def finish(self) -> Iterator[Entry]:
        yield from self._flush()

    # -- assistant records

    def _assistant(self, record: _Record, message: _Message) -> Iterator[Entry]:
        answer = self._answer
        if answer is None or message.id is None or answer.message_id != message.id:
            yield from self._flush()
            answer = self._answer = _Answer(
                message_id=message.id, model=message.model or "unknown", timestamp=self._timestamp
            )
        if message.usage is not None:
            answer.usage = _usage(message.usage)
        if message.stop_reason is not None:
            answer.stop_reason = _STOP_REASONS.get(message.stop_reason, "stop")
        blocks = [message.content] if isinstance(message.content, str) else message.content
        if record.is_api_error_message is True:
            answer.error = "\n".join(_texts(blocks)) or "API error"
            return
        for block in blocks:
            converted = self._assistant_block(block)
            if converted is None:
                continue
            answer.blocks.append(converted)
            answer.chars += _size(converted)
            if isinstance(converted, ToolCall):
                answer.calls.append(converted)
                self.stats.tool_calls += 1
        if len(answer.blocks) > MAX_ANSWER_BLOCKS or answer.chars > MAX_ANSWER_CHARS:
            yield from self._flush()

    def _assistant_block(self, block: Any) -> AssistantContentBlock | None:
        if isinstance(block, str):
            return TextContent(text=block) if block.strip() else None
        if not isinstance(block, dict):
            return None
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            # Claude Code records the blank text that opens a streamed answer; it says nothing.
            return TextContent(text=text) if isinstance(text, str) and text.strip() else None
        if kind == "thinking":
            thinking = block.get("thinking")
            if not isinstance(thinking, str):
                return None
            signature = block.get("signature")
            return ThinkingContent(
                thinking=thinking,
                thinking_signature=signature if isinstance(signature, str) else None,
            )
        if kind == "redacted_thinking":
            data = block.get("data")
            return RedactedThinkingContent(data=data) if isinstance(data, str) else None
        if kind == "tool_use":
            return self._tool_call(block)
        return None

    def _tool_call(self, block: dict[str, Any]) -> ToolCall | None:
        name, call_id, arguments = block.get("name"), block.get("id"), block.get("input")
        if not isinstance(name, str) or not name:
            return None
        if not isinstance(arguments, dict):
            arguments = {}
        if _depth(arguments) > MAX_INPUT_DEPTH:
            raise _refuse(self._line, f"a tool call's input nested deeper than {MAX_INPUT_DEPTH}")
        answer = self._answer
        assert answer is not None
        source_id = call_id if isinstance(call_id, str) else ""
        answer.source_ids.append(source_id)
        # pi pairs results with calls by id: a redacted or repeated id is made distinct.
        taken = {call.id for call in answer.calls}
        unique_id = source_id or "call"
        number = 1
        while unique_id in taken:
            number += 1
            unique_id = f"{source_id or 'call'}-{number}"
        return ToolCall(id=unique_id, name=name, arguments=arguments)

    # -- user records

    def _user(self, record: _Record, message: _Message) -> Iterator[Entry]:
        content = message.content
        if record.is_compact_summary is True:
            yield from self._compaction(_joined_text(content))
            return
        if isinstance(content, list) and any(_is_result(block) for block in content):
            self._results([block for block in content if _is_result(block)])
            if self._answer is not None and self._answer.chars > MAX_ANSWER_CHARS:
                yield from self._flush()
            rest = [block for block in content if not _is_result(block)]
            if not _texts(rest) and not _images(rest):
                return
            content = rest
        yield from self._flush_answer()
        text = _joined_text(content)
        stripped = text.lstrip()
        if stripped.startswith(_CAVEAT) or stripped.startswith(_LOCAL_OUTPUT):
            return
        if stripped.startswith("<bash-input>"):
            yield from self._flush()
            self._shell_command = (_between(text, "bash-input") or "", self._timestamp)
            return
        if stripped.startswith(("<bash-stdout>", "<bash-stderr>")):
            yield from self._flush()
            yield from self._shell_run(text)
            return
        if "<command-name>" in text:
            typed = _typed_command(text)
            blocks: list[UserContentBlock] = [TextContent(text=typed)] if typed else []
        else:
            blocks = [TextContent(text=t) for t in _texts(content)]
            blocks += _images(content if isinstance(content, list) else [])
        if blocks:
            yield from self._say(blocks)

    def _say(self, blocks: list[UserContentBlock]) -> Iterator[Entry]:
        """Consecutive user records are one message to the model (Claude Code merges
        them before it sends them): they are gathered into one pi user message."""
        if self._said is None:
            self._said = ([], self._timestamp)
        said = self._said[0]
        said += blocks
        if len(said) > MAX_ANSWER_BLOCKS or sum(_size(b) for b in said) > MAX_ANSWER_CHARS:
            yield from self._flush()

    def _results(self, blocks: list[dict[str, Any]]) -> None:
        answer = self._answer
        for block in blocks:
            index = None if answer is None else answer.answer(str(block.get("tool_use_id", "")))
            if answer is None or index is None:
                self.stats.unpaired_results += 1
                continue
            if answer.source_ids[index] != block.get("tool_use_id"):
                self.stats.paired_by_order += 1
            content = block.get("content")
            parts = [content] if isinstance(content, str) else content
            parts = parts if isinstance(parts, list) else []
            result_blocks: list[UserContentBlock] = [TextContent(text=t) for t in _texts(parts)]
            result_blocks += _images(parts)
            call = answer.calls[index]
            answer.results[index] = ToolResultMessage(
                tool_call_id=call.id,
                tool_name=call.name,
                content=result_blocks,
                is_error=block.get("is_error") is True,
                timestamp=self._ms(),
            )
            answer.chars += sum(_size(b) for b in result_blocks)

    def _shell_run(self, text: str) -> Iterator[Entry]:
        command, _ = self._shell_command or ("", self._timestamp)
        self._shell_command = None
        output = "\n".join(
            part for part in (_between(text, "bash-stdout"), _between(text, "bash-stderr")) if part
        )
        yield self._message(
            BashExecutionMessage(
                command=command,
                output=output,
                cancelled=False,
                truncated=False,
                timestamp=self._ms(),
            )
        )

    def _compaction(self, text: str) -> Iterator[Entry]:
        yield from self._flush()
        entry_id = self._ids.new()
        entry = CompactionEntry(
            id=entry_id,
            parent_id=self._parent,
            timestamp=self._timestamp,
            summary=summary_body(text),
            # Claude Code keeps nothing of the summarized history: an id found before
            # the compaction would keep what follows it, its own id keeps nothing.
            first_kept_entry_id=entry_id,
            tokens_before=self._boundary_tokens or 0,
            from_hook=False,
        )
        self._boundary_tokens = None
        self._parent = entry_id
        self.stats.compactions += 1
        yield entry

    # -- writing out

    def _flush(self) -> Iterator[Entry]:
        """Write out what is gathered: the user's message or the model's answer."""
        said, self._said = self._said, None
        if said is not None:
            blocks, timestamp = said
            content: str | list[UserContentBlock] = _joined_blocks(blocks)
            if len(content) == 1 and isinstance(content[0], TextContent):
                content = content[0].text
            message = UserMessage(content=content, timestamp=_epoch_ms(timestamp))
            yield self._message(message, timestamp)
        yield from self._flush_answer()

    def _flush_answer(self) -> Iterator[Entry]:
        answer, self._answer = self._answer, None
        if answer is None or (not answer.blocks and answer.error is None):
            return
        if answer.error is not None:
            stop = "error"
        elif answer.calls:
            stop = "toolUse"
        else:
            stop = answer.stop_reason or "stop"
            stop = "stop" if stop == "toolUse" else stop
        yield self._message(
            AssistantMessage(
                content=[] if answer.error is not None else answer.blocks,
                api="anthropic-messages",
                provider="anthropic",
                model=answer.model,
                usage=answer.usage or _usage({}),
                stop_reason=stop,
                error_message=answer.error,
                timestamp=_epoch_ms(answer.timestamp),
            ),
            answer.timestamp,
        )
        for index in range(len(answer.calls)):
            result = answer.results.get(index)
            if result is not None:
                yield self._message(result)

    def _message(self, message: AgentMessage, timestamp: str | None = None) -> MessageEntry:
        entry = MessageEntry(
            id=self._ids.new(),
            parent_id=self._parent,
            timestamp=timestamp or self._timestamp,
            message=message,
        )
        self._parent = entry.id
        self.stats.messages += 1
        return entry

    def _ms(self) -> int | None:
        return _epoch_ms(self._timestamp)


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


def _joined_blocks(blocks: list[UserContentBlock]) -> list[UserContentBlock]:
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


def _is_result(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "tool_result"


def _texts(blocks: Any) -> list[str]:
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


def _joined_text(content: Any) -> str:
    return "\n".join(_texts(content))


def _images(blocks: list[Any]) -> list[UserContentBlock]:
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


def _between(text: str, tag: str) -> str | None:
    """The text inside the first ``<tag>...</tag>`` (found with str.find: linear)."""
    opening, closing = f"<{tag}>", f"</{tag}>"
    start = text.find(opening)
    if start < 0:
        return None
    end = text.find(closing, start + len(opening))
    return text[start + len(opening) : end if end >= 0 else len(text)].strip()


def _typed_command(text: str) -> str:
    """A slash command as the user typed it: its name and its arguments."""
    name = _between(text, "command-name") or ""
    arguments = _between(text, "command-args") or ""
    return f"{name} {arguments}".strip()


def _usage(data: dict[str, Any]) -> Usage:
    def tokens(key: str) -> int:
        value = data.get(key)
        return value if isinstance(value, int) and value >= 0 else 0

    # Anthropic's input_tokens, like pi's usage.input, counts only what the cache did not hold.
    fresh, output = tokens("input_tokens"), tokens("output_tokens")
    cache_read, cache_write = (
        tokens("cache_read_input_tokens"),
        tokens("cache_creation_input_tokens"),
    )
    return Usage(
        input=fresh,
        output=output,
        cache_read=cache_read,
        cache_write=cache_write,
        total_tokens=fresh + output + cache_read + cache_write,
        cost=Cost(),
    )


def _epoch_ms(timestamp: str) -> int | None:
    if len(timestamp) > _MAX_TIMESTAMP_CHARS:
        return None
    try:
        moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return int(moment.timestamp() * 1000)


def _size(block: AssistantContentBlock | UserContentBlock) -> int:
    if isinstance(block, TextContent):
        return len(block.text)
    if isinstance(block, ThinkingContent):
        return len(block.thinking)
    if isinstance(block, (RedactedThinkingContent, ImageContent)):
        return len(block.data)
    return len(msgspec.json.encode(block.arguments))


def _depth(value: Any, limit: int = MAX_INPUT_DEPTH + 1) -> int:
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
