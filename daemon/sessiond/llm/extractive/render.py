"""Checkpoints into text, at about the size a model's summary of the same span would be.

The size target grows slowly with the conversation (a model writes one to a few
thousand characters whatever the span) and never passes the request's budget.
When the text is over the target, every limit is scaled down and the text
rendered again; older Done items are folded into one line of the names they
mention before any is dropped; only as a last resort is the text cut.
"""

from __future__ import annotations

from dataclasses import fields

from sessiond.llm.base import Purpose
from sessiond.llm.extractive.build import Limits, build_checkpoint, short_command
from sessiond.llm.extractive.checkpoint import MARKER, Checkpoint, merge, parse_checkpoint
from sessiond.llm.extractive.facts import Facts
from sessiond.llm.extractive.text import clip, code_list, code_names, gist, quote, unique

_NONE = "- (none)"
_TRUNCATED = "\n[... extractive summary cut to fit the size limit]"
_FACTORS = (1.0, 0.75, 0.55, 0.4, 0.3, 0.2, 0.12, 0.06, 0.03)
# Target size: a base plus a small share of the conversation, up to a ceiling.
_TARGET_BASE = 2000
_TARGET_SHARE = 0.012
_TARGET_CEILING = 6500


def size_target(facts: Facts, previous: str | None, budget: int) -> int:
    target = min(_TARGET_CEILING, int(_TARGET_BASE + _TARGET_SHARE * facts.size))
    if facts.pending_request is not None:
        # The open request is quoted word for word, as the prompt asks; it comes on top.
        target += min(len(facts.pending_request), Limits().pending)
    if previous:
        # An update may be as long as the summary it updates, but does not grow by appending.
        target = max(target, min(_TARGET_CEILING, len(previous)))
    return min(target, budget)


def summarize(facts: Facts, previous: str | None, purpose: Purpose, budget: int) -> str:
    target = budget if purpose in ("turnPrefix", "short") else size_target(facts, previous, budget)
    renders: list[str] = []
    for factor in _FACTORS:
        text = _render(facts, previous, purpose, Limits().scaled(factor))
        if len(text) <= target:
            return text
        renders.append(text)
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
            parsed = _clip_lines(parse_checkpoint(text), limits.item * 2)
            base = parsed if base is None else merge(base, parsed, finished=True)
    new = build_checkpoint(facts, limits, goal_known=bool(base and base.goal), branch=branch)
    checkpoint = new if base is None else merge(base, new, finished=_finished_earlier(facts))
    return render_checkpoint(checkpoint, limits, critical=not branch)


def _finished_earlier(facts: Facts) -> bool:
    """Whether the conversation opens by carrying on earlier work and ends that with a reply."""
    return bool(facts.turns) and facts.turns[0].request is None and facts.turns[0].ended_with_reply


def _clip_lines(checkpoint: Checkpoint, limit: int) -> Checkpoint:
    """A previous summary's lines, each cut to ``limit`` (ours are cut as they are built)."""
    for spec in fields(checkpoint):
        lines: list[str] = getattr(checkpoint, spec.name)
        setattr(checkpoint, spec.name, [clip(line, limit) for line in lines])
    return checkpoint


def _fold_done(items: list[str], limit: int) -> list[str]:
    """The newest ``limit`` Done items; the older ones become one line of their names."""
    if len(items) <= limit:
        return items
    older, newer = items[: len(items) - limit + 1], items[len(items) - limit + 1 :]
    names = unique(name for item in older for name in code_names(item))
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
        parts.append(f"## Critical Context\n{_lines(cp.critical, count + 8)}")
    return "\n\n".join(parts)


def _turn_prefix(facts: Facts, limits: Limits) -> str:
    requests = facts.requests
    request = quote(requests[0], limits.pending, indent="") if requests else None
    cp = build_checkpoint(facts, limits, goal_known=True)
    progress = [*cp.done, *cp.in_progress, *cp.blocked]
    if facts.files_only_read:
        progress.append(f"- [x] Read {code_list(facts.files_only_read, limits.files)}")
    context: list[str] = []
    if facts.files_modified:
        context.append(f"- Files being changed: {code_list(facts.files_modified, limits.files)}")
    commands = unique(short_command(a.command) for a in facts.actions if a.command)
    if commands:
        context.append(
            f"- Commands run: {code_list(commands[-limits.commands :], limits.commands)}"
        )
    if facts.last_reply:
        context.append(f"- Last reply: {gist(facts.last_reply, limits.last_reply, 3)}")
    if facts.last_tool_result:
        context.append("- Last tool result:\n" + quote(facts.last_tool_result, limits.item * 2))
    return "\n\n".join(
        [
            MARKER,
            "## Original Request\n" + (request or "(the request is not in this part of the turn)"),
            f"## Early Progress\n{_lines(progress, limits.done)}",
            f"## Context for Suffix\n{_lines(context, limits.done)}",
        ]
    )


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
