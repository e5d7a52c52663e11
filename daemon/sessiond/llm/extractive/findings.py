"""The names that matter, and the fewest of the assistant's own sentences that state them.

A name matters by how much the conversation works on it: each message (or piece of
the assistant's reasoning) that mentions it counts once, a request's names twice (they
are the task), and a name an edit or write declared or brought in counts once more.
The assistant's sentences that carry names are the findings ("the crash comes from
`validate()`", "`pnpm()` contains `npm()`"). They are chosen greedily, each time the
one that states the most weight of names not yet stated per character, so that a
handful of sentences carries most of what a reader must know, each in its context. A
candidate is a finished statement (``text.is_finished``) in the third person (reports
lose their "I"; intentions such as "let me ..." are left out), whole, never cut.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Final

from sessiond.llm.extractive.facts import Facts
from sessiond.llm.extractive.names import code_spans, prose_names
from sessiond.llm.extractive.text import (
    cached,
    impersonal,
    in_first_person,
    is_finished,
    sentences,
    starts_as_statement,
)

# Shorter sentences say too little to stand alone; longer ones are lists or logs.
_MIN_CHARS: Final = 24
_REQUEST_WEIGHT: Final = 2
# Narration of the steps, not a finding: what comes next ("Now let me check", "Next,
# I'll run", "Now replace the old ..."), or a sentence that opens by sequencing.
_NARRATION: Final = re.compile(
    r"^\W*(?:(?:now|next|first|then|finally|ok(?:ay)?|great|good|perfect|alright)\b"
    r"|(?:let me|let's|i'll|i will|i need to|i'm going to|we'll|we need to|time to)\b)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Finding:
    sentence: str
    names: tuple[str, ...]
    order: int


def name_weights(facts: Facts) -> Counter[str]:
    """How much the conversation worked on each name (see the module)."""
    weights: Counter[str] = Counter()
    for request in facts.requests:
        for name in _names_in(request):
            weights[name] += _REQUEST_WEIGHT
    for reply in (*facts.replies, *facts.reports):
        for name in _names_in(reply):
            weights[name] += 1
    for thought in facts.thoughts:
        for name in _names_in(thought):
            weights[name] += 1
    for action in facts.actions:
        if action.writes and action.succeeded:
            for name in (*action.defines, *action.added):
                weights[name] += 1
    return weights


def discussed_names(facts: Facts) -> set[str]:
    """The names the user or the assistant wrote about (requests, replies, reasoning)."""
    texts = [*facts.requests, *facts.replies, *facts.reports, *facts.thoughts]
    return {name for text in texts for name in _names_in(text)}


@cached
def _names_in(text: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys((*code_spans(text), *prose_names(text))))


def candidates(facts: Facts, limit: int) -> list[Finding]:
    """The assistant's sentences that could stand alone in a summary, with their names."""
    found: list[Finding] = []
    seen: set[str] = set()
    for reply in (*facts.replies, *facts.reports):
        for sentence in sentences(reply):
            if not _MIN_CHARS <= len(sentence) <= limit or sentence in seen:
                continue
            seen.add(sentence)
            if _NARRATION.match(sentence) or not is_finished(sentence):
                continue
            if not starts_as_statement(sentence):
                continue
            statement = impersonal(sentence)
            if in_first_person(statement):
                continue
            names = _names_in(sentence)
            if names:
                found.append(Finding(statement, names, len(found)))
    return found


def choose(
    findings: list[Finding], weights: Counter[str], stated: set[str], budget: int
) -> list[Finding]:
    """Findings that state the most weight of names not in ``stated`` within ``budget``
    characters, in the order the conversation said them."""
    covered = set(stated)
    chosen: list[Finding] = []
    pool = list(findings)
    used = 0
    while pool and used < budget:
        best: Finding | None = None
        best_score = 0.0
        for finding in pool:
            gain = sum(weights[name] for name in finding.names if name not in covered)
            score = gain / (len(finding.sentence) + 40) ** 0.5
            if score > best_score:
                best, best_score = finding, score
        if best is None:
            break
        pool.remove(best)
        if used + len(best.sentence) > budget:
            continue
        chosen.append(best)
        covered.update(best.names)
        used += len(best.sentence) + 4
    return sorted(chosen, key=lambda finding: finding.order)
