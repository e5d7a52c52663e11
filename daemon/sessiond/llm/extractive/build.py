"""The rules that turn facts into checkpoint sections; every line cites the conversation.

- Goal: the first real request as the task it asks for (``requests``); later requests
  as "Then:" lines (pi's prompt allows several items when the session had several tasks).
- Done: files whose edit or write succeeded, with the functions and types the change
  declared or brought in and its own lines as a small diff (``changes``); checks
  (tests, builds, linters) whose output shows no failure; commands that changed
  something, and the commits they made; work done through other tools and the tasks
  the agent's task list completed (``toolwork``); and the assistant's sentences
  reporting something finished, from every reply of the turn (a long turn reports as
  it goes), without their "I". A request is never listed as done: asking is not doing.
- In Progress: the last request, when the assistant was still calling tools at the end,
  and the tasks in progress.
- Blocked: tool errors that no later success cleared (``commands``).
- Key Decisions: the assistant's statements of a choice (instead of, rather than,
  because ...), not its announcements of what it will do next.
- Next Steps: the open request, the unfinished work, the open errors, the pending
  tasks, and what the assistant's last reply itself proposed.
- Critical Context: ``context``.

Every line holds whole sentences: one too long for its line is left out, not cut.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Container

from sessiond.llm.extractive.changes import changed_lines, name_counts
from sessiond.llm.extractive.checkpoint import Checkpoint
from sessiond.llm.extractive.commands import (
    changes_state,
    commits,
    errors,
    passed_checks,
    short_command,
)
from sessiond.llm.extractive.context import critical_context
from sessiond.llm.extractive.facts import Action, Facts, TurnFacts
from sessiond.llm.extractive.findings import discussed_names
from sessiond.llm.extractive.limits import Limits
from sessiond.llm.extractive.requests import constraints, is_task, task_line
from sessiond.llm.extractive.text import (
    cached,
    code_list,
    excerpt,
    impersonal,
    in_first_person,
    is_finished,
    sentences,
    starts_as_statement,
    unique,
)
from sessiond.llm.extractive.toolwork import Task, changes_elsewhere, task_list, texts

_DECISION = re.compile(
    r"\b(decided|decision|instead of|rather than|chose|choose|going with|opted|switched to"
    r"|i'll use|i will use|we'll use|because)\b",
    re.IGNORECASE,
)
_BECAUSE = re.compile(r",?\s+\b(because|since|so that)\b\s+", re.IGNORECASE)
# The assistant saying it finished something ("Fixed: ...", "All 12 tests pass").
_REPORTED = re.compile(
    r"^(?:\W*)(?:(?:i|we)(?:'ve| have)?\s+(?:now\s+|also\s+)?)?(fixed|done|added|implemented"
    r"|created|updated|removed|refactored|renamed|moved|wrote|changed|replaced|ported|converted"
    r"|extracted|deleted|merged|completed|finished|resolved|installed|configured|cleaned up"
    r"|split|cloned|read|ran|tested|verified|built|uploaded|pushed|committed|documented)\b"
    r"|\b(all|the) (\d+ )?tests? (now )?pass|\bnow (passes|works|returns|handles|uses)\b"
    r"|\b(is|are) now\b",
    re.IGNORECASE,
)
# A proposal asks (a question with a cue) or opens with its cue: "Next, ...", "Should I
# also ...?"; "right next to" in a statement is not one.
_PROPOSAL = re.compile(
    r"^\W*(next|remaining|still to do|still need|todo|to do|you can now|left to do)\b"
    r"|\b(next|remaining|still need|todo|to do|should i|shall i|would you like|want me to"
    r"|could also|do you want)\b.*\?\W*$",
    re.IGNORECASE,
)
# The assistant saying what stops it, or what it is still doing.
_SAYS_BLOCKED = re.compile(r"^(?:\W*)(blocked|blocker|blocking)\b\s*:?", re.IGNORECASE)
_SAYS_IN_PROGRESS = re.compile(
    r"^(?:\W*)(current work is|currently|in progress:|still working on|working on)\b",
    re.IGNORECASE,
)


# Longer "sentences" are lists, logs or code that lost their line breaks, not statements.
_SENTENCE_LIMIT = 500


@cached
def _matches(pattern: re.Pattern[str], sentence: str) -> bool:
    """Whether a statement-sized sentence has the cue (cached: every render asks again)."""
    return len(sentence) <= _SENTENCE_LIMIT and pattern.search(sentence) is not None


def build_checkpoint(
    facts: Facts, limits: Limits, *, goal_known: bool, branch: bool = False
) -> Checkpoint:
    cp = Checkpoint()
    counts = name_counts(facts)
    tasks = task_list(facts)
    cp.goal = _goal(facts, limits, goal_known=goal_known)
    cp.constraints = _constraints(facts, limits)
    cp.done = _done(facts, limits, counts)
    cp.done += changes_elsewhere(facts, limits.titles)
    cp.done += [f"- [x] {text}" for text in _task_texts(tasks, "done")]
    cp.in_progress = _in_progress(facts, limits)
    cp.in_progress += [f"- [ ] {text}" for text in _task_texts(tasks, "active")]
    unresolved, resolved = errors(facts)
    cp.blocked = [
        f"- `{key}` failed: {excerpt(error, limits.item)}"
        for key, error in unresolved[-limits.errors :]
    ]
    said_in_progress, said_blocked = _said_state(facts, limits)
    cp.in_progress += said_in_progress
    cp.blocked += said_blocked
    cp.decisions = _decisions(facts, limits)
    cp.next_steps = _next_steps(facts, limits, unresolved, _task_texts(tasks, "open"))
    cp.critical = critical_context(facts, limits, resolved, cp, counts, branch=branch)
    return cp


def _task_texts(tasks: list[Task], status: str) -> list[str]:
    """The agent's tasks of one status that read as lines of a summary (whole, not in the
    first person)."""
    return [
        text for text in texts(tasks, status) if is_finished(text) and not in_first_person(text)
    ]


def _goal(facts: Facts, limits: Limits, *, goal_known: bool) -> list[str]:
    tasks = [request for request in facts.requests if is_task(request)]
    if not tasks:
        return []
    first = task_line(tasks[0], limits.goal) if not goal_known else ""
    lines = [first] if first else []
    later = tasks if goal_known else tasks[1:]
    if facts.pending_request is not None and later and later[-1] is facts.pending_request:
        later = later[:-1]  # the open request is quoted under Next Steps and Critical Context
    then = unique(task_line(request, limits.item, 1) for request in later)
    return lines + [f"- Then: {item}" for item in then[-limits.later_requests :] if item]


def _constraints(facts: Facts, limits: Limits) -> list[str]:
    return constraints(facts.requests, limits.item, limits.constraints)


def _statement(sentence: str, limit: int) -> str | None:
    """A sentence of the assistant's as a line of the summary: whole, finished, without
    its "I", and not still speaking in the first person; None when it cannot be one."""
    if len(sentence) > limit or not is_finished(sentence):
        return None
    if not starts_as_statement(sentence):
        return None
    line = impersonal(sentence)
    return None if in_first_person(line) else line


def _done(facts: Facts, limits: Limits, counts: Counter[str]) -> list[str]:
    items: list[str] = []
    shown: dict[str, set[str]] = {}
    passed = passed_checks(facts)
    discussed = discussed_names(facts)
    committed = commits(facts)
    for turn in facts.turns:
        items += _changed_files(facts, turn, shown, limits, discussed, counts)
        for command in unique(
            short_command(a.command) for a in turn.actions if a.command and id(a) in passed
        ):
            items.append(f"- [x] `{command}` passed")
        ran = unique(
            short_command(a.command)
            for a in turn.actions
            if a.command and a.succeeded and id(a) not in passed and changes_state(a.command)
        )
        if ran:
            items.append(f"- [x] Ran {code_list(ran, limits.commands)}")
        items += [
            f"- [x] Committed `{commit.hash}` on `{commit.branch}`: {commit.message}"
            for action in turn.actions
            for commit in committed.get(id(action), [])
        ]
        said = [
            line
            for reply in turn.replies
            for sentence in sentences(reply)
            if _matches(_REPORTED, sentence) and len(sentence) > 12
            if (line := _statement(sentence, limits.item)) is not None
        ]
        # The turn's last reports: a long turn reports as it goes, the last ones sum up.
        items += [f"- [x] {line}" for line in unique(said)[-limits.reported :]]
    return unique(items)


def _changed_files(
    facts: Facts,
    turn: TurnFacts,
    shown: dict[str, set[str]],
    limits: Limits,
    discussed: Container[str],
    counts: Counter[str],
) -> list[str]:
    """Lines for the files this turn changed: each file once, and again later only with
    the names a later change brought (``shown`` remembers what was listed). A change's
    names are the functions and types it declares, and the names it brought in that the
    conversation also talks about (``discussed``): a local variable is not news."""
    tools: dict[str, set[str]] = {}
    defined: dict[str, list[str]] = {}
    changes: dict[str, list[Action]] = {}
    functions: set[str] = set()
    for action in turn.actions:
        if action.writes and action.path and action.succeeded:
            tools.setdefault(action.path, set()).add(action.tool.lower())
            changes.setdefault(action.path, []).append(action)
            functions |= action.functions
            talked_of = [name for name in action.added if name in discussed]
            defined[action.path] = unique(
                [*defined.get(action.path, []), *action.defines, *talked_of]
            )
    lines: list[str] = []
    for path, used in tools.items():
        new_names = [name for name in defined[path] if name not in shown.get(path, set())]
        if path in shown and not new_names:
            continue
        shown.setdefault(path, set()).update(new_names)
        shown_names = [f"{name}()" if name in functions else name for name in new_names]
        names = f" ({code_list(shown_names, limits.defined)})" if new_names else ""
        code = changed_lines(facts, changes[path], counts, limits.code_lines)
        block = "".join(f"\n  {line}" for line in code)
        fence = f"\n  ```diff{block}\n  ```" if code else ""
        lines.append(f"- [x] {_verb(used)} `{path}`{names}{fence}")
    return lines


def _verb(tools: set[str]) -> str:
    if tools == {"write"}:
        return "Wrote"
    if tools == {"edit"}:
        return "Edited"
    return "Changed"


def _in_progress(facts: Facts, limits: Limits) -> list[str]:
    if not facts.turns:
        return []
    last = facts.turns[-1]
    if not last.actions or last.ended_with_reply:
        return []
    step = last.actions[-1]
    target = short_command(step.command) if step.command else step.path
    detail = f" (last step: `{step.tool}`" + (f" `{target}`)" if target else ")")
    if last.request is not None and (task := task_line(last.request, limits.item, 1)):
        return [f"- [ ] {task}{detail}"]
    return [f"- [ ] The work the previous summary left in progress{detail}"]


def _said_state(facts: Facts, limits: Limits) -> tuple[list[str], list[str]]:
    """What the last reply says is still under way, and what it says stops the work."""
    reply = facts.turns[-1].final_reply if facts.turns else None
    if reply is None:
        return [], []
    in_progress: list[str] = []
    blocked: list[str] = []
    for sentence in sentences(reply):
        if len(sentence) > limits.item or not is_finished(sentence):
            continue
        if _SAYS_BLOCKED.match(sentence):
            blocked.append(f"- {sentence}")
        elif _SAYS_IN_PROGRESS.match(sentence):
            in_progress.append(f"- [ ] {sentence}")
    return in_progress, blocked


def _decisions(facts: Facts, limits: Limits) -> list[str]:
    found = unique(
        line
        for reply in facts.replies
        for sentence in sentences(reply)
        if _matches(_DECISION, sentence) and len(sentence) > 20
        if not _INTENTION.match(sentence)
        if (line := _statement(sentence, limits.item)) is not None
    )
    return [_decision_line(line) for line in found[-limits.decisions :]]


# Announcing the next step is narration, not a decision ("Let me update X instead of
# Y"); "I'll use X instead of Y because Z" is a choice with its reason, and stays.
_INTENTION = re.compile(
    r"^\W*(?:(?:now|next|first|then|so|ok(?:ay)?)[,\s]+)*"
    r"(?:let me|let's|i need to|i'm going to|we need to|time to)\b",
    re.IGNORECASE,
)


def _decision_line(sentence: str) -> str:
    parts = _BECAUSE.split(sentence, maxsplit=1)
    if len(parts) == 3 and len(parts[0].split()) >= 3 and is_finished(parts[2]):
        what, word, why = parts
        return f"- **{what.strip().replace('**', '')}**: {word.lower()} {why.strip()}"
    return f"- {sentence}"


def _next_steps(
    facts: Facts, limits: Limits, unresolved: list[tuple[str, str]], open_tasks: list[str]
) -> list[str]:
    steps: list[str] = []
    pending = facts.pending_request
    if pending is not None:
        asked = task_line(pending, limits.item, 1)
        steps.append(
            f'Answer the open user request: "{asked}"'
            if asked
            else "Answer the open user request (quoted below)."
        )
    last = facts.turns[-1] if facts.turns else None
    if last is not None and last.actions and not last.ended_with_reply:
        what = (
            task_line(last.request, limits.item, 1) if last.request else ""
        ) or "the work in progress"
        steps.append(f"Finish: {what}")
    for key, error in unresolved[-2:]:
        steps.append(f"Fix `{key}`: {excerpt(error, limits.item // 2)}")
    steps += open_tasks[: limits.later_requests]
    reply = last.final_reply if last is not None else None
    if reply is not None and pending is None:
        proposals = [
            s
            for s in sentences(reply)
            if _matches(_PROPOSAL, s) and len(s) <= limits.item and is_finished(s)
        ]
        steps += proposals[-2:]
    return steps or ["Wait for the user's next request."]
