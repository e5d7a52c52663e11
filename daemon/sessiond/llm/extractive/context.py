"""Critical Context: what the next model must know that the other sections do not say.

In order: a long request's outline and its lines that carry the most names (a plan's
own words); the assistant's findings that state the names the conversation worked on
(``findings``); the errors met and how each was cleared; the files read, with the
declarations in them the conversation talks about; the searches made; the commands
run; the names still unstated; and, at the end, the last reply or the open request
word for word.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Final

from sessiond.llm.extractive.changes import declarations_read
from sessiond.llm.extractive.checkpoint import Checkpoint
from sessiond.llm.extractive.commands import short_command
from sessiond.llm.extractive.facts import Facts
from sessiond.llm.extractive.findings import candidates, choose, name_weights
from sessiond.llm.extractive.limits import Limits
from sessiond.llm.extractive.requests import is_task, key_lines, outline
from sessiond.llm.extractive.text import (
    code_list,
    excerpt,
    one_line,
    opening_statements,
    quote,
    unique,
)
from sessiond.llm.extractive.toolwork import searches


def critical_context(
    facts: Facts,
    limits: Limits,
    resolved: list[tuple[str, str, str]],
    cp: Checkpoint,
    counts: Counter[str],
    *,
    branch: bool,
) -> list[str]:
    items: list[str] = []
    tasks = [request for request in facts.requests if is_task(request)]
    # The first task and the latest (unless it is the open request, quoted below).
    latest = [r for r in tasks[1:][-1:] if r is not facts.pending_request]
    for request in tasks[:1] + latest:
        headings = outline(request, limits.outline)
        if headings:
            items.append("- Outline of the request: " + "; ".join(headings))
        lines = key_lines(request, counts, limits.request_lines)
        if lines:
            items.append("- From the request:\n" + "\n".join(f"  > {line}" for line in lines))
    written = "\n".join(cp.goal + cp.done + cp.blocked + cp.in_progress + cp.next_steps + items)
    weights = name_weights(facts)
    stated = {name for name in weights if name in written}
    findings = choose(candidates(facts, limits.item), weights, stated, limits.findings)
    items += [f"- {finding.sentence}" for finding in findings]
    items += [
        f"- Resolved: `{key}` failed with {excerpt(error, limits.item // 2)}, {how}"
        for key, error, how in resolved[-limits.errors :]
    ]
    items += _files_read(facts, limits, counts)
    found = searches(facts)
    if found:
        shown = "; ".join(found[-limits.commands :])
        more = f" (+{len(found) - limits.commands} earlier)" if len(found) > limits.commands else ""
        items.append(f"- Searched: {shown}{more}")
    written = "\n".join([written, *items])
    commands = unique(
        short_command(a.command) for a in facts.actions if a.command and a.command.strip()
    )
    commands = [c for c in commands if f"`{c}`" not in written]
    if commands:
        items.append(f"- Commands run: {code_list(commands[-limits.commands :], limits.commands)}")
    written = "\n".join([written, *items[-1:]])
    unstated = [
        name
        for name, _weight in sorted(weights.items(), key=lambda pair: -pair[1])
        if name not in written and len(name) > 2
    ]
    if unstated:
        items += _names_by_file(facts, unstated[: limits.names], limits.names)
    if branch:
        return items
    items += [f"- {line}" for line in facts.additional_context if len(line) <= limits.item]
    if facts.focus:
        items.append(f"- Requested focus: {one_line(facts.focus)}")
    reply = facts.last_reply
    if reply is not None and facts.pending_request is None:
        said = opening_statements(reply, limits.last_reply)
        if said:
            items.append(f"- Last reply: {said}")
    pending = facts.pending_request
    if pending is not None:
        items.append("- Open user request (verbatim):\n" + quote(pending, limits.pending))
    return items


def _files_read(facts: Facts, limits: Limits, counts: Counter[str]) -> list[str]:
    """Files read and not changed: those declaring names the conversation talks about
    with those declarations, then the others in one line."""
    only_read = facts.files_only_read
    if not only_read:
        return []
    results: dict[str, list[str]] = {}
    for action in facts.actions:
        if action.reads and action.path and action.succeeded:
            results.setdefault(action.path, []).append(action.result)
    items: list[str] = []
    plain: list[str] = []
    for path in only_read:
        declared = unique(
            line
            for result in results.get(path, [])
            for line in declarations_read(result, counts, limits.read_lines)
        )[: limits.read_lines]
        if declared and len(items) < limits.files_detailed:
            block = "".join(f"\n  {line}" for line in declared)
            items.append(f"- Read `{path}`:\n  ```{block}\n  ```")
        else:
            plain.append(path)
    if plain:
        items.append(f"- Files read: {code_list(plain, limits.files)}")
    return items


def _names_by_file(facts: Facts, names: list[str], limit: int) -> list[str]:
    """Names not stated elsewhere, each under the first file read or changed whose text
    has it (where a reader would find it), the rest on a line of their own."""
    where = _identifier_files(facts)
    by_file: dict[str, list[str]] = {}
    for name in names:
        # Only an identifier, a member chain or a call is looked up in the files' text.
        words = _IDENTIFIER.findall(name) if _LOOKED_UP.match(name) else []
        path = where.get(words[-1]) if words else None
        by_file.setdefault(path or "", []).append(name)
    lines = [f"  - `{path}`: {code_list(found, limit)}" for path, found in by_file.items() if path]
    items = ["- Other names, by the file that has them:\n" + "\n".join(lines)] if lines else []
    if by_file.get(""):
        items.append(f"- Other names: {code_list(by_file[''], limit)}")
    return items


def _identifier_files(facts: Facts) -> dict[str, str]:
    """Each identifier of the files read or changed, with the first file that has it."""
    known = facts.memo.get("identifier_files")
    if isinstance(known, dict):
        return known
    where: dict[str, str] = {}
    for action in facts.actions:
        if not action.path or not action.succeeded or not (action.reads or action.writes):
            continue
        text = action.result if action.reads else "\n".join(action.added_lines)
        for word in _IDENTIFIER.findall(text):
            where.setdefault(word, action.path)
    facts.memo["identifier_files"] = where
    return where


_IDENTIFIER: Final = re.compile(r"[A-Za-z_$][\w$]{2,}")
_LOOKED_UP: Final = re.compile(r"^[A-Za-z_$][\w$.]{0,79}(?:\(\))?$")
