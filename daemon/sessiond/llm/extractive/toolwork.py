"""Work done through tools other than edits and shell commands: searches, the agent's
own task list, and tools that change something elsewhere (an issue tracker, a database).

- A search is a call of a search tool (its name is one of grep, glob, find, search, rg,
  or ends in "_search") with a pattern argument; it is told as the pattern and where.
- The task list is what the agent's to-do tools left: a tool whose argument is a list of
  items with a text and a status (Claude Code's ``TodoWrite``, a ``plan`` of steps)
  replaces the list; a task tool that creates one item (its result names the item's
  number, "#3") adds it, and one that updates an item by its id changes its status.
- A tool that changes something elsewhere is one whose name holds a verb of change
  (create, update, delete, apply, add, set, remove, close, merge, move, rename, post,
  send, publish, upload, insert, archive) and that succeeded; it is told as the tool and
  the titles of what it made.

The rules read tool names and argument shapes only, never one product's wording.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from sessiond.llm.extractive.facts import Action, Facts
from sessiond.llm.extractive.text import one_line, unique

_SEARCH_TOOLS: Final = frozenset({"grep", "glob", "find", "search", "rg", "ripgrep"})
_PATTERN_KEYS: Final = ("pattern", "query", "regex", "glob", "name")
_WHERE_KEYS: Final = ("path", "glob", "include", "directory", "dir", "cwd")
_ITEM_TEXT_KEYS: Final = ("content", "subject", "title", "step", "task", "description")
_ID_KEYS: Final = ("taskId", "task_id", "id")
_CREATED_NUMBER: Final = re.compile(r"#(\d{1,6})\b")
_CHANGING: Final = re.compile(
    r"(?:^|[_\-.]|(?<=[a-z])(?=[A-Z]))(create|update|delete|apply|add|set|remove|close|merge"
    r"|move|rename|post|send|publish|upload|insert|archive)(?=$|[_\-.A-Z])",
    re.IGNORECASE,
)
_TITLE_KEYS: Final = ("title", "name", "subject", "summary", "message", "query")
# Longer argument values are bodies, not titles.
_TITLE_LIMIT: Final = 120
_STATUSES: Final = {
    "completed": "done",
    "complete": "done",
    "done": "done",
    "in_progress": "active",
    "in-progress": "active",
    "active": "active",
    "pending": "open",
    "todo": "open",
    "not_started": "open",
    "open": "open",
}


def is_search(action: Action) -> bool:
    name = action.tool.lower()
    return name in _SEARCH_TOOLS or name.endswith("_search")


def searches(facts: Facts) -> list[str]:
    """Each distinct search, as its pattern in code font and where it looked."""
    told: list[str] = []
    for action in facts.actions:
        if not is_search(action):
            continue
        pattern = _string_arg(action, _PATTERN_KEYS)
        if pattern is None or "`" in pattern:
            continue
        where = _where(action, pattern)
        paths = found_paths(action.result) if action.succeeded else []
        hits = ""
        if paths:
            more = f" (+{len(paths) - _PATHS_SHOWN} more)" if len(paths) > _PATHS_SHOWN else ""
            hits = " found " + ", ".join(f"`{p}`" for p in paths[:_PATHS_SHOWN]) + more
        told.append(f"`{pattern}`" + (f" in `{where}`" if where else "") + hits)
    return unique(told)


# Files a search found, shown per search; the lines of its result read for them.
_PATHS_SHOWN: Final = 3
_RESULT_LINES: Final = 200
_PATH_CHARS: Final = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@~./+-[]()"
)


def found_paths(result: str) -> list[str]:
    """The files a search result names: lines that are a path, or that start with one
    ("path:12: match"), each once. A path has a slash or a dot past its first character
    and only the characters paths are usually made of."""
    paths: list[str] = []
    for line in result.splitlines()[:_RESULT_LINES]:
        head = line.strip().split(":", 1)[0]
        if (
            2 < len(head) <= 200
            and not head.startswith("..")
            and ("/" in head or "." in head[1:])
            and _PATH_CHARS.issuperset(head)
        ):
            paths.append(head)
    return unique(paths)


def _where(action: Action, pattern: str) -> str | None:
    for key in _WHERE_KEYS:
        value = _string_arg(action, (key,))
        if value is not None and value != pattern and "`" not in value:
            return value
    return None


def _string_arg(action: Action, keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = action.args.get(key)
        if isinstance(value, str) and value.strip() and len(value) <= _TITLE_LIMIT * 2:
            return one_line(value)
    return None


@dataclass
class Task:
    text: str
    status: str


def task_list(facts: Facts) -> list[Task]:
    """The agent's task list as its to-do tools last left it (see the module)."""
    tasks: dict[str, Task] = {}
    created = 0
    for action in facts.actions:
        items = _listed_items(action.args)
        if items is not None:
            tasks = {str(index): task for index, task in enumerate(items)}
            continue
        name = action.tool.lower()
        if "task" not in name and "todo" not in name:
            continue
        text = _string_arg(action, _ITEM_TEXT_KEYS[:4])
        key = _string_arg(action, _ID_KEYS)
        status = _status(action.args.get("status"))
        if "create" in name or "add" in name:
            if text is None or not action.succeeded:
                continue
            created += 1
            number = _CREATED_NUMBER.search(action.result)
            tasks[number.group(1) if number else str(created)] = Task(text, status or "open")
        elif key is not None and key in tasks and action.succeeded:
            if action.args.get("status") == "deleted":
                del tasks[key]
                continue
            if status is not None:
                tasks[key].status = status
            if text is not None:
                tasks[key].text = text
    return list(tasks.values())


def _listed_items(args: dict[str, object]) -> list[Task] | None:
    """A whole list of tasks in one argument, if the call has one."""
    for value in args.values():
        if not isinstance(value, list) or not value:
            continue
        items: list[Task] = []
        for item in value:
            if not isinstance(item, dict):
                break
            text = next(
                (one_line(t) for k in _ITEM_TEXT_KEYS if isinstance(t := item.get(k), str) and t),
                None,
            )
            status = _status(item.get("status"))
            if text is None or status is None:
                break
            items.append(Task(text, status))
        else:
            return items
    return None


def _status(value: object) -> str | None:
    return _STATUSES.get(value.lower()) if isinstance(value, str) else None


def changes_elsewhere(facts: Facts, titles: int) -> list[str]:
    """Lines for the tools that changed something outside the files (see the module)."""
    made: dict[str, list[str]] = {}
    for action in facts.actions:
        if not action.succeeded or action.writes or action.command is not None:
            continue
        name = action.tool
        lowered = name.lower()
        if "task" in lowered or "todo" in lowered or _CHANGING.search(name) is None:
            continue
        title = _string_arg(action, _TITLE_KEYS)
        made.setdefault(name, [])
        if title is not None and len(title) <= _TITLE_LIMIT:
            made[name].append(title)
    return [_made_line(name, unique(found), titles) for name, found in made.items()]


def _made_line(tool: str, titles: list[str], limit: int) -> str:
    shown = "; ".join(f'"{title}"' for title in titles[:limit])
    more = f" (+{len(titles) - limit} more)" if len(titles) > limit else ""
    return f"- [x] `{tool}`" + (f": {shown}{more}" if shown else "")


def texts(tasks: Iterable[Task], status: str) -> list[str]:
    return unique(task.text for task in tasks if task.status == status)
