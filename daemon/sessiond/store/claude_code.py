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

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from sessiond.core.entries import CompactionEntry, Entry, MessageEntry
from sessiond.core.messages import (
    AgentMessage,
    AssistantContentBlock,
    AssistantMessage,
    BashExecutionMessage,
    RedactedThinkingContent,
    TextContent,
    ThinkingContent,
    TokenUsage,
    ToolCall,
    ToolResultMessage,
    UserContentBlock,
    UserMessage,
)
from sessiond.store.claude_code_records import (
    MAX_INPUT_DEPTH,
    EntryIds,
    Record,
    RecordMessage,
    between,
    block_size,
    decode_record,
    depth,
    epoch_ms,
    images,
    is_result,
    joined_blocks,
    joined_text,
    summary_body,
    texts,
    transcript_error,
    typed_command,
    usage_of,
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
    usage: TokenUsage | None = None
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


class ClaudeCodeReader:
    """Records in, entries out: ``feed`` each line's record, then ``finish``."""

    def __init__(self, ids: EntryIds | None = None) -> None:
        self.stats = ImportStats()
        self._ids = ids or EntryIds()
        self._parent: str | None = None
        self._answer: _Answer | None = None
        self._shell_command: tuple[str, str] | None = None  # (command, timestamp)
        self._said: tuple[list[UserContentBlock], str] | None = None  # user text gathered
        self._said_chars = 0
        self._boundary_tokens: int | None = None
        self._timestamp = "1970-01-01T00:00:00.000Z"
        self._line = 0

    def entries(self, records: Iterable[tuple[int, bytes]]) -> Iterator[Entry]:
        for line, data in records:
            yield from self.feed(line, decode_record(line, data))
        yield from self.finish()

    def feed(self, line: int, record: Record) -> Iterator[Entry]:
        self._line = line
        self.stats.records += 1
        if record.is_sidechain is True:
            self.stats.sidechain_records += 1
            return
        if record.type not in ("user", "assistant", "system"):
            return
        if isinstance(record.timestamp, str) and epoch_ms(record.timestamp) is not None:
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
            message = msgspec.convert(record.message, RecordMessage)
        except msgspec.ValidationError as exc:
            raise transcript_error(
                line, f"a {record.type} record's message is not readable ({exc})"
            ) from None
        if record.type == "assistant":
            yield from self._assistant(record, message)
        else:
            yield from self._user(record, message)

    def finish(self) -> Iterator[Entry]:
        yield from self._flush()

    # -- assistant records

    def _assistant(self, record: Record, message: RecordMessage) -> Iterator[Entry]:
        answer = self._answer
        if answer is None or message.id is None or answer.message_id != message.id:
            yield from self._flush()
            answer = self._answer = _Answer(
                message_id=message.id, model=message.model or "unknown", timestamp=self._timestamp
            )
        if message.usage is not None:
            answer.usage = usage_of(message.usage)
        if message.stop_reason is not None:
            answer.stop_reason = _STOP_REASONS.get(message.stop_reason, "stop")
        blocks = [message.content] if isinstance(message.content, str) else message.content
        if record.is_api_error_message is True:
            answer.error = "\n".join(texts(blocks)) or "API error"
            return
        for block in blocks:
            converted = self._assistant_block(block)
            if converted is None:
                continue
            answer.blocks.append(converted)
            answer.chars += block_size(converted)
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
        if depth(arguments) > MAX_INPUT_DEPTH:
            raise transcript_error(
                self._line, f"a tool call's input nested deeper than {MAX_INPUT_DEPTH}"
            )
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

    def _user(self, record: Record, message: RecordMessage) -> Iterator[Entry]:
        content = message.content
        if record.is_compact_summary is True:
            yield from self._compaction(joined_text(content))
            return
        if isinstance(content, list) and any(is_result(block) for block in content):
            self._results([block for block in content if is_result(block)])
            if self._answer is not None and self._answer.chars > MAX_ANSWER_CHARS:
                yield from self._flush()
            rest = [block for block in content if not is_result(block)]
            if not texts(rest) and not images(rest):
                return
            content = rest
        yield from self._flush_answer()
        text = joined_text(content)
        stripped = text.lstrip()
        if stripped.startswith(_CAVEAT) or stripped.startswith(_LOCAL_OUTPUT):
            return
        if stripped.startswith("<bash-input>"):
            yield from self._flush()
            self._shell_command = (between(text, "bash-input") or "", self._timestamp)
            return
        if stripped.startswith(("<bash-stdout>", "<bash-stderr>")):
            yield from self._flush()
            yield from self._shell_run(text)
            return
        if "<command-name>" in text:
            typed = typed_command(text)
            blocks: list[UserContentBlock] = [TextContent(text=typed)] if typed else []
        else:
            blocks = [TextContent(text=t) for t in texts(content)]
            blocks += images(content if isinstance(content, list) else [])
        if blocks:
            yield from self._say(blocks)

    def _say(self, blocks: list[UserContentBlock]) -> Iterator[Entry]:
        """Consecutive user records are one message to the model (Claude Code merges
        them before it sends them): they are gathered into one pi user message."""
        if self._said is None:
            self._said = ([], self._timestamp)
            self._said_chars = 0
        said = self._said[0]
        said += blocks
        self._said_chars += sum(block_size(b) for b in blocks)
        if len(said) > MAX_ANSWER_BLOCKS or self._said_chars > MAX_ANSWER_CHARS:
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
            result_blocks: list[UserContentBlock] = [TextContent(text=t) for t in texts(parts)]
            result_blocks += images(parts)
            call = answer.calls[index]
            answer.results[index] = ToolResultMessage(
                tool_call_id=call.id,
                tool_name=call.name,
                content=result_blocks,
                is_error=block.get("is_error") is True,
                timestamp=self._ms(),
            )
            answer.chars += sum(block_size(b) for b in result_blocks)

    def _shell_run(self, text: str) -> Iterator[Entry]:
        command, _ = self._shell_command or ("", self._timestamp)
        self._shell_command = None
        output = "\n".join(
            part for part in (between(text, "bash-stdout"), between(text, "bash-stderr")) if part
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
            content: str | list[UserContentBlock] = joined_blocks(blocks)
            if len(content) == 1 and isinstance(content[0], TextContent):
                content = content[0].text
            message = UserMessage(content=content, timestamp=epoch_ms(timestamp))
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
                usage=answer.usage or usage_of({}),
                stop_reason=stop,
                error_message=answer.error,
                timestamp=epoch_ms(answer.timestamp),
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
        return epoch_ms(self._timestamp)
