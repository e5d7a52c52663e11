"""The structured checkpoint (Goal, Constraints & Preferences, Progress, Key Decisions,
Next Steps, Critical Context) as lists of lines, read from and written to text.

A previous summary, whether a model or these rules wrote it, is read back into
the same sections so that an update can merge the new work into it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sessiond.core.fileops import strip_file_tags

MARKER = "*Offline extractive summary: built by rules from the conversation text, without a model.*"

_HEADING = re.compile(r"^(#{2,3})\s+(.+?)\s*#*\s*$")
_NUMBERED = re.compile(r"^\s*\d+[.)]\s+")
_NONE_ITEM = re.compile(r"^[-*]?\s*\(?none[^)]*\)?\.?$", re.IGNORECASE)
# Lines these rules write about the moment of the summary; stale in the next one.
_STALE = re.compile(
    r"^-\s+(Last reply|Open user request \(verbatim\)|Last assistant message"
    r"|Pending user request \(verbatim\)):"
)


@dataclass
class Checkpoint:
    goal: list[str] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    in_progress: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    decisions: list[str] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)
    critical: list[str] = field(default_factory=list)


def _section_for(level: int, title: str, current: str | None) -> str | None:
    name = title.lower()
    if level == 3 and current in ("done", "in_progress", "blocked", "progress"):
        if "done" in name or "complete" in name:
            return "done"
        if "progress" in name:
            return "in_progress"
        if "block" in name:
            return "blocked"
    if "goal" in name or "original request" in name:
        return "goal"
    if "constraint" in name or "preference" in name:
        return "constraints"
    if "progress" in name:
        return "progress"
    if "decision" in name:
        return "decisions"
    if "next" in name:
        return "next_steps"
    return "critical"


def parse_checkpoint(text: str) -> Checkpoint:
    """Sections of a summary; text under unknown headings goes to Critical Context."""
    checkpoint = Checkpoint()
    text = strip_file_tags(text)
    section: str | None = None
    skipping_stale = False
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip() or line.strip() == MARKER:
            continue
        heading = _HEADING.match(line)
        if heading is not None:
            level, title = len(heading.group(1)), heading.group(2)
            section = _section_for(level, title, section)
            if section == "critical" and title.lower() not in ("critical context",):
                checkpoint.critical.append(f"**{title}**")
            skipping_stale = False
            continue
        if _STALE.match(line):
            skipping_stale = True
            continue
        if skipping_stale and line.lstrip().startswith(">"):
            continue
        skipping_stale = False
        if _NONE_ITEM.match(line.strip()):
            continue
        target = "done" if section == "progress" else section or "critical"
        if target == "next_steps":
            line = _NUMBERED.sub("", line)
        getattr(checkpoint, target).append(line)
    return checkpoint


def merge(earlier: Checkpoint, later: Checkpoint, *, finished: bool) -> Checkpoint:
    """``earlier`` updated by ``later``, the size of one summary rather than two.

    ``finished``: the new part of the conversation took the interrupted work to an
    answer, so what was in progress counts as done. An item in progress also moves
    when the names it mentions all appear in the new Done lines. Next Steps are the
    new ones only (the old ones are stale), and a blocker goes once its names turn
    up in the new Done lines.
    """
    merged = Checkpoint(goal=_union(earlier.goal, later.goal) if earlier.goal else later.goal)
    merged.constraints = _union(earlier.constraints, later.constraints)
    merged.decisions = _union(earlier.decisions, later.decisions)
    merged.critical = _merge_name_lines(_union(earlier.critical, later.critical))
    new_done = "\n".join(later.done)
    moved: list[str] = []
    kept: list[str] = []
    for item in earlier.in_progress:
        names = _CODE.findall(item)
        if finished or (names and all(f"`{name}`" in new_done for name in names)):
            moved.append(_tick(item))
        else:
            kept.append(item)
    merged.done = _union(earlier.done, moved, later.done)
    merged.in_progress = _union(kept, later.in_progress)
    merged.blocked = _union(
        [item for item in earlier.blocked if not _cleared(item, new_done)], later.blocked
    )
    merged.next_steps = later.next_steps or earlier.next_steps
    return merged


def _cleared(item: str, new_done: str) -> bool:
    names = _CODE.findall(item)
    return bool(names) and f"`{names[0]}`" in new_done


_NAME_LINE = re.compile(r"^- (Files modified|Files read|Commands run|Names used): ")
_CODE = re.compile(r"`([^`]+)`")


def _merge_name_lines(items: list[str]) -> list[str]:
    """One line of each kind of name list, holding the names of both summaries."""
    names: dict[str, list[str]] = {}
    result: list[str] = []
    for item in items:
        match = _NAME_LINE.match(item)
        if match is None:
            result.append(item)
            continue
        label = match.group(1)
        if label not in names:
            names[label] = []
            result.append(label)  # a placeholder, rendered below
        for name in _CODE.findall(item):
            if name not in names[label]:
                names[label].append(name)
    modified = set(names.get("Files modified", []))
    if "Files read" in names:
        names["Files read"] = [path for path in names["Files read"] if path not in modified]
    return [
        (f"- {item}: " + ", ".join(f"`{n}`" for n in names[item]) if item in names else item)
        for item in result
        if item not in names or names[item]
    ]


_LAST_STEP = re.compile(r" \(last step: [^\n]*\)$")


def _tick(item: str) -> str:
    """An item in progress as a done one; where it had stopped no longer matters."""
    return _LAST_STEP.sub("", item.replace("- [ ]", "- [x]", 1))


def _union(*lists: list[str]) -> list[str]:
    result: list[str] = []
    seen: set[str] = set()
    for items in lists:
        for item in items:
            key = item.strip()
            # Only list items are deduplicated: a quote may repeat a line on purpose.
            if key.startswith(("- ", "* ")) and key in seen:
                continue
            seen.add(key)
            result.append(item)
    return result
