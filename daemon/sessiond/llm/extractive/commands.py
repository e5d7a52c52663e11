"""Commands and tool errors: what was run, what it checked, whether it passed, and which
failures a later success cleared.

- A command is shown by its first line without ``cd`` prefixes and output plumbing
  (``2>&1``, a trailing ``| tail -20``): what was run, not how its output was shown.
- A check (tests, builds, linters) passed when it succeeded and the last run of the same
  check (its program and first word) succeeded too.
- A command changed something unless its program only looks (``ls``, ``cat``, ``grep``,
  ``git status`` ...); one that changed something and succeeded is work done.
- An error stays open until a later success on the same file or the same command (any
  command of an ``a && b`` chain) clears it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from sessiond.llm.extractive.facts import Action, Facts
from sessiond.llm.extractive.text import clip, one_line, unique

_CHECK = re.compile(
    r"\b(test|tests|pytest|jest|vitest|mocha|unittest|tsc|mypy|pyright|ruff|eslint|biome|lint"
    r"|check|build|compile|clippy|make|npm run|pnpm|yarn|gradle|mvn|ctest)\b",
    re.IGNORECASE,
)
_CD_PREFIX = re.compile(r"^(?:cd\s+\S+\s*(?:&&|;)\s*)+")
# Programs (and git's subcommands) that only look: running them is not work done.
_LOOKING = frozenset(
    [
        "ls",
        "ll",
        "la",
        "cat",
        "less",
        "more",
        "head",
        "tail",
        "grep",
        "rg",
        "ag",
        "find",
        "fd",
        "tree",
        "pwd",
        "echo",
        "printf",
        "which",
        "whereis",
        "type",
        "file",
        "stat",
        "wc",
        "du",
        "df",
        "diff",
        "cmp",
        "sort",
        "uniq",
        "cut",
        "awk",
        "sed",
        "jq",
        "yq",
        "curl",
        "wget",
        "ping",
        "ps",
        "top",
        "env",
        "printenv",
        "date",
        "sleep",
        "true",
        "false",
        "test",
        "open",
        "man",
        "help",
        "lsof",
        "netstat",
        "ss",
        "id",
        "whoami",
        "uname",
        "hostname",
        "history",
    ]
)
_GIT_LOOKING = frozenset(
    ["status", "diff", "log", "show", "branch", "blame", "remote", "fetch", "describe", "rev-parse"]
)
_CHAIN = re.compile(r"&&|\|\||;|\n")
_CD = re.compile(r"^\s*cd\s")


def short_command(command: str) -> str:
    """A command's first line without ``cd`` prefixes and output plumbing (``2>&1``, a
    trailing ``| tail -20``): what was run, not how its output was shown."""
    # A line ending in a backslash goes on in the next one; comment lines are not run.
    lines = command.strip().replace("\\\n", " ").splitlines()
    first = next((line for line in lines if not line.lstrip().startswith("#")), "")
    shown = " ".join(_PLUMBING.sub("", _CD_PREFIX.sub("", first)).split())
    return clip(shown, 100)


_PLUMBING = re.compile(
    r"(?:\s+2>&1|\s*\|\s*(?:tail|head|less|more|cat)(?:\s+-n)?(?:\s+-?\d+)?)+\s*$"
)


def command_key(command: str) -> str:
    """The program and its first word that is not an option: "python pytest", "npm test"."""
    words = [w for w in short_command(command).split() if not w.startswith("-")]
    return " ".join(words[:2])


def keys_of(action: Action) -> list[str]:
    """What a later success must match to clear this action's error: the file, or each
    command of a ``a && b`` chain."""
    if action.command is not None:
        parts = _CHAIN.split(_CD_PREFIX.sub("", action.command.strip()))
        return unique(command_key(p) for p in parts if p.strip() and not _CD.match(p))
    return [action.path] if action.path else []


def changes_state(command: str) -> bool:
    """Whether a command did something rather than look: its first program (after ``cd``
    and variable assignments) is not one that only reads, and ``git`` is not asked to
    show status, a diff or a log. A command with an output redirection writes."""
    words = [w for w in short_command(command).split() if "=" not in w or w.startswith("-")]
    if not words:
        return False
    program = words[0].rsplit("/", 1)[-1]
    if program == "git":
        action = next((w for w in words[1:] if not w.startswith("-")), "")
        return action not in _GIT_LOOKING
    return program not in _LOOKING or " > " in command or " >> " in command


def passed_checks(facts: Facts) -> set[int]:
    """Check commands that succeeded and were not followed by a failure of the same check."""
    last: dict[str, Action] = {}
    for action in facts.actions:
        if action.command and action.answered and _CHECK.search(short_command(action.command)):
            last[command_key(action.command)] = action
    passed: set[int] = set()
    for action in facts.actions:
        if action.command and action.succeeded and _CHECK.search(short_command(action.command)):
            final = last[command_key(action.command)]
            if final.succeeded:
                passed.add(id(action))
    return passed


def errors(facts: Facts) -> tuple[list[tuple[str, str]], list[tuple[str, str, str]]]:
    """(what failed, error) pairs still open, and (what failed, error, how it was
    cleared) for those a later success cleared: on the same file or the same command
    (its program and first word; any command of a chain), or, for a check whose error
    names a file (``a.ts(3,5): error ...``), a later successful change of that file."""
    open_errors: dict[str, tuple[str, str]] = {}
    named: dict[str, tuple[str, str]] = {}
    resolved: list[tuple[str, str, str]] = []

    def clear(failure: tuple[str, str], how: str) -> None:
        nonlocal open_errors, named
        resolved.append((*failure, how))
        open_errors = {k: v for k, v in open_errors.items() if v is not failure}
        named = {k: v for k, v in named.items() if v is not failure}

    for action in facts.actions:
        keys = keys_of(action)
        if not keys or not action.answered:
            continue
        if action.error is not None:
            shown = short_command(action.command) if action.command else keys[0]
            failure = (shown, one_line(action.error))
            for key in keys:
                open_errors[key] = failure
            if action.command is not None:
                for path in _NAMED_FILE.findall(action.error):
                    named[path] = failure
            continue
        for key in keys:
            failure_or_none = open_errors.get(key)
            if failure_or_none is not None:
                clear(failure_or_none, "then succeeded")
        if action.writes and action.path:
            for path, failure in list(named.items()):
                if action.path == path or action.path.endswith("/" + path):
                    clear(failure, f"then `{action.path}` was changed")
    return unique_pairs(open_errors.values()), resolved


# A file an error line starts with ("src/a.ts(3,5): ...", "src/a.py:3: ...").
_NAMED_FILE = re.compile(r"^([\w@.~/-]{1,300}\.\w{1,10})(?:\(\d{1,7},\d{1,7}\)|:\d)")


def unique_pairs(pairs: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    return list(dict.fromkeys(pairs))


@dataclass(frozen=True)
class Commit:
    branch: str
    hash: str
    message: str


# git's report of a commit it made: "[main 1a2b3c4] Subject" ("(root-commit)" for the first).
_COMMITTED = re.compile(
    r"^\[([\w./-]{1,100})(?: \(root-commit\))? ([0-9a-f]{7,40})\] ([^\n]{1,200})$", re.MULTILINE
)


def commits(facts: Facts) -> dict[int, list[Commit]]:
    """The commits each successful ``git`` command reports having made, by action."""
    found: dict[int, list[Commit]] = {}
    for action in facts.actions:
        if action.command and action.succeeded and "git" in action.command:
            made = [
                Commit(branch, sha, " ".join(message.split()))
                for branch, sha, message in _COMMITTED.findall(action.result)
                if "`" not in message and "`" not in branch
            ]
            if made:
                found[id(action)] = made
    return found
