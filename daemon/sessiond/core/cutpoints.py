"""Where to cut a path for compaction (pi 1.6's findCutPoint; protocol/behaviour.md#cut-points).

A cut keeps everything from the cut point to the leaf and summarizes what is
before it. It works on the projected path (``core.projected_path``): an entry is
a cut point when a message it gives the context has a cut role (user, assistant,
bash, custom or summary message; never a tool result or a system message), and
(sessiond's rule) never between an assistant's tool calls and their results.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Final

from .messages import AssistantMessage, ToolCall, ToolResultMessage
from .projected_path import ProjectedPath

# Roles a cut may land on: pi's list, the legacy hookMessage spelling of custom, and
# the oh-my-pi roles it excludes only by accident (it tests that old name).
CUT_ROLES: Final = frozenset(
    {
        "user",
        "assistant",
        "bashExecution",
        "pythonExecution",
        "custom",
        "hookMessage",
        "developer",
        "fileMention",
        "branchSummary",
        "compactionSummary",
    }
)
# Roles that start a turn (pi 1.6): what a split turn's prefix starts at.
TURN_START_ROLES: Final = frozenset(
    {"user", "bashExecution", "custom", "hookMessage", "branchSummary", "compactionSummary"}
)


@dataclass(frozen=True)
class CutPoint:
    first_kept_index: int
    turn_start_index: int
    is_split_turn: bool


def find_valid_cut_points(view: ProjectedPath, start: int, end: int) -> list[int]:
    """Ascending indices in ``[start, end)`` a cut may land on."""
    points: list[int] = []
    pending_calls: set[str] = set()
    for index in range(start, end):
        if view.type_at(index) == "compaction":
            continue
        roles = view.roles_at(index)
        if "user" in roles or "assistant" in roles:
            pending_calls = set()
        if "assistant" in roles:
            pending_calls = _tool_call_ids(view, index)
        elif "toolResult" in roles:
            pending_calls.difference_update(_tool_result_ids(view, index))
            continue
        if pending_calls and "user" not in roles and "assistant" not in roles:
            continue  # would separate a tool call from its result
        if any(role in CUT_ROLES for role in roles):
            points.append(index)
    return points


def _tool_call_ids(view: ProjectedPath, index: int) -> set[str]:
    return {
        block.id
        for message in view.messages_at(index)
        if isinstance(message, AssistantMessage)
        for block in message.content
        if isinstance(block, ToolCall)
    }


def _tool_result_ids(view: ProjectedPath, index: int) -> set[str]:
    return {
        message.tool_call_id
        for message in view.messages_at(index)
        if isinstance(message, ToolResultMessage)
    }


def starts_turn(view: ProjectedPath, index: int) -> bool:
    if view.type_at(index) == "compaction":
        return False
    return any(role in TURN_START_ROLES for role in view.roles_at(index))


def find_turn_start_index(view: ProjectedPath, index: int, start: int) -> int:
    """The nearest turn start at or before ``index`` (down to ``start``), or -1."""
    for position in range(index, start - 1, -1):
        if starts_turn(view, position):
            return position
    return -1


def _recovery_omission_follows(view: ProjectedPath, cut: int, end: int) -> bool:
    """pi 1.6: after the cut, only an omitted overflow attempt (and its edits and
    metadata) follows. Then the cut moves past the last visible input, so that the
    attempt pi took out of the context is not what the kept part starts with."""
    suffix = range(cut + 1, end)
    omitted = {
        view.id_at(k) for k in suffix if view.intrinsically_visible(k) and not view.roles_at(k)
    }
    for k in suffix:
        if view.type_at(k) == "context_edit":
            edit = view.entry_at(k)
            replacement = getattr(edit, "replacement", None)
            if replacement is not None and getattr(edit, "target_id", None) not in omitted:
                return False
    if not any(
        view.type_at(k) == "message"
        and view.path.role_at(view.position(k)) == "assistant"
        and view.id_at(k) in omitted
        for k in suffix
    ):
        return False
    return all(
        view.type_at(k) != "compaction"
        and (not view.intrinsically_visible(k) or view.id_at(k) in omitted)
        for k in suffix
    )


def find_cut_point(view: ProjectedPath, start: int, end: int, keep_recent_tokens: int) -> CutPoint:
    """Walk back from the leaf adding up what each entry gives the context until
    ``keep_recent_tokens`` are kept; cut at the next valid point at or after that
    entry, or at the last valid point when the trailing tool results alone are over
    the budget.

    Entries that give the context nothing just before the cut (model or thinking
    changes, labels, edits) are pulled into the kept part. Unlike pi, that pull-in
    does not turn a cut at a user message into a "split turn" whose prefix is the
    whole previous turn.
    """
    points = find_valid_cut_points(view, start, end)
    if not points:
        return CutPoint(start, -1, False)
    cut = points[0]
    accumulated = 0
    exceeded = False
    for index in range(end - 1, start - 1, -1):
        tokens = view.tokens_at(index)
        if tokens == 0:
            continue
        accumulated += tokens
        if accumulated >= keep_recent_tokens:
            exceeded = True
            position = bisect.bisect_left(points, index)
            cut = points[position] if position < len(points) else points[-1]
            break
    if exceeded and _recovery_omission_follows(view, cut, end):
        cut += 1
    chosen = cut
    while cut > start and view.type_at(cut - 1) != "compaction" and not view.roles_at(cut - 1):
        cut -= 1
    whole = starts_turn(view, chosen)
    turn_start = -1 if whole else find_turn_start_index(view, chosen, start)
    turn_start = min(turn_start, cut)
    return CutPoint(cut, turn_start, not whole and turn_start != -1)
