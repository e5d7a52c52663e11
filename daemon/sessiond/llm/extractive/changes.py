"""The lines of code a reader would quote: of a change, and of a file read.

- A change's lines are those its new text has and the text it replaced had not (an
  edit), or its whole text (a file written). A line is worth quoting when it declares
  something or holds names the conversation talks about; the best lines of a file's
  changes are kept, in the file's order, each whole (a line too long for a summary is
  left out, never cut). Comments, blank lines and lines of punctuation say nothing.
- A file read shows the declarations in it that the conversation talks about, each as
  its line in the file (a signature says what a function takes and returns).

Scores are counts of the conversation's own names, so nothing here knows a language.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Final

from sessiond.llm.extractive.facts import Action, Facts
from sessiond.llm.extractive.names import DECLARATION, code_spans, code_words
from sessiond.llm.extractive.text import cached, unique

# Lines shorter than this say little; longer ones are data or minified code.
_MIN_LINE: Final = 8
MAX_LINE: Final = 160
# A declaration counts as much as a line with this many names the conversation uses.
_DECLARATION_SCORE: Final = 3
# One name counts at most this much, however often it was mentioned.
_NAME_CAP: Final = 3
_IDENTIFIER: Final = re.compile(r"[A-Za-z_$][\w$]{2,}")
_COMMENT: Final = ("//", "/*", "* ", "*/", "# ", "#!", "<!--", "-- ", '"""', "'''")
# A read tool's line numbers ("  12→code", "12\tcode"): not part of the line.
_LINE_NUMBER: Final = re.compile(r"^\s*\d{1,7}(?:→|\t)")


def name_counts(facts: Facts) -> Counter[str]:
    """How many of the user's and the assistant's messages use each identifier (in code
    font, or shaped as code in prose): the names the conversation talks about."""
    known = facts.memo.get("name_counts")
    if isinstance(known, Counter):
        return known
    counts: Counter[str] = Counter()
    for text in (*facts.requests, *facts.replies, *facts.reports, *facts.thoughts):
        counts.update(_message_identifiers(text))
    facts.memo["name_counts"] = counts
    return counts


@cached
def _message_identifiers(text: str) -> frozenset[str]:
    found: set[str] = set(code_words(text))
    for span in code_spans(text):
        found.update(_IDENTIFIER.findall(span))
    return frozenset(found)


def _quotable(line: str) -> bool:
    return (
        _MIN_LINE <= len(line) <= MAX_LINE
        and not line.startswith(_COMMENT)
        and "```" not in line
        and "~~~" not in line
        and sum(map(str.isalnum, line)) >= len(line) // 3
    )


def _score(line: str, counts: Counter[str]) -> int:
    score = sum(min(counts[name], _NAME_CAP) for name in set(_IDENTIFIER.findall(line)))
    if DECLARATION.match(line):
        score += _DECLARATION_SCORE
    return score


def _scored(lines: Iterable[str], counts: Counter[str]) -> list[tuple[int, str]]:
    return [
        (_score(line, counts), line)
        for line in unique(line.strip() for line in lines)
        if _quotable(line)
    ]


def changed_lines(
    facts: Facts, actions: list[Action], counts: Counter[str], limit: int
) -> list[str]:
    """The lines worth quoting of the changes ``actions`` made to one file, as a diff:
    "+" before a line brought in, "-" before one taken out (counted half: what a change
    removed matters less than what it made)."""
    key = ("changed_lines", tuple(id(action) for action in actions))
    marked = facts.memo.get(key)
    if not isinstance(marked, list):
        marked = _marked(actions, counts)
        facts.memo[key] = marked
    order = {line: index for index, (_, line) in enumerate(marked)}
    best = sorted((m for m in marked if m[0] > 0), key=lambda m: (-m[0], order[m[1]]))[:limit]
    # Removed lines first, then added ones, each kind in the change's order.
    return sorted((line for _, line in best), key=lambda line: (line[0] == "+", order[line]))


def _marked(actions: list[Action], counts: Counter[str]) -> list[tuple[int, str]]:
    added = _scored((line for action in actions for line in action.added_lines), counts)
    shown_added = {line for _, line in added}
    removed = [
        (score // 2, line)
        for score, line in _scored(
            (line for action in actions for line in action.removed_lines), counts
        )
        if line not in shown_added
    ]
    marked = [(score, "+ " + line) for score, line in added]
    return marked + [(score, "- " + line) for score, line in removed]


def declarations_read(result: str, counts: Counter[str], limit: int) -> list[str]:
    """Lines of a file read that declare a name the conversation talks about."""
    lines = (_LINE_NUMBER.sub("", line, count=1) for line in result.splitlines())
    found = []
    for line in lines:
        match = DECLARATION.match(line)
        # A declaration ends its line; "type Id," is an import list's item, not one.
        if match is None or line.rstrip().endswith(","):
            continue
        if counts[match.group(2)] and _quotable(line.strip()):
            found.append(line.strip().removesuffix("{").rstrip())
    return unique(found)[:limit]
