"""Checkpoints into text, at about the size a model's summary of the same span would be.

The size target grows with the conversation, 7 % of it after a base of 4,000 characters
and up to 24,000 (a long span has more work, code and names to tell; a model's summary of
a long span is 10,000 to 25,000 characters), and never passes the request's budget.
When the text is over the target, every limit is scaled down and the text
rendered again; older Done items are folded into one line of the names they
mention before any is dropped; only as a last resort is the text cut.
"""

from __future__ import annotations

import re
from dataclasses import fields

from sessiond.llm.extractive.build import build_checkpoint
from sessiond.llm.extractive.checkpoint import MARKER, Checkpoint, merge, parse_checkpoint
from sessiond.llm.extractive.facts import Facts
from sessiond.llm.extractive.limits import Limits
from sessiond.llm.extractive.names import code_spans, names_only_in_code
from sessiond.llm.extractive.requests import task_line
from sessiond.llm.extractive.text import (
    code_list,
    gist,
    is_finished,
    opening_statements,
    quote,
    sentences,
    strip_fences,
    unique,
    whole_sentences,
)
from sessiond.wire.completion import Purpose

_NONE = "- (none)"
_TRUNCATED = "\n[... extractive summary cut to fit the size limit]"
_FACTORS = (1.0, 0.03)
_SEARCH_STEPS = 6
# Target size: a base plus a share of the conversation.
_TARGET_BASE = 5000
_TARGET_SHARE = 0.09
_TARGET_CEILING = 24000


def size_target(facts: Facts, previous: str | None, budget: int) -> int:
    target = min(_TARGET_CEILING, int(_TARGET_BASE + _TARGET_SHARE * facts.size))
    if facts.pending_request is not None:
        # The open request is quoted word for word, as the prompt asks; it comes on top.
        target += min(len(facts.pending_request), Limits().pending)
    if previous:
        # An update may be as long as the summary it updates, but does not grow by appending.
        target = max(target, min(_TARGET_CEILING, len(strip_fences(previous))))
    return min(target, budget)


def summarize(facts: Facts, previous: str | None, purpose: Purpose, budget: int) -> str:
    target = budget if purpose == "short" else size_target(facts, previous, budget)
    renders: list[str] = []

    def render(factor: float) -> str:
        text = _render(facts, previous, purpose, Limits().scaled(factor))
        text = names_only_in_code(text)
        renders.append(text)
        return text

    if len(render(1.0)) <= target:
        return renders[-1]
    # The largest scale whose text fits, found by halving the interval.
    low, high = _FACTORS[-1], 1.0
    best: str | None = None
    if len(render(low)) <= target:
        best = renders[-1]
        for _ in range(_SEARCH_STEPS):
            middle = (low + high) / 2
            if len(render(middle)) <= target:
                low, best = middle, renders[-1]
            else:
                high = middle
    if best is not None:
        return best
    # Nothing reached the target: the least cut render within a tenth of the shortest.
    shortest = min(len(text) for text in renders)
    text = next(t for t in renders if len(t) <= max(shortest * 1.1, min(target, budget)))
    if len(text) <= budget:
        return text
    cut = text[: max(0, budget - len(_TRUNCATED))]
    newline = cut.rfind("\n")
    if newline > len(cut) // 2:
        cut = cut[:newline]
    return cut + _TRUNCATED


def _render(facts: Facts, previous: str | None, purpose: Purpose, limits: Limits) -> str:
    if purpose == "turnPrefix":
        return _turn_prefix(facts, limits)
    if purpose == "short":
        return _short(facts, limits)
    branch = purpose == "branch"
    base: Checkpoint | None = None
    for text in (previous, *facts.earlier_summaries):
        if text and text.strip():
            # A carried summary keeps its statements; its code blocks are the files' detail.
            parsed = _clip_lines(parse_checkpoint(strip_fences(text)), limits.item * 2)
            base = parsed if base is None else merge(base, parsed, finished=True)
    if base is not None:
        base.critical = _carried(base.critical, limits.carried)
    new = build_checkpoint(facts, limits, goal_known=bool(base and base.goal), branch=branch)
    checkpoint = new if base is None else merge(base, new, finished=_finished_earlier(facts))
    return render_checkpoint(checkpoint, limits, critical=not branch)


def _finished_earlier(facts: Facts) -> bool:
    """Whether the conversation opens by carrying on earlier work and ends that with a reply."""
    return bool(facts.turns) and facts.turns[0].request is None and facts.turns[0].ended_with_reply


def _clip_lines(checkpoint: Checkpoint, limit: int) -> Checkpoint:
    """A previous summary's lines within ``limit``: a longer line keeps the whole
    sentences that fit, and is left out when not even its first one does; a list item
    that breaks off (ends with ":" or mid-phrase) with nothing under it, or whose code
    span never closes, is left out."""
    for spec in fields(checkpoint):
        lines: list[str] = getattr(checkpoint, spec.name)
        shortened = [line for line in (_shortened(line, limit) for line in lines) if line]
        kept = [
            line
            for index, line in enumerate(shortened)
            if not _broken_off(line, shortened[index + 1 : index + 2])
        ]
        setattr(checkpoint, spec.name, kept)
    return checkpoint


def _carried(lines: list[str], budget: int) -> list[str]:
    """A carried summary's context lines within ``budget`` characters: lines that name
    something (code, paths) before lines of prose, each kind in order; the rest is left
    out and counted, so that the new work keeps its room."""
    if sum(len(line) + 1 for line in lines) <= budget:
        return lines
    ranked = sorted(range(len(lines)), key=lambda i: (not _names_something(lines[i]), i))
    kept: set[int] = set()
    used = 0
    for index in ranked:
        if used + len(lines[index]) + 1 > budget:
            continue
        kept.add(index)
        used += len(lines[index]) + 1
    left_out = len(lines) - len(kept)
    note = [f"- ({left_out} lines of the earlier summary left out)"] if left_out else []
    return [line for index, line in enumerate(lines) if index in kept] + note


def _names_something(line: str) -> bool:
    return "`" in line or "/" in line


def _broken_off(line: str, following: list[str]) -> bool:
    body = line.lstrip(" \t")
    marker = _MARKER.match(body)
    if marker is None:
        return False
    if body.count("`") % 2:
        return True  # a code span that never closes: the text was cut or mangled
    if is_finished(body[marker.end() :]):
        return False
    if following:
        after = following[0]
        indent = len(line) - len(body)
        if after.lstrip().startswith(("```", "~~~")) or len(after) - len(after.lstrip()) > indent:
            return False
    return True


def _shortened(line: str, limit: int) -> str:
    if len(line) <= limit:
        return line
    body = line.lstrip(" \t")
    marker = _MARKER.match(body)
    lead = line[: len(line) - len(body)] + (marker.group(0) if marker else "")
    text = body[marker.end() :] if marker else body
    kept = whole_sentences(sentences(text), limit - len(lead))
    return lead + kept if kept else ""


# A terminal's colour and cursor codes (ESC [ ... letter), which tool output often holds.
_TERMINAL_CODES = re.compile(r"\x1b\[[0-9;?]{0,32}[A-Za-z]")
# A list item's marker (and checkbox) at the start of a line.
_MARKER = re.compile(r"(?:[-*+]|\d{1,3}[.)])\s+(?:\[[ xX]\]\s+)?")


def _fold_done(items: list[str], limit: int) -> list[str]:
    """The newest ``limit`` Done items; the older ones become one line of their names."""
    if len(items) <= limit:
        return items
    older, newer = items[: len(items) - limit + 1], items[len(items) - limit + 1 :]
    names = unique(name for item in older for name in code_spans(item))
    if not names:
        return [f"- [x] ({len(older)} earlier steps)", *newer]
    return [f"- [x] Earlier steps touched {code_list(names, limit * 3)}", *newer]


def _lines(items: list[str], limit: int) -> str:
    if not items:
        return _NONE
    kept = items[-limit:]
    if len(items) > limit:
        kept = [f"- ({len(items) - limit} earlier items left out)", *kept]
    return "\n".join(kept)


def render_checkpoint(cp: Checkpoint, limits: Limits, *, critical: bool) -> str:
    goal = "\n".join(cp.goal[: 1 + limits.later_requests]) if cp.goal else "(not stated)"
    steps = cp.next_steps[: max(3, limits.later_requests)] or ["Wait for the user's next request."]
    count = max(limits.done, limits.errors)
    parts = [
        MARKER,
        f"## Goal\n{goal}",
        f"## Constraints & Preferences\n{_lines(cp.constraints, limits.constraints)}",
        "## Progress\n"
        f"### Done\n{_lines(_fold_done(cp.done, limits.done), limits.done + 1)}\n\n"
        f"### In Progress\n{_lines(cp.in_progress, count)}\n\n"
        f"### Blocked\n{_lines(cp.blocked, limits.errors)}",
        f"## Key Decisions\n{_lines(cp.decisions, limits.decisions)}",
        "## Next Steps\n" + "\n".join(f"{n}. {step}" for n, step in enumerate(steps, 1)),
    ]
    if critical:
        # Its size is already bounded line by line (the findings by their budget).
        parts.append(f"## Critical Context\n{_lines(cp.critical, len(cp.critical))}")
    return "\n\n".join(parts)


def _turn_prefix(facts: Facts, limits: Limits) -> str:
    """The opening of a split turn: the request, then the work so far as Done, In
    Progress and Blocked (a long turn's work is done work), then what the kept part
    relies on."""
    requests = facts.requests
    request = _quoted_request(requests[0], limits) if requests else None
    cp = build_checkpoint(facts, limits, goal_known=True)
    done = list(cp.done)
    if facts.files_only_read:
        done.append(f"- [x] Read {code_list(facts.files_only_read, limits.files)}")
    context = [
        line
        for line in cp.critical
        if not line.startswith(("- Files read:", "- Open user request", "- Last reply:"))
    ]
    said = opening_statements(facts.last_reply, limits.last_reply) if facts.last_reply else ""
    if said:
        context.append(f"- Last reply: {said}")
    if facts.last_tool_result:
        shown = _TERMINAL_CODES.sub("", facts.last_tool_result)
        context.append("- Last tool result:\n" + quote(shown, limits.item))
    return "\n\n".join(
        [
            MARKER,
            "## Original Request\n" + (request or "(the request is not in this part of the turn)"),
            "## Early Progress\n"
            f"### Done\n{_lines(_fold_done(done, limits.done), limits.done + 1)}\n\n"
            f"### In Progress\n{_lines(cp.in_progress, limits.errors)}\n\n"
            f"### Blocked\n{_lines(cp.blocked, limits.errors)}",
            f"## Context for Suffix\n{_lines(context, limits.done)}",
        ]
    )


def _quoted_request(request: str, limits: Limits) -> str:
    """The task in a line, then the request in the user's words: its first lines, whole,
    and how much more there was."""
    task = task_line(request, limits.goal)
    kept: list[str] = []
    used = 0
    for line in request.strip().splitlines():
        if used + len(line) + 1 > limits.pending:
            break
        kept.append(line)
        used += len(line) + 1
    rest = len(request.strip()) - used
    parts = [task] if task else []
    if kept and (rest > 0 or len(request) > len(task) * 1.2):
        opening = "\n".join(kept).rstrip()
        if rest > 0:
            opening += f"\n[... {rest:,} more characters]"
        parts.append(quote(opening, len(opening), indent=""))
    return "\n\n".join(parts) or quote(request, limits.pending, indent="")


def _short(facts: Facts, limits: Limits) -> str:
    modified = facts.files_changed
    if modified:
        names = [f"`{path}`" for path in modified[:5]]
        if len(modified) > 5:
            names.append(f"{len(modified) - 5} more files")
        listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        first = f"I changed {listed}."
    else:
        first = "I made no file changes in this part of the session."
    said: list[str] = [first]
    if facts.last_reply:
        said.append(f'My last update said: "{gist(facts.last_reply, limits.item, 2)}"')
    elif facts.pending_request is not None:
        said.append("A user request is still open.")
    return MARKER + "\n" + " ".join(said)
