"""What the summary benchmark measures in a summary's text (``bench/summary_bench.py``).

- ``original_entities`` / ``original_found``: the rule this corpus was first measured
  with (the primary figure): every backticked span of the model's summary (plain words
  too) and every path-shaped word outside them that holds a slash or ends in a common
  extension ("pause/resume" included), each named when the other summary has it as
  written.
- ``entities`` / ``found``: a refined rule: backticked names (plain words left out)
  and file paths written without backticks, a path being a word that ends in a file
  extension, starts with ``/``, ``~/``, ``./`` or ``../``, or ends with ``/``
  ("pause/resume" or "Razorpay/Stripe" are alternatives, not paths); a call ``f()`` is
  named by ``f``.
- ``plain_words``: backticked text that is not a name: words of letters and spaces only
  with an English function word among them (articles, pronouns, prepositions,
  conjunctions, auxiliaries: "for", "that", "and"), or a span that starts or ends with a
  space (backticks paired wrongly). A single content word (`tests`) counts as a name:
  it may be a command or a tool.
- ``cut_off_items``: list items that stop mid-sentence: ending in ":" (with nothing
  under them), ",", ";", "…", "...", an open bracket, or a function word.
- ``first_person_lines``: lines of Goal, Key Decisions and Done in the first person
  ("I", "we", "let me", "my"), outside code spans and quotes.

Each is a plain rule on the text, so the same numbers come out for any corpus.
"""

from __future__ import annotations

import re
from typing import Final

from sessiond.llm.extractive.text import (
    FIRST_PERSON_WORDS,
    FUNCTION_WORD_ENDINGS,
    FUNCTION_WORDS,
)

# The same word lists the summarizer uses: one definition of English's closed word
# classes and of the first person.
_FIRST_PERSON: Final = FIRST_PERSON_WORDS
_BACKTICKED: Final = re.compile(r"`([^`\n]+)`")
_FENCE: Final = re.compile(r"^\s*(```|~~~)")
_PATH: Final = re.compile(
    r"(?<![\w/.@-])(?:~|\.{1,2})?/?(?:[\w@.-]+/)+[\w@.-]*\w|\b[\w-]+\.[a-z]{1,5}\b"
)
_EXTENSIONS: Final = re.compile(
    r"\.(py|ts|tsx|js|jsx|mjs|cjs|json|jsonl|md|toml|yaml|yml|rs|go|sh|txt|css|html|sql|"
    r"lua|java|kt|swift|rb|c|h|cpp|hpp|cs|vue|svelte|lock|env|ini|cfg)$"
)
_ITEM: Final = re.compile(r"^(\s*)(?:[-*+]|\d{1,3}[.)])\s+(?:\[[ xX]\]\s+)?(.*)$")
_HEADING: Final = re.compile(r"^#{1,6}\s+(.*?)\s*$")
_WORD: Final = re.compile(r"[A-Za-z']+")
_QUOTED: Final = re.compile(r"\"[^\"\n]*\"|“[^”\n]*”")


def _prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    lines: list[str] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(line)
    return lines


def backticked(text: str) -> list[str]:
    """The code spans of the text outside fences, in order (repeats kept)."""
    return [span for line in _prose_lines(text) for span in _BACKTICKED.findall(line)]


def entities(summary: str) -> list[str]:
    """The named entities of a summary: backticked names and file paths, each once."""
    found: dict[str, None] = {}
    for name in backticked(summary):
        if name.strip() and not is_plain_words(name):
            found.setdefault(name.strip(), None)
    for line in _prose_lines(summary):
        for match in _PATH.finditer(_BACKTICKED.sub(" ", line)):
            text = match.group(0).rstrip(".")
            if (
                _EXTENSIONS.search(text)
                or text.startswith(("/", "~/", "./", "../"))
                or (text.endswith("/") and text.count("/") >= 2)
            ):
                found.setdefault(text, None)
    return [name for name in found if len(name) > 1]


# The rule this corpus was first measured with, kept as the primary figure:
# every backticked span of the whole text (prose or code, plain words too) and every
# path-shaped word outside them that holds a slash or ends in a common extension, each
# found when the other text has it as written.
_ORIGINAL_PATH: Final = re.compile(
    r"(?<![\w/.@-])(?:~|\.{1,2})?/?(?:[\w@.-]+/)+[\w@.-]*\w|\b[\w-]+\.[a-z]{1,5}\b"
)
_ORIGINAL_EXTENSIONS: Final = re.compile(
    r"\.(py|ts|tsx|js|mjs|json|jsonl|md|toml|yaml|yml|rs|go|sh|txt|css|html)$"
)


def original_entities(summary: str) -> list[str]:
    """The named entities of a summary under the original rule (see above)."""
    found: dict[str, None] = {}
    for name in _BACKTICKED.findall(summary):
        found.setdefault(name.strip(), None)
    for match in _ORIGINAL_PATH.finditer(_BACKTICKED.sub(" ", summary)):
        text = match.group(0).rstrip(".")
        if "/" in text or _ORIGINAL_EXTENSIONS.search(text):
            found.setdefault(text, None)
    return [name for name in found if len(name) > 1]


def original_found(name: str, text: str) -> bool:
    """Whether ``text`` names the entity under the original rule: as written."""
    return name in text


def found(name: str, text: str) -> bool:
    """Whether ``text`` names the entity ``name`` (the refined rule): a call ``f()`` is
    named by ``f``."""
    return name in text or (name.endswith("()") and len(name) > 3 and name[:-2] in text)


def is_plain_words(span: str) -> bool:
    """Whether backticked text is plain language rather than a name (see the module)."""
    if span != span.strip():
        return True
    words = span.split()
    if not all(word.isalpha() for word in words):
        return False
    return any(word.lower() in FUNCTION_WORDS for word in words)


def plain_words(summary: str) -> list[str]:
    return [span for span in backticked(summary) if is_plain_words(span)]


def _items(text: str) -> list[tuple[str, list[str], bool]]:
    """Each list item outside fences: its text, the headings above it, and whether what
    follows belongs to it (lines indented deeper, or a fenced block right after it)."""
    raw = text.splitlines()
    items: list[tuple[str, list[str], bool]] = []
    headings: list[str] = []
    fenced = False
    for index, line in enumerate(raw):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        heading = _HEADING.match(line)
        if heading is not None:
            level = len(line) - len(line.lstrip("#"))
            headings = [*headings[: max(0, level - 2)], heading.group(1)]
            continue
        item = _ITEM.match(line)
        if item is None:
            continue
        indent = len(item.group(1))
        following = next((later for later in raw[index + 1 :] if later.strip()), "")
        nested = bool(_FENCE.match(following)) or (
            len(following) - len(following.lstrip()) > indent
        )
        items.append((item.group(2).strip(), list(headings), nested))
    return items


def cut_off_items(summary: str) -> list[str]:
    cut: list[str] = []
    for text, _headings, nested in _items(summary):
        if not text:
            continue
        end = text.rstrip("*_ ")
        words = _WORD.findall(end[-30:])
        last = words[-1].lower() if words and end[-1:].isalpha() else ""
        if (
            end.endswith((",", ";", "…", "...", "(", "[", "{"))
            or last in FUNCTION_WORD_ENDINGS
            or (end.endswith(":") and not nested)
        ):
            cut.append(text)
    return cut


def first_person_lines(summary: str) -> list[str]:
    """Lines of Goal, Key Decisions and Done in the first person, outside code and quotes."""
    found: list[str] = []
    section = ""
    for line in _prose_lines(summary):
        heading = _HEADING.match(line)
        if heading is not None:
            title = heading.group(1).strip().lower()
            if line.startswith("## "):
                section = title
            elif line.startswith("### "):
                section = title if "progress" in section or section == "done" else section
            continue
        if not line.strip() or not any(n in section for n in ("goal", "decision", "done")):
            continue
        prose = _QUOTED.sub(" ", _BACKTICKED.sub(" ", line))
        if any(word.lower() in _FIRST_PERSON for word in _WORD.findall(prose)):
            found.append(line.strip())
    return found


def done_is_empty(summary: str) -> bool:
    """Whether the Done section of the history part says "(none)"."""
    lines = _prose_lines(summary)
    for index, line in enumerate(lines):
        if line.strip().lower() == "### done":
            following = next((later.strip() for later in lines[index + 1 :] if later.strip()), "")
            return following.lower().startswith("- (none")
    return False
