"""What the user asked: the goal, the later requests, the constraints, a long request's
outline; in the user's words, made impersonal, never cut mid-sentence.

- A request is a task when it says something beyond a bare command: a line of its own
  that starts with "/" is the command the user typed (kept, in code font, as the
  request's title), a line that is wholly a bracketed note ("[Image #1]", "[Request
  interrupted by user]") is the client's annotation, not the user's words.
- A task line is the request's first sentences that fit, its opening turned from asking
  to saying ("Can you fix X?" -> "Fix X."). When it still speaks as "I" or "we" it is
  quoted as the user's words rather than restated; so is the opening of a single
  sentence too long for the line (marked "…" inside the quote).
- A constraint is a whole sentence of a request with a cue (must, never, always,
  prefer, don't, ...).
- A long request (a plan, a specification) is outlined by its own headings, and the
  names a request writes are the task's names.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Final

from sessiond.llm.extractive.names import code_spans, code_words, is_name, prose_names
from sessiond.llm.extractive.text import (
    as_sentence,
    as_task,
    cached,
    clip,
    in_first_person,
    is_finished,
    sentences,
    strip_fences,
    strip_filler,
    unique,
    whole_sentences,
)

_CONSTRAINT: Final = re.compile(
    r"\b(must|must not|mustn't|don't|do not|never|always|prefer|should|shouldn't|avoid"
    r"|make sure|only use|without|keep)\b",
    re.IGNORECASE,
)
_HEADING: Final = re.compile(r"^#{1,3}[ \t]+(\S[^\n]{0,150})$", re.MULTILINE)
# Requests longer than this are documents; their headings outline them.
OUTLINE_ABOVE_CHARS: Final = 1500
_MIN_TASK_WORDS: Final = 3


@cached
def _split(request: str) -> tuple[str, str]:
    """(the slash command the request opens with, or "", the rest without notes). Of
    several commands in a row ("/clear", then "/plan 12") the last is the request's."""
    lines = request.strip().splitlines()
    command = ""
    start = 0  # an index, not slices: a request of many command lines stays linear
    while start < len(lines) and _is_command(lines[start]):
        command = lines[start].strip()
        start += 1
        while start < len(lines) and not lines[start].strip():
            start += 1
    kept = [line for line in lines[start:] if not _is_note(line)]
    return command, "\n".join(kept).strip()


def _is_command(line: str) -> bool:
    words = line.split()
    return bool(words) and words[0].startswith("/") and len(words[0]) > 1 and len(words) <= 12


def _is_note(line: str) -> bool:
    stripped = line.strip()
    return stripped.startswith("[") and stripped.endswith("]") and "](" not in stripped


def is_task(request: str) -> bool:
    """A bare command ("/clear") asks for nothing to be summarized; with arguments or
    words of its own a request is a task."""
    command, rest = _split(request)
    return len(command.split()) > 1 or len(rest.split()) >= _MIN_TASK_WORDS


def task_line(request: str, limit: int, count: int = 2) -> str:
    """The task a request asks for, in a sentence or two (see the module)."""
    command, rest = _split(request)
    parts = list(sentences(strip_filler(rest)))[:count] if rest else []
    if parts:
        parts[0] = as_task(parts[0])
        parts = [as_sentence(part) for part in parts]
    title = f"`{command}`" if command and len(command) <= limit // 2 else ""
    room = limit - len(title) - 2 if title else limit
    text = whole_sentences(parts, room)
    if not text and parts:
        text = _first_clause(parts[0], room)
    if not text and parts:
        # One sentence longer than the line: its opening, quoted and marked as cut.
        return f'{title + ": " if title else ""}The user wrote: "{clip(parts[0], room - 20)}"'
    if text and in_first_person(text):
        text = f'The user wrote: "{text}"' if len(text) + 18 <= room else ""
    if title:
        return f"{title}: {text}" if text else title
    return text


def _first_clause(sentence: str, limit: int) -> str:
    """A sentence too long for a line, shortened at the end of its first clause, or ""."""
    for mark in (". ", "; ", " - ", " \u2014 ", ": "):
        end = sentence.find(mark)
        if 0 < end <= limit - 1 and len(sentence[:end].split()) >= _MIN_TASK_WORDS:
            return sentence[:end].rstrip(" .") + "."
    return ""


def constraints(requests: list[str], limit: int, count: int) -> list[str]:
    found = unique(
        strip_filler(sentence)
        for request in requests
        for sentence in sentences(_split(request)[1])
        if len(sentence) > 12 and len(sentence) <= limit and _CONSTRAINT.search(sentence)
        if is_finished(sentence)
    )
    return [f"- {sentence}" for sentence in found[:count]]


def outline(request: str, count: int) -> list[str]:
    """A long request's own headings, in order (its outline), at most ``count``."""
    if len(request) <= OUTLINE_ABOVE_CHARS:
        return []
    headings = unique(
        " ".join(match.group(1).strip(" #").split()).rstrip(":")
        for match in _HEADING.finditer(strip_fences(request))
    )
    return headings[:count]


def request_names(request: str) -> list[str]:
    """The names a request itself writes: its code spans, then its paths and file names."""
    return unique([*code_spans(request), *prose_names(request)])


# A request shorter than this is told whole by its task line.
_KEY_LINES_ABOVE_CHARS: Final = 400
_KEY_LINE_MIN: Final = 10
_KEY_LINE_MAX: Final = 200
_CODE_SPAN_TEXT: Final = re.compile(r"`([^`\n]+)`")
_IDENTIFIER: Final = re.compile(r"[A-Za-z_$][\w$]{2,}")


def key_lines(request: str, counts: Counter[str], limit: int) -> list[str]:
    """The lines of a long request (a plan, a specification, a log) that carry the most
    names, whole and in their order: each name counts once, more when the conversation
    uses it (``counts``). A line with plain words in code font is left out (it would be
    quoted as a false name)."""
    if len(request) <= _KEY_LINES_ABOVE_CHARS or limit <= 0:
        return []
    scored: list[tuple[int, int, str]] = []
    for index, raw in enumerate(unique(line.strip() for line in request.splitlines())):
        if not _KEY_LINE_MIN <= len(raw) <= _KEY_LINE_MAX or "```" in raw or "~~~" in raw:
            continue
        spans = _CODE_SPAN_TEXT.findall(raw)
        if any(not is_name(span) for span in spans):
            continue
        names = {*spans, *prose_names(raw), *code_words(raw)}
        if not names:
            continue
        words = {word for name in names for word in _IDENTIFIER.findall(name)}
        score = len(names) + sum(min(counts[word], 3) for word in words)
        scored.append((score, index, raw))
    best = sorted(scored, key=lambda s: (-s[0], s[1]))[:limit]
    return [line for _, _, line in sorted(best, key=lambda s: s[1])]
