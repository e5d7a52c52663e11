"""Facts into the sections each prompt asks for, within a size budget.

Sizes are limits on each piece (a quote, a bullet, a list); when the whole
does not fit the budget, every limit is scaled down and the text rendered
again, and only as a last resort is it cut.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from sessiond.llm.base import Purpose
from sessiond.llm.extractive.checkpoint import MARKER, Checkpoint, merge, parse_checkpoint
from sessiond.llm.extractive.facts import Facts, one_line, sentences

_NONE = "- (none recorded)"
_TRUNCATED = "\n[... extractive summary cut to fit the size limit]"


@dataclass(frozen=True)
class Limits:
    goal: int = 800
    item: int = 300
    line: int = 600
    quote: int = 1500
    pending: int = 4000
    files: int = 20
    commands: int = 10
    errors: int = 8
    notes: int = 8
    section_items: int = 40

    def scaled(self, factor: float) -> Limits:
        changes = {
            spec.name: max(
                1 if spec.name in _COUNTS else 40, int(getattr(self, spec.name) * factor)
            )
            for spec in fields(self)
        }
        return replace(self, **changes)


_COUNTS = {"files", "commands", "errors", "notes", "section_items"}


def clip(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters at a word boundary, saying how much went."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    if space > limit * 0.6:
        cut = cut[:space]
    cut = cut.rstrip()
    return f"{cut} ... [{len(text) - len(cut)} more characters]"


def quote(text: str, limit: int, indent: str = "  ") -> str:
    """A Markdown quote, indented to belong to the list item above it."""
    lines = clip(text, limit).splitlines()
    return "\n".join(f"{indent}> {line}" if line.strip() else f"{indent}>" for line in lines)


def code_list(items: list[str], limit: int) -> str:
    shown = ", ".join(f"`{item}`" for item in items[:limit])
    if len(items) > limit:
        shown += f" ... ({len(items) - limit} more)"
    return shown


def summarize(facts: Facts, previous: str | None, purpose: Purpose, budget: int) -> str:
    text = ""
    for factor in (1.0, 0.5, 0.25, 0.12, 0.06, 0.03):
        text = _render(facts, previous, purpose, Limits().scaled(factor))
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
    earlier = [text for text in (previous, *facts.earlier_summaries) if text and text.strip()]
    base: Checkpoint | None = None
    for text in earlier:
        parsed = _clip_lines(parse_checkpoint(text), limits.line)
        base = parsed if base is None else merge(base, parsed, continued=True)
    new = build_checkpoint(facts, limits, goal_known=bool(base and base.goal), branch=branch)
    checkpoint = (
        new if base is None else merge(base, new, continued=facts.last_assistant is not None)
    )
    return render_checkpoint(checkpoint, limits, critical=not branch)


def _clip_lines(checkpoint: Checkpoint, limit: int) -> Checkpoint:
    """A previous summary's lines, each cut to ``limit`` (ours are cut as they are built)."""
    for spec in fields(checkpoint):
        lines: list[str] = getattr(checkpoint, spec.name)
        setattr(checkpoint, spec.name, [clip(line, limit) for line in lines])
    return checkpoint


def build_checkpoint(
    facts: Facts, limits: Limits, *, goal_known: bool, branch: bool = False
) -> Checkpoint:
    cp = Checkpoint()
    requests = facts.requests
    pending = facts.pending_request
    first_later = 0
    if requests and not goal_known:
        cp.goal = [clip(one_line(requests[0]), limits.goal)]
        first_later = 1
        if pending is not None and len(requests) == 1:
            cp.in_progress.append("- [ ] The request under Goal (no reply yet)")
    for index in range(first_later, len(requests)):
        request = f'"{clip(one_line(requests[index]), limits.item)}"'
        if facts.answered[index]:
            cp.done.append(f"- [x] User request: {request}")
        else:
            cp.in_progress.append(f"- [ ] User request: {request}")
    cp.done += [f"- [x] Modified `{path}`" for path in facts.files_modified[-limits.files :]]
    if branch and facts.files_only_read:
        cp.done.append(f"- [x] Read {code_list(facts.files_only_read, limits.files)}")
    cp.done += [
        f"- [x] Ran `{clip(command, limits.item)}`"
        for command in facts.commands[-limits.commands :]
    ]
    cp.blocked = [
        f"- Error seen in tool output: `{clip(error, limits.item)}`"
        for error in facts.errors[-limits.errors :]
    ]
    cp.constraints = [f"- {clip(s, limits.item)}" for s in facts.constraints[: limits.notes]]
    cp.decisions = [f"- {clip(s, limits.item)}" for s in facts.decisions[-limits.notes :]]
    cp.next_steps = _next_steps(facts, limits, branch=branch)
    if not branch:
        cp.critical = _critical(facts, limits)
    return cp


def _next_steps(facts: Facts, limits: Limits, *, branch: bool) -> list[str]:
    steps: list[str] = []
    pending = facts.pending_request
    if pending is not None:
        if branch:
            steps.append(f'Answer the open user request: "{clip(one_line(pending), limits.item)}"')
        else:
            steps.append("Answer the pending user request (quoted verbatim in Critical Context).")
    if facts.errors:
        steps.append("Check whether the errors listed under Blocked are still present.")
    if pending is None:
        if facts.last_assistant and not branch:
            steps.append("Continue from the last assistant message (quoted in Critical Context).")
        elif facts.last_assistant:
            last = sentences(facts.last_assistant)[-1]
            steps.append(f'Continue from the last reply: "{clip(last, limits.item)}"')
        else:
            steps.append("Continue with the goal.")
    return steps


def _critical(facts: Facts, limits: Limits) -> list[str]:
    items: list[str] = []
    if facts.files_modified:
        items.append(f"- Files modified: {code_list(facts.files_modified, limits.files)}")
    if facts.files_only_read:
        items.append(f"- Files read: {code_list(facts.files_only_read, limits.files)}")
    items += [f"- {clip(line, limits.item)}" for line in facts.additional_context]
    if facts.focus:
        items.append(f"- Requested focus: {clip(one_line(facts.focus), limits.item)}")
    if facts.last_assistant:
        items.append("- Last assistant message:\n" + quote(facts.last_assistant, limits.quote))
    pending = facts.pending_request
    if pending is not None:
        items.append("- Pending user request (verbatim):\n" + quote(pending, limits.pending))
    return items


def _lines(items: list[str], limits: Limits, *, keep_first: bool = False) -> str:
    if not items:
        return _NONE
    omitted = max(0, len(items) - limits.section_items)
    kept = items[: limits.section_items] if keep_first else items[omitted:]
    lines = list(kept)
    if omitted:
        note = f"- ... ({omitted} {'later' if keep_first else 'earlier'} items omitted)"
        lines = [*lines, note] if keep_first else [note, *lines]
    return "\n".join(lines)


def render_checkpoint(cp: Checkpoint, limits: Limits, *, critical: bool) -> str:
    goal = _lines(cp.goal, limits, keep_first=True) if cp.goal else "(not stated in this part)"
    steps = cp.next_steps[: limits.section_items] or ["Continue with the goal."]
    parts = [
        MARKER,
        f"## Goal\n{goal}",
        f"## Constraints & Preferences\n{_lines(cp.constraints, limits, keep_first=True)}",
        "## Progress\n"
        f"### Done\n{_lines(cp.done, limits)}\n\n"
        f"### In Progress\n{_lines(cp.in_progress, limits)}\n\n"
        f"### Blocked\n{_lines(cp.blocked, limits)}",
        f"## Key Decisions\n{_lines(cp.decisions, limits)}",
        "## Next Steps\n" + "\n".join(f"{n}. {step}" for n, step in enumerate(steps, 1)),
    ]
    if critical:
        parts.append(f"## Critical Context\n{_lines(cp.critical, limits)}")
    return "\n\n".join(parts)


def _turn_prefix(facts: Facts, limits: Limits) -> str:
    request = quote(facts.requests[0], limits.pending, indent="") if facts.requests else None
    progress = [f"- [x] Modified `{path}`" for path in facts.files_modified[-limits.files :]]
    if facts.files_only_read:
        progress.append(f"- [x] Read {code_list(facts.files_only_read, limits.files)}")
    progress += [
        f"- [x] Ran `{clip(command, limits.item)}`"
        for command in facts.commands[-limits.commands :]
    ]
    progress += [
        f"- Error seen in tool output: `{clip(error, limits.item)}`"
        for error in facts.errors[-limits.errors :]
    ]
    context: list[str] = []
    if facts.files_modified:
        context.append(f"- Files being changed: {code_list(facts.files_modified, limits.files)}")
    if facts.last_assistant:
        context.append("- Last assistant message:\n" + quote(facts.last_assistant, limits.quote))
    if facts.last_tool_result:
        context.append("- Last tool result:\n" + quote(facts.last_tool_result, limits.item * 2))
    return "\n\n".join(
        [
            MARKER,
            "## Original Request\n" + (request or "(the request is not in this part of the turn)"),
            f"## Early Progress\n{_lines(progress, limits)}",
            f"## Context for Suffix\n{_lines(context, limits)}",
        ]
    )


def _short(facts: Facts, limits: Limits) -> str:
    modified = facts.files_modified
    if modified:
        names = [f"`{path}`" for path in modified[:5]]
        if len(modified) > 5:
            names.append(f"{len(modified) - 5} more files")
        listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        first = f"I changed {listed}."
    else:
        first = "I made no file changes in this part of the session."
    sentences_out = [first]
    if facts.last_assistant:
        said = " ".join(sentences(facts.last_assistant)[:2])
        sentences_out.append(f'My last update said: "{clip(said, limits.item)}"')
    elif facts.pending_request is not None:
        sentences_out.append("A user request is still open.")
    return MARKER + "\n" + " ".join(sentences_out)
