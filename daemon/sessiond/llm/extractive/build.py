"""The rules that turn facts into checkpoint sections; every line cites the conversation.

- Goal: the first real request, in its first sentence or two; later requests as
  "Then:" lines (pi's prompt allows several items when the session had several tasks).
- Done: files whose edit or write succeeded, checks (tests, builds, linters) whose
  output shows no failure, and sentences in which the assistant reported something
  finished. A request is never listed as done: asking is not doing.
- In Progress: the last request, when the assistant was still calling tools at the end.
- Blocked: tool errors that no later success on the same file or command cleared.
- Next Steps: the open request, the unfinished work, the open errors, and what the
  assistant's last reply itself proposed.
- Critical Context: the paths, commands and backticked names the conversation used,
  errors and how they were resolved, and the open request word for word.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace

from sessiond.llm.extractive.checkpoint import Checkpoint
from sessiond.llm.extractive.facts import Action, Facts, Turn
from sessiond.llm.extractive.text import (
    cached,
    clip,
    code_list,
    code_names,
    gist,
    impersonal,
    one_line,
    quote,
    sentences,
    strip_filler,
    unique,
)

_CONSTRAINT = re.compile(
    r"\b(must|must not|mustn't|don't|do not|never|always|prefer|should|shouldn't|avoid"
    r"|make sure|only use|without|keep)\b",
    re.IGNORECASE,
)
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
_PROPOSAL = re.compile(
    r"\b(next|remaining|still need|todo|to do|should i|shall i|would you like|want me to"
    r"|could also|you can now|left to)\b",
    re.IGNORECASE,
)
# The assistant saying what stops it, or what it is still doing.
_SAYS_BLOCKED = re.compile(r"^(?:\W*)(blocked|blocker|blocking)\b\s*:?", re.IGNORECASE)
_SAYS_IN_PROGRESS = re.compile(
    r"^(?:\W*)(current work is|currently|in progress:|still working on|working on)\b",
    re.IGNORECASE,
)
# Paths and code-like names written without backticks in the conversation's prose.
_PROSE_NAME = re.compile(
    r"(?<![\w/.@`-])(?:~|\.{1,2})?/?(?:[\w@.-]++/)+[\w@.-]*\w(?:\{[^}\s]*\})?"
    r"|(?<![\w/.@`-])/[\w.-]*\w"
    r"|\b[a-z][a-z0-9]*(?:-[a-z0-9]+){2,}\b"
    r"|\b[a-z]+[A-Z]\w*\b|\b[a-z][a-z0-9]*_[a-z0-9_]+\b"
)
_CHECK = re.compile(
    r"\b(test|tests|pytest|jest|vitest|mocha|unittest|tsc|mypy|pyright|ruff|eslint|biome|lint"
    r"|check|build|compile|clippy|make|npm run|pnpm|yarn|gradle|mvn|ctest)\b",
    re.IGNORECASE,
)
_CD_PREFIX = re.compile(r"^(?:cd\s+\S+\s*(?:&&|;)\s*)+")
_CHAIN = re.compile(r"&&|\|\||;|\n")
_CD = re.compile(r"^\s*cd\s")


@dataclass(frozen=True)
class Limits:
    """How much of each kind goes in; all shrink together when the text is too long."""

    goal: int = 320
    item: int = 220
    pending: int = 1500
    last_reply: int = 300
    later_requests: int = 3
    done: int = 40
    reported: int = 3
    decisions: int = 6
    constraints: int = 6
    files: int = 60
    commands: int = 12
    names: int = 60
    errors: int = 6
    defined: int = 6

    def scaled(self, factor: float) -> Limits:
        """Counts shrink with ``factor``; lengths more slowly and not below a readable floor,
        because a line cut too short says nothing."""
        changes: dict[str, int] = {}
        for spec in fields(self):
            value: int = getattr(self, spec.name)
            floor = _LENGTH_FLOORS.get(spec.name)
            if floor is None:
                changes[spec.name] = max(1, int(value * factor))
            else:
                changes[spec.name] = max(floor, int(value * factor**0.5))
        return replace(self, **changes)


_LENGTH_FLOORS = {"goal": 160, "item": 100, "pending": 400, "last_reply": 160}


# Longer "sentences" are lists, logs or code that lost their line breaks, not statements.
_SENTENCE_LIMIT = 500


@cached
def _matches(pattern: re.Pattern[str], sentence: str) -> bool:
    """Whether a statement-sized sentence has the cue (cached: every render asks again)."""
    return len(sentence) <= _SENTENCE_LIMIT and pattern.search(sentence) is not None


def short_command(command: str) -> str:
    first = command.strip().splitlines()[0] if command.strip() else ""
    return clip(_CD_PREFIX.sub("", first).strip(), 100)


def _command_key(command: str) -> str:
    """The program and its first word that is not an option: "python pytest", "npm test"."""
    words = [w for w in short_command(command).split() if not w.startswith("-")]
    return " ".join(words[:2])


def _keys(action: Action) -> list[str]:
    """What a later success must match to clear this action's error: the file, or each
    command of a ``a && b`` chain."""
    if action.command is not None:
        parts = _CHAIN.split(_CD_PREFIX.sub("", action.command.strip()))
        return unique(_command_key(p) for p in parts if p.strip() and not _CD.match(p))
    return [action.path] if action.path else []


def _is_task(request: str) -> bool:
    return not request.lstrip().startswith("/") and len(request.split()) >= 3


def build_checkpoint(
    facts: Facts, limits: Limits, *, goal_known: bool, branch: bool = False
) -> Checkpoint:
    cp = Checkpoint()
    cp.goal = _goal(facts, limits, goal_known=goal_known)
    cp.constraints = _constraints(facts, limits)
    cp.done = _done(facts, limits)
    cp.in_progress = _in_progress(facts, limits)
    unresolved, resolved = _errors(facts)
    cp.blocked = [
        f"- `{key}` failed: `{clip(error, limits.item)}`"
        for key, error in unresolved[-limits.errors :]
    ]
    said_in_progress, said_blocked = _said_state(facts, limits)
    cp.in_progress += said_in_progress
    cp.blocked += said_blocked
    cp.decisions = _decisions(facts, limits)
    cp.next_steps = _next_steps(facts, limits, unresolved)
    cp.critical = _critical(facts, limits, resolved, cp, branch=branch)
    return cp


def _goal(facts: Facts, limits: Limits, *, goal_known: bool) -> list[str]:
    tasks = [request for request in facts.requests if _is_task(request)]
    if not tasks:
        return []
    lines = [] if goal_known else [gist(tasks[0], limits.goal)]
    later = tasks if goal_known else tasks[1:]
    if facts.pending_request is not None and later and later[-1] is facts.pending_request:
        later = later[:-1]  # the open request is quoted under Next Steps and Critical Context
    then = unique(gist(request, limits.item, 1) for request in later)
    return lines + [f"- Then: {item}" for item in then[-limits.later_requests :]]


def _constraints(facts: Facts, limits: Limits) -> list[str]:
    found = unique(
        sentence
        for request in facts.requests
        for sentence in sentences(request)
        if _matches(_CONSTRAINT, sentence) and len(sentence) > 12
    )
    return [f"- {clip(strip_filler(s), limits.item)}" for s in found[: limits.constraints]]


def _done(facts: Facts, limits: Limits) -> list[str]:
    items: list[str] = []
    shown: dict[str, set[str]] = {}
    passed = _passed_checks(facts)
    for turn in facts.turns:
        items += _changed_files(turn, shown, limits.defined)
        for command in unique(
            short_command(a.command) for a in turn.actions if a.command and id(a) in passed
        ):
            items.append(f"- [x] `{command}` passed")
        reply = turn.final_reply
        if reply is not None:
            said = [s for s in sentences(reply) if _matches(_REPORTED, s) and len(s) > 12]
            items += [f"- [x] {clip(impersonal(s), limits.item)}" for s in said[: limits.reported]]
    return unique(items)


def _changed_files(turn: Turn, shown: dict[str, set[str]], limit: int) -> list[str]:
    """Lines for the files this turn changed: each file once, and again later only with
    the functions and types a later change defined (``shown`` remembers what was listed)."""
    tools: dict[str, set[str]] = {}
    defined: dict[str, list[str]] = {}
    for action in turn.actions:
        if action.writes and action.path and action.succeeded:
            tools.setdefault(action.path, set()).add(action.tool.lower())
            defined[action.path] = unique([*defined.get(action.path, []), *action.defines])
    by_verb: dict[str, list[str]] = {}
    for path, used in tools.items():
        new_names = [name for name in defined[path] if name not in shown.get(path, set())]
        if path in shown and not new_names:
            continue
        shown.setdefault(path, set()).update(new_names)
        names = f" ({code_list(new_names, limit)})" if new_names else ""
        by_verb.setdefault(_verb(used), []).append(f"`{path}`{names}")
    return [f"- [x] {verb} " + ", ".join(files) for verb, files in by_verb.items()]


def _verb(tools: set[str]) -> str:
    if tools == {"write"}:
        return "Wrote"
    if tools == {"edit"}:
        return "Edited"
    return "Changed"


def _passed_checks(facts: Facts) -> set[int]:
    """Check commands that succeeded and were not followed by a failure of the same check."""
    last: dict[str, Action] = {}
    for action in facts.actions:
        if action.command and action.answered and _CHECK.search(short_command(action.command)):
            last[_command_key(action.command)] = action
    passed: set[int] = set()
    for action in facts.actions:
        if action.command and action.succeeded and _CHECK.search(short_command(action.command)):
            final = last[_command_key(action.command)]
            if final.succeeded:
                passed.add(id(action))
    return passed


def _in_progress(facts: Facts, limits: Limits) -> list[str]:
    if not facts.turns:
        return []
    last = facts.turns[-1]
    if not last.actions or last.ended_with_reply:
        return []
    step = last.actions[-1]
    target = short_command(step.command) if step.command else step.path
    detail = f" (last step: `{step.tool}`" + (f" `{target}`)" if target else ")")
    if last.request is not None:
        return [f"- [ ] {gist(last.request, limits.item, 1)}{detail}"]
    return [f"- [ ] The work the previous summary left in progress{detail}"]


def _said_state(facts: Facts, limits: Limits) -> tuple[list[str], list[str]]:
    """What the last reply says is still under way, and what it says stops the work."""
    reply = facts.turns[-1].final_reply if facts.turns else None
    if reply is None:
        return [], []
    in_progress: list[str] = []
    blocked: list[str] = []
    for sentence in sentences(reply):
        if _SAYS_BLOCKED.match(sentence):
            blocked.append(f"- {clip(sentence, limits.item)}")
        elif _SAYS_IN_PROGRESS.match(sentence):
            in_progress.append(f"- [ ] {clip(sentence, limits.item)}")
    return in_progress, blocked


def _errors(facts: Facts) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(what failed, error) pairs: still open, and cleared by a later success on the same
    file or the same command (its program and first word; any command of a chain)."""
    open_errors: dict[str, tuple[str, str]] = {}
    resolved: list[tuple[str, str]] = []
    for action in facts.actions:
        keys = _keys(action)
        if not keys or not action.answered:
            continue
        if action.error is not None:
            shown = short_command(action.command) if action.command else keys[0]
            failure = (shown, one_line(action.error))
            for key in keys:
                open_errors[key] = failure
            continue
        for key in keys:
            failure_or_none = open_errors.get(key)
            if failure_or_none is not None:
                resolved.append(failure_or_none)
                open_errors = {k: v for k, v in open_errors.items() if v is not failure_or_none}
    return unique_pairs(open_errors.values()), resolved


def unique_pairs(pairs: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    return list(dict.fromkeys(pairs))


def _decisions(facts: Facts, limits: Limits) -> list[str]:
    found = unique(
        sentence
        for reply in facts.replies
        for sentence in sentences(reply)
        if _matches(_DECISION, sentence) and len(sentence) > 20
    )
    return [_decision_line(impersonal(s), limits.item) for s in found[-limits.decisions :]]


def _decision_line(sentence: str, limit: int) -> str:
    parts = _BECAUSE.split(sentence, maxsplit=1)
    if len(parts) == 3 and parts[0].strip():
        what, word, why = parts
        return f"- **{clip(what.strip(), limit // 2)}**: {word.lower()} {clip(why, limit // 2)}"
    return f"- {clip(sentence, limit)}"


def _next_steps(facts: Facts, limits: Limits, unresolved: list[tuple[str, str]]) -> list[str]:
    steps: list[str] = []
    pending = facts.pending_request
    if pending is not None:
        steps.append(f'Answer the open user request: "{gist(pending, limits.item, 1)}"')
    last = facts.turns[-1] if facts.turns else None
    if last is not None and last.actions and not last.ended_with_reply:
        what = gist(last.request, limits.item, 1) if last.request else "the work in progress"
        steps.append(f"Finish: {what}")
    for key, error in unresolved[-2:]:
        steps.append(f"Fix `{key}`: `{clip(error, limits.item // 2)}`")
    reply = last.final_reply if last is not None else None
    if reply is not None and pending is None:
        proposals = [s for s in sentences(reply) if _matches(_PROPOSAL, s)]
        steps += [clip(s, limits.item) for s in proposals[-2:]]
    return steps or ["Wait for the user's next request."]


def _critical(
    facts: Facts,
    limits: Limits,
    resolved: list[tuple[str, str]],
    cp: Checkpoint,
    *,
    branch: bool,
) -> list[str]:
    items: list[str] = []
    modified, only_read = facts.files_changed, facts.files_only_read
    if modified:
        items.append(f"- Files modified: {code_list(modified, limits.files)}")
    if only_read:
        items.append(f"- Files read: {code_list(only_read, limits.files)}")
    written = "\n".join(cp.done + cp.blocked + cp.in_progress + cp.next_steps)
    commands = unique(
        short_command(a.command) for a in facts.actions if a.command and a.command.strip()
    )
    commands = [c for c in commands if f"`{c}`" not in written]
    if commands:
        items.append(f"- Commands run: {code_list(commands[-limits.commands :], limits.commands)}")
    named = set(modified) | set(only_read) | set(commands) | set(code_names(written))
    names = _names(facts, named)
    if names:
        items.append(f"- Names used: {code_list(names, limits.names)}")
    items += [
        f"- Resolved: `{key}` failed with `{clip(error, limits.item // 2)}`, then succeeded"
        for key, error in resolved[-limits.errors :]
    ]
    if branch:
        return items
    items += [f"- {clip(line, limits.item)}" for line in facts.additional_context]
    if facts.focus:
        items.append(f"- Requested focus: {clip(one_line(facts.focus), limits.item)}")
    reply = facts.last_reply
    if reply is not None and facts.pending_request is None:
        items.append(f"- Last reply: {gist(reply, limits.last_reply, 2)}")
    pending = facts.pending_request
    if pending is not None:
        items.append("- Open user request (verbatim):\n" + quote(pending, limits.pending))
    return items


@cached
def _prose_names(text: str) -> tuple[str, ...]:
    """Paths and code-like names outside code spans and URLs (cached like ``sentences``)."""
    prose = _URL.sub(" ", _CODE_SPAN.sub(" ", text))
    return tuple(match.group(0).rstrip(".") for match in _PROSE_NAME.finditer(prose))


# The scheme's length is bounded: unbounded, every word start of a long run like
# "a-a-a-..." scanned to its end looking for "://", quadratic in the run's length (a
# 400 KB line took minutes). Real schemes are short.
_URL = re.compile(r"\b[a-z][a-z0-9+.-]{0,31}://\S+")
_CODE_SPAN = re.compile(r"`[^`\n]*`")


def _names(facts: Facts, exclude: set[str]) -> list[str]:
    """Names from what the user and the assistant wrote, most used first: backticked ones,
    and paths and code-like names (``snake_case``, ``camelCase``, ``kebab-case-name``)."""
    counts: Counter[str] = Counter()
    order: dict[str, int] = {}
    for text in [*facts.requests, *facts.replies]:
        for name in [*code_names(text), *_prose_names(text)]:
            if len(name) > 80 or name in exclude:
                continue
            counts[name] += 1
            order.setdefault(name, len(order))
    return sorted(counts, key=lambda name: (-counts[name], order[name]))
