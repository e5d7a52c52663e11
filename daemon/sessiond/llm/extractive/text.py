"""Small text helpers the rules share: sentences, clipping, names in backticks."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import TypeVar

# A sentence ends at . ! or ? before a space (people type lowercase after it too), but
# not after the usual abbreviations or a list item's number.
_SENTENCE_END = re.compile(
    r"(?<=[.!?])(?<![ (]e\.g\.)(?<![ (]i\.e\.)(?<! etc\.)(?<! vs\.)(?<!\b\d\.)(?<!\b\d\d\.)\s+"
    # After closing emphasis, a quote or a bracket: "**All 12 pass.** Now ..."
    r"|(?<=[.!?][*_\"')\]\u201d])\s+|(?<=[.!?][*_][*_])\s+"
    r"|\n+",
    re.IGNORECASE,
)
_FENCE = re.compile(r"^[ \t]*(```|~~~).*?(?:^[ \t]*\1|\Z)", re.DOTALL | re.MULTILINE)
# A list item's marker, left over when a line is read as a sentence.
_BULLET = re.compile(r"^(?:[-*+\u2022]|\d{1,2}[.)])\s+")
_TAG_LINE = re.compile(r"^\s*</?[A-Za-z][\w:.-]{0,40}>\s*$")
# A Markdown heading's marker, left over when a heading is read as a sentence.
_HEADING_MARK = re.compile(r"^#{1,6}\s+")
# Words a request opens with that carry no task ("ok, so ...").
_FILLER = re.compile(
    r"^(?:(?:ok(?:ay)?|alright|right|so|well|hey|hi|hello|great|thanks?|thank you|cool|nice"
    r"|perfect|good|yes|yeah|no|now|please)\b[,.!:;]?\s*)+",
    re.IGNORECASE,
)


_F = TypeVar("_F", bound=Callable[..., object])
_CACHES: list[Callable[..., object]] = []


def cached(function: _F) -> _F:
    """``lru_cache``, registered so that ``clear_caches`` can empty it (benchmarks)."""
    wrapped = lru_cache(maxsize=4096)(function)
    _CACHES.append(wrapped)
    return wrapped  # type: ignore[return-value]


def clear_caches() -> None:
    for function in _CACHES:
        function.cache_clear()  # type: ignore[attr-defined]


def one_line(text: str) -> str:
    return " ".join(text.split())


def strip_fences(text: str) -> str:
    """``text`` without its fenced code blocks (code is not prose)."""
    return _FENCE.sub("\n", text) if "```" in text or "~~~" in text else text


@cached
def sentences(text: str) -> tuple[str, ...]:
    """Sentences of prose; code blocks are left out because they are not sentences.
    (Cached: the summary is rendered again at smaller sizes from the same messages.)"""
    prose = strip_fences(text)
    parts = (
        _BULLET.sub("", _HEADING_MARK.sub("", one_line(part)))
        for part in _SENTENCE_END.split(prose)
        # A table row is data, and a line that is only a tag is markup: not sentences.
        if not part.lstrip().startswith("|") and not _TAG_LINE.match(part)
    )
    return tuple(part for part in parts if part)


def clip(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters at a word boundary, marked with "…"."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    if space > limit * 0.6:
        cut = cut[:space]
    cut = cut.rstrip(" ,;:")
    # An odd number of backticks would open a code span that never closes.
    if cut.count("`") % 2:
        cut = cut[: cut.rfind("`")].rstrip()
    return f"{cut} …"


def strip_filler(text: str) -> str:
    original = text.strip()
    stripped = _FILLER.sub("", original)
    if not stripped:
        return original
    return stripped if stripped == original else stripped[:1].upper() + stripped[1:]


# "I" or "we" opening a report, with what follows it in the assistant's voice.
_REPORTER = re.compile(
    r"^(?:(?:i|we)(?:'ve| have|'ll| will)?\s+"
    r"(?:decided\s+to\s+|chose\s+to\s+|opted\s+to\s+)?)",
    re.IGNORECASE,
)
FIRST_PERSON_WORDS = frozenset(
    [
        "i",
        "i'm",
        "i'll",
        "i've",
        "i'd",
        "me",
        "my",
        "mine",
        "myself",
        "we",
        "we're",
        "we'll",
        "we've",
        "we'd",
        "us",
        "our",
        "ours",
        "ourselves",
        "let's",
    ]
)
_WORD = re.compile("[A-Za-z\u2019']+")
_QUOTED = re.compile(r"\"[^\"\n]*\"|“[^”\n]*”")
_CODE_OR_QUOTE = re.compile(r"`[^`\n]*`")
# A request's opening that asks rather than says what to do: "can you", "I want you to".
_ASKING = re.compile(
    r"^(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?|please\s+"
    r"|i\s+(?:want|need|would\s+like|'d\s+like)\s+(?:you\s+)?to\s+"
    r"|(?:i|we)\s+(?:need|have|want)\s+to\s+|we\s+should\s+|let's\s+|lets\s+"
    r"|help\s+me\s+(?:to\s+)?)+",
    re.IGNORECASE,
)
# How an unfinished sentence ends: it introduces something, or stops mid-phrase.
_OPEN_ENDINGS = (":", ",", ";", "(", "[", "{", "-", "—", "…", "...", "/", "&", "+", "=")


def impersonal(sentence: str) -> str:
    """A report in the assistant's voice as a checkpoint line: "I created X" -> "Created X"."""
    stripped = _REPORTER.sub("", sentence, count=1)
    # "We now handle x" would read as an instruction without its subject.
    if stripped == sentence or not stripped or stripped.lower().startswith(("now ", "also ")):
        return sentence
    return stripped[:1].upper() + stripped[1:]


def in_first_person(text: str) -> bool:
    """Whether the text speaks as "I" or "we" outside its code spans and quotes."""
    prose = _QUOTED.sub(" ", _CODE_OR_QUOTE.sub(" ", text)).replace("\u2019", "'")
    return any(word.lower() in FIRST_PERSON_WORDS for word in _WORD.findall(prose))


def is_finished(sentence: str) -> bool:
    """Whether a sentence ends as a statement does, not introducing or breaking off."""
    end = sentence.rstrip(" *_")
    if not end or end.endswith(_OPEN_ENDINGS):
        return False
    if end[-1].isalpha():
        words = _WORD.findall(end[-24:])
        last = words[-1].lower() if words else ""
        return last in _FINAL_WORDS or last not in FUNCTION_WORD_ENDINGS
    return True


# The closed word classes of English (articles, pronouns, prepositions, conjunctions,
# auxiliaries): a sentence does not end on one, and plain words holding one are a phrase.
FUNCTION_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "this",
        "that",
        "these",
        "those",
        "some",
        "any",
        "each",
        "every",
        "no",
        "all",
        "both",
        "either",
        "neither",
        "i",
        "me",
        "my",
        "mine",
        "we",
        "us",
        "our",
        "ours",
        "you",
        "your",
        "yours",
        "he",
        "him",
        "his",
        "she",
        "her",
        "hers",
        "it",
        "its",
        "they",
        "them",
        "their",
        "theirs",
        "who",
        "whom",
        "whose",
        "which",
        "what",
        "where",
        "when",
        "why",
        "how",
        "and",
        "or",
        "but",
        "nor",
        "so",
        "yet",
        "if",
        "then",
        "than",
        "because",
        "since",
        "while",
        "although",
        "though",
        "unless",
        "until",
        "as",
        "at",
        "by",
        "for",
        "from",
        "in",
        "into",
        "of",
        "off",
        "on",
        "onto",
        "out",
        "over",
        "to",
        "up",
        "upon",
        "with",
        "within",
        "without",
        "about",
        "above",
        "across",
        "after",
        "against",
        "along",
        "among",
        "around",
        "before",
        "behind",
        "below",
        "beneath",
        "beside",
        "between",
        "beyond",
        "during",
        "except",
        "inside",
        "near",
        "outside",
        "past",
        "through",
        "toward",
        "towards",
        "under",
        "via",
        "is",
        "am",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "do",
        "does",
        "did",
        "done",
        "have",
        "has",
        "had",
        "having",
        "will",
        "would",
        "shall",
        "should",
        "can",
        "could",
        "may",
        "might",
        "must",
        "not",
        "there",
        "here",
        "also",
        "just",
        "only",
        "very",
        "too",
    ]
)
# Those a finished sentence may end on ("fixed it", "all done", "tests pass now").
_FINAL_WORDS = frozenset(
    [
        "it",
        "them",
        "this",
        "that",
        "these",
        "those",
        "here",
        "there",
        "too",
        "also",
        "out",
        "up",
        "off",
        "on",
        "in",
        "over",
        "down",
        "all",
        "done",
        "me",
        "us",
        "you",
        "him",
        "her",
        "mine",
        "ours",
        "yours",
        "theirs",
    ]
)
FUNCTION_WORD_ENDINGS = FUNCTION_WORDS - _FINAL_WORDS


def starts_as_statement(sentence: str) -> bool:
    """Whether a sentence opens as a statement does: a capital, a digit, code, emphasis or
    a quote; not lowercase (the tail of a broken line) nor wholly in brackets (an aside)."""
    first = sentence.lstrip()[:1]
    if sentence.lstrip().startswith("(") and sentence.rstrip().endswith((")", ").")):
        return False
    return first.isupper() or first.isdigit() or first in '`*_"\u201c[~./@$#'


def as_task(sentence: str) -> str:
    """A request's sentence as the task it asks for: "Can you fix X?" -> "Fix X"."""
    stripped = _ASKING.sub("", sentence.strip(), count=1)
    if not stripped or stripped == sentence.strip():
        return sentence.strip()
    task = stripped[:1].upper() + stripped[1:]
    return task[:-1] + "." if task.endswith("?") else task


def as_sentence(text: str) -> str:
    """``text`` ending as a sentence does (a full stop added after a bare last word)."""
    end = text.rstrip()
    return end + "." if end[-1:].isalnum() else end


def whole_sentences(parts: Iterable[str], limit: int) -> str:
    """As many of ``parts`` (whole sentences) as fit in ``limit``; "" if the first does
    not: a sentence is never cut."""
    kept: list[str] = []
    used = 0
    for part in parts:
        if used + len(part) + (1 if kept else 0) > limit:
            break
        kept.append(part)
        used += len(part) + (1 if len(kept) > 1 else 0)
    return " ".join(kept)


def opening_statements(text: str, limit: int, count: int = 2) -> str:
    """The first ``count`` sentences of a message up to the first unfinished one (one that
    introduces a list or a tool call), whole, within ``limit``; "" if there are none."""
    kept: list[str] = []
    for sentence in sentences(text)[:count]:
        if not is_finished(sentence):
            break
        kept.append(sentence)
    return whole_sentences(kept, limit)


def gist(text: str, limit: int, count: int = 2) -> str:
    """The first ``count`` sentences of a message that fit in ``limit``, without opening
    filler; the first sentence is clipped only when it alone is longer than ``limit``."""
    parts = sentences(strip_filler(text))
    if not parts:
        return ""
    return whole_sentences(parts[:count], limit) or clip(parts[0], limit)


def unique(items: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    result: list[str] = []
    for item in items:
        if item and item not in seen:
            seen.add(item)
            result.append(item)
    return result


def code_list(items: list[str], limit: int) -> str:
    shown = ", ".join(f"`{item}`" for item in items[:limit])
    if len(items) > limit:
        shown += f" (+{len(items) - limit} more)"
    return shown


def quote(text: str, limit: int, indent: str = "  ") -> str:
    """A Markdown quote, indented to belong to the list item above it."""
    lines = clip(text, limit).splitlines()
    return "\n".join(f"{indent}> {line}" if line.strip() else f"{indent}>" for line in lines)


def excerpt(text: str, limit: int) -> str:
    """Output quoted in code font, cut (and marked so) inside the quote when too long."""
    shown = text if len(text) <= limit else text[: max(1, limit - 2)].rstrip() + " …"
    return f"`{shown.replace('`', chr(39))}`"
