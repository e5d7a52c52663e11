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
    r"|\n+",
    re.IGNORECASE,
)
_CODE_SPAN = re.compile(r"`([^`\n]{1,120})`")
_FENCE = re.compile(r"^[ \t]*(```|~~~).*?(?:^[ \t]*\1|\Z)", re.DOTALL | re.MULTILINE)
# A list item's marker, left over when a line is read as a sentence.
_BULLET = re.compile(r"^(?:[-*+\u2022]|\d{1,2}[.)])\s+")
# Runs of two or more backticks are fences or quoted fences, not code spans.
_BACKTICK_RUN = re.compile(r"``+")
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


@cached
def sentences(text: str) -> tuple[str, ...]:
    """Sentences of prose; code blocks are left out because they are not sentences.
    (Cached: the summary is rendered again at smaller sizes from the same messages.)"""
    prose = _FENCE.sub("\n", text)
    parts = (_BULLET.sub("", one_line(s)) for s in _SENTENCE_END.split(prose))
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


_FIRST_PERSON = re.compile(
    r"^(?:(?:i|we)(?:'ve| have|'ll| will)?\s+"
    r"(?:decided\s+to\s+|chose\s+to\s+|opted\s+to\s+)?)",
    re.IGNORECASE,
)


def impersonal(sentence: str) -> str:
    """A report in the assistant's voice as a checkpoint line: "I created X" -> "Created X"."""
    stripped = _FIRST_PERSON.sub("", sentence, count=1)
    # "We now handle x" would read as an instruction without its subject.
    if stripped == sentence or not stripped or stripped.lower().startswith(("now ", "also ")):
        return sentence
    return stripped[:1].upper() + stripped[1:]


def gist(text: str, limit: int, count: int = 2) -> str:
    """The first ``count`` sentences of a message, without opening filler, clipped."""
    parts = sentences(strip_filler(text))
    return clip(" ".join(parts[:count]), limit) if parts else ""


@cached
def code_names(text: str) -> tuple[str, ...]:
    """The names written in backticks, in order, each once."""
    prose = _BACKTICK_RUN.sub(" ", _FENCE.sub("\n", text))
    return tuple(unique(name.strip() for name in _CODE_SPAN.findall(prose) if name.strip()))


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
