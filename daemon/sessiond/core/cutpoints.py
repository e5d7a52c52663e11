"""Where to cut a path for compaction (pi's findCutPoint; protocol/behaviour.md#cut-points).

A cut keeps everything from the cut point to the leaf and summarizes what is
before it. It may land on a user, assistant, bash, custom or summary message,
a ``custom_message`` or a ``branch_summary``; never on a tool result, and
(sessiond's rule) never between an assistant's tool calls and their results.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Final

from .entries import MessageEntry
from .messages import AssistantMessage, ToolCall, ToolResultMessage
from .path_view import PathView

# Roles a cut may land on. pi's list, the legacy hookMessage spelling of
# custom, and the oh-my-pi roles it excludes only by accident (it tests that old name).
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
# Entries that start a turn: what a split turn's prefix starts at.
TURN_START_ROLES: Final = frozenset({"user", "bashExecution"})
_METADATA_STOPS: Final = frozenset({"message", "compaction"})


@dataclass(frozen=True)
class CutPoint:
    first_kept_index: int
    turn_start_index: int
    is_split_turn: bool


def find_valid_cut_points(path: PathView, start: int, end: int) -> list[int]:
    """Ascending indices in ``[start, end)`` a cut may land on."""
    points: list[int] = []
    pending_calls: set[str] = set()
    for index in range(start, end):
        kind = path.type_at(index)
        role = path.role_at(index) if kind == "message" else None
        if role in ("user", "assistant"):
            pending_calls = set()
        if role == "assistant":
            pending_calls = _tool_call_ids(path, index)
        elif role == "toolResult":
            pending_calls.discard(_tool_result_id(path, index))
            continue
        inside_batch = bool(pending_calls) and role not in ("user", "assistant")
        if inside_batch:
            continue  # would separate a tool call from its result
        if (kind == "message" and role in CUT_ROLES) or kind in (
            "branch_summary",
            "custom_message",
        ):
            points.append(index)
    return points


def _tool_call_ids(path: PathView, index: int) -> set[str]:
    entry = path.entry_at(index)
    if isinstance(entry, MessageEntry) and isinstance(entry.message, AssistantMessage):
        return {b.id for b in entry.message.content if isinstance(b, ToolCall)}
    return set()


def _tool_result_id(path: PathView, index: int) -> str:
    entry = path.entry_at(index)
    if isinstance(entry, MessageEntry) and isinstance(entry.message, ToolResultMessage):
        return entry.message.tool_call_id
    return ""


def find_turn_start_index(path: PathView, index: int, start: int) -> int:
    """The nearest turn start at or before ``index`` (down to ``start``), or -1."""
    for position in range(index, start - 1, -1):
        kind = path.type_at(position)
        if kind in ("branch_summary", "custom_message"):
            return position
        if kind == "message" and path.role_at(position) in TURN_START_ROLES:
            return position
    return -1


def find_cut_point(path: PathView, start: int, end: int, keep_recent_tokens: int) -> CutPoint:
    """Walk back from the leaf until ``keep_recent_tokens`` are kept; cut at the
    next valid point at or after that message.

    Metadata just before the cut (model or thinking changes, labels) is pulled
    into the kept part. Unlike pi, that pull-in does not turn a cut at a user
    message into a "split turn" whose prefix is the whole previous turn.
    """
    points = find_valid_cut_points(path, start, end)
    if not points:
        return CutPoint(start, -1, False)
    cut = points[0]
    accumulated = 0
    for index in range(end - 1, start - 1, -1):
        if path.type_at(index) != "message":
            continue
        accumulated += path.tokens_at(index)
        if accumulated >= keep_recent_tokens:
            position = bisect.bisect_left(points, index)
            if position < len(points):
                cut = points[position]
            break
    chosen = cut
    while cut > start and path.type_at(cut - 1) not in _METADATA_STOPS:
        cut -= 1
    is_user = path.type_at(chosen) == "message" and path.role_at(chosen) == "user"
    turn_start = -1 if is_user else find_turn_start_index(path, chosen, start)
    # A turn that starts inside the pulled-in run (a custom_message right before
    # the cut) has no prefix to summarize.
    turn_start = min(turn_start, cut)
    return CutPoint(cut, turn_start, not is_user and turn_start != -1)
