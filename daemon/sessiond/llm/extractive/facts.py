"""What the rules pull out of a parsed conversation.

Everything here is a plain reading of the text, in order, with no judgement a
model would make: the user's requests, the files the read/write/edit tools
touched (pi's file-operation rule, ``core.fileops``), the commands run, the first error
line of each failing tool result, and what the assistant said last.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sessiond.llm.extractive.parse import ParsedPrompt, Part, unwrap_summary

_ERROR_LINE = re.compile(
    r"\b(error|exception|traceback|failed|failure|fatal|panic|denied|no such file"
    r"|not found|cannot|can't|unable to|segmentation fault)\b|exit (code|status) [1-9]",
    re.IGNORECASE,
)
# "0 failed", "no errors": test summaries that mention failure without any.
_NO_ERROR = re.compile(r"\b(0|no) (failed|failures|errors?)\b", re.IGNORECASE)
_CONSTRAINT = re.compile(
    r"\b(must|must not|mustn't|don't|do not|never|always|prefer|should|shouldn't|avoid"
    r"|make sure|only use|without|keep)\b",
    re.IGNORECASE,
)
_DECISION = re.compile(
    r"\b(decided|decision|instead of|rather than|chose|choose|going with|opted|switched to"
    r"|i'll use|i will use|we'll use|because)\b",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_COMMAND_KEYS = ("command", "cmd", "script")


class UniqueList(list[str]):
    """A list that ignores repeats (and empty strings), in constant time per add."""

    def __init__(self) -> None:
        super().__init__()
        self._seen: set[str] = set()

    def add(self, item: str) -> None:
        if item and item not in self._seen:
            self._seen.add(item)
            self.append(item)


@dataclass
class Facts:
    requests: list[str] = field(default_factory=list)
    # Whether each request got an assistant text answer after it.
    answered: list[bool] = field(default_factory=list)
    earlier_summaries: list[str] = field(default_factory=list)
    files_read: UniqueList = field(default_factory=UniqueList)
    files_modified: UniqueList = field(default_factory=UniqueList)
    commands: UniqueList = field(default_factory=UniqueList)
    errors: UniqueList = field(default_factory=UniqueList)
    constraints: UniqueList = field(default_factory=UniqueList)
    decisions: UniqueList = field(default_factory=UniqueList)
    last_assistant: str | None = None
    last_tool_result: str | None = None
    additional_context: list[str] = field(default_factory=list)
    focus: str | None = None

    @property
    def pending_request(self) -> str | None:
        """The last request when nothing the assistant said came after it."""
        if self.requests and not self.answered[-1]:
            return self.requests[-1]
        return None

    @property
    def files_only_read(self) -> list[str]:
        modified = set(self.files_modified)
        return [path for path in self.files_read if path not in modified]


def one_line(text: str) -> str:
    return " ".join(text.split())


def sentences(text: str) -> list[str]:
    return [one_line(s) for s in _SENTENCE_END.split(text) if s.strip()]


def extract(parsed: ParsedPrompt) -> Facts:
    facts = Facts(additional_context=list(parsed.additional_context), focus=parsed.focus)
    for part in parsed.parts:
        _read_part(facts, part)
    return facts


def _read_part(facts: Facts, part: Part) -> None:
    if part.role == "user":
        summary = unwrap_summary(part.text)
        if summary is not None:
            facts.earlier_summaries.append(summary)
            return
        request = part.text.strip()
        if not request:
            return
        facts.requests.append(request)
        facts.answered.append(False)
        for sentence in sentences(request):
            if _CONSTRAINT.search(sentence):
                facts.constraints.add(sentence)
    elif part.role == "assistant":
        text = part.text.strip()
        if not text:
            return
        facts.last_assistant = text
        if facts.answered:
            facts.answered[-1] = True
        for sentence in sentences(text):
            if _DECISION.search(sentence):
                facts.decisions.add(sentence)
    elif part.role == "toolCalls":
        for call in part.calls:
            path = call.args.get("path")
            if isinstance(path, str) and path:
                if call.name == "read":
                    facts.files_read.add(path)
                elif call.name in ("write", "edit"):
                    facts.files_modified.add(path)
            for key in _COMMAND_KEYS:
                command = call.args.get(key)
                if isinstance(command, str) and command.strip():
                    facts.commands.add(one_line(command))
                    break
    elif part.role == "toolResult":
        facts.last_tool_result = part.text
        error = first_error_line(part.text)
        if error is not None:
            facts.errors.add(error)


def first_error_line(text: str) -> str | None:
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and _ERROR_LINE.search(stripped) and not _NO_ERROR.search(stripped):
            return stripped
    return None
