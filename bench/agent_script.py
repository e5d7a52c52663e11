"""The scripted agent session both sides of the compaction bench play: ~60 coding tasks.

Each task is a user request, an answer that reads two files of the project (2-6 KB
each, so that a turn adds about 2,500 tokens), the files' contents as tool results,
and a closing answer. The same script answers pi's model requests (through
``bench.slow_provider``) and is appended to sessiond by the bench's own agent loop.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Task:
    number: int
    request: str
    opening: str
    files: tuple[str, str]
    closing: str

    def calls(self) -> list[dict[str, Any]]:
        return [
            {"id": f"call_{self.number}_{index}", "name": "read", "args": {"path": path}}
            for index, path in enumerate(self.files)
        ]


def _source(rng: random.Random, module: str, size: int) -> str:
    lines = [f'"""{module}: part of the report generator."""', "", "import json", ""]
    index = 0
    while sum(len(line) + 1 for line in lines) < size:
        index += 1
        lines += [
            f"def step_{index}_{rng.randrange(10_000)}(rows, limit={rng.randrange(1, 99)}):",
            "    selected = [row for row in rows if row.get('level', 0) <= limit]",
            f"    return json.dumps({{'module': '{module}', 'count': len(selected)}})",
            "",
        ]
    return "\n".join(lines) + "\n"


class Script:
    def __init__(self, tasks: int = 60, seed: int = 25) -> None:
        rng = random.Random(seed)
        self.tasks: list[Task] = []
        self.files: dict[str, str] = {}
        for number in range(1, tasks + 1):
            paths = (f"src/report/part{number}_a.py", f"src/report/part{number}_b.py")
            for path in paths:
                self.files[path] = _source(rng, path, rng.randrange(3000, 6000))
            self.tasks.append(
                Task(
                    number=number,
                    request=(
                        f"Task {number}: the report generator's part {number} drops rows whose "
                        "level is missing. Read the two modules of that part, find where the "
                        "level is compared, and tell me what to change. Keep the public names."
                    ),
                    opening=f"I will read both modules of part {number} first.",
                    files=paths,
                    closing=(
                        f"In part {number} both modules compare `row.get('level', 0)` with the "
                        "limit, so a missing level counts as 0 and passes; the rows dropped come "
                        "from the caller filtering on `level` before. "
                        + "Changing the default to `None` and skipping those rows explicitly "
                        "keeps the public names and makes the intent visible. " * 4
                    ),
                )
            )

    def write_files(self, root: Path) -> None:
        for path, text in self.files.items():
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)

    def task(self, number: int) -> Task:
        return self.tasks[number - 1]

    def model_answer(self, messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
        """What the model says next: the opening and its reads after a request, the
        closing after the tool results."""
        number = None
        for message in reversed(messages):
            if message.get("role") == "user":
                number = _task_number(_text(message.get("content")))
                if number is not None:
                    break
        if number is None:
            return "Nothing to do.", []
        task = self.task(number)
        if messages and messages[-1].get("role") == "user":
            return task.opening, task.calls()
        return task.closing, []


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _task_number(text: str) -> int | None:
    if not text.startswith("Task "):
        return None
    head = text[5:].split(":", 1)[0]
    return int(head) if head.isdigit() else None
