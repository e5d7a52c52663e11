"""How much of each kind a summary holds, and how the amounts shrink together."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class Limits:
    """How much of each kind goes in; all shrink together when the text is too long."""

    goal: int = 400
    item: int = 320
    pending: int = 1500
    last_reply: int = 400
    later_requests: int = 6
    done: int = 60
    reported: int = 4
    decisions: int = 10
    constraints: int = 8
    files: int = 150
    commands: int = 16
    names: int = 100
    errors: int = 8
    defined: int = 24
    # Lines of code quoted for a changed file.
    code_lines: int = 8
    outline: int = 30
    findings: int = 12000
    # Lines of a long request quoted, of declarations quoted for a file read, and how
    # many files read are shown with theirs.
    request_lines: int = 12
    # Titles shown of what a tool made elsewhere (issues, migrations).
    titles: int = 6
    read_lines: int = 4
    files_detailed: int = 12
    # Characters of an earlier summary's context carried into an update.
    carried: int = 9000

    def scaled(self, factor: float) -> Limits:
        """Counts shrink with ``factor``; lengths more slowly and not below a readable floor,
        because a line too short for its sentence leaves the sentence out."""
        changes: dict[str, int] = {}
        for spec in fields(self):
            value: int = getattr(self, spec.name)
            floor = _LENGTH_FLOORS.get(spec.name)
            if floor is None:
                least = min(value, _COUNT_FLOORS.get(spec.name, 1))
                changes[spec.name] = max(least, int(value * factor))
            else:
                changes[spec.name] = max(floor, int(value * factor**0.5))
        return replace(self, **changes)


_LENGTH_FLOORS = {"goal": 120, "item": 120, "pending": 300, "last_reply": 120}
# The work done is what a summary is for: its items are the last to go (the other
# counts shrink first), each file still shows a few of its changed lines.
_COUNT_FLOORS = {"done": 40, "code_lines": 3}
