"""pi 1.6's prepareCompaction: what to summarize.

It works on the projected path (edits applied, system messages left out of what is
summarized). The window starts right after the previous compaction in the
projection, that is at the region it kept, so that region is summarized this time
(with its summary as the previous summary); the cut keeps about
``keepRecentTokens`` of the newest context.
The result is the ``CompactionPreparation`` hooks see and ``--dry-run`` prints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Final

from sessiond.settings import CompactionSettings

from .cutpoints import find_cut_point
from .fileops import FileOps
from .messages import AnyMessage, SystemMessage
from .path_reader import PathReader
from .projected_path import ProjectedPath
from .tokens import Estimator, assistant_usage, calculate_prompt_tokens

ALREADY_COMPACTED: Final = "Already compacted"
NOTHING_TO_COMPACT: Final = "Nothing to compact (session too small)"
# A ratio above this is a measurement gone wrong, not an estimator's bias.
_MAX_KEEP_RATIO: Final = 4.0


@dataclass
class CompactionPreparation:
    first_kept_entry_id: str
    messages_to_summarize: list[AnyMessage]
    turn_prefix_messages: list[AnyMessage]
    recent_messages: list[AnyMessage]
    is_split_turn: bool
    tokens_before: int
    previous_summary: str | None
    previous_preserve_data: dict[str, Any] | None
    file_ops: FileOps
    settings: CompactionSettings
    summarize_entry_ids: list[str] = field(default_factory=list)
    turn_prefix_entry_ids: list[str] = field(default_factory=list)
    recent_entry_ids: list[str] = field(default_factory=list)
    keep_recent_tokens: int = 0
    boundary_start_id: str | None = None


@dataclass(frozen=True)
class NotCompactable:
    """Why there is nothing to compact; ``reason`` is pi's message."""

    reason: str


def prepare_compaction(
    path: PathReader,
    settings: CompactionSettings,
    *,
    tokens_before: int | None = None,
    estimator: Estimator,
) -> CompactionPreparation | NotCompactable:
    """pi 1.6's ``prepareCompaction`` on the projected path. ``tokens_before`` is the
    projected context estimate at the leaf; computed from the path when not given."""
    size = len(path)
    if size == 0:
        return NotCompactable(NOTHING_TO_COMPACT)
    if path.type_at(size - 1) == "compaction":
        return NotCompactable(ALREADY_COMPACTED)
    view = ProjectedPath(path, estimator)
    previous = view.previous_compaction
    boundary_start = 1 if previous is not None else 0
    end = len(view)

    keep = settings.keep_recent_tokens
    if settings.adjust_keep_by_usage:
        keep = adjusted_keep_recent_tokens(view, keep)
    cut = find_cut_point(view, boundary_start, end, keep)
    if cut.first_kept_index >= end:
        return NotCompactable(NOTHING_TO_COMPACT)
    history_end = cut.turn_start_index if cut.is_split_turn else cut.first_kept_index

    summarize, summarize_ids = _messages(view, boundary_start, history_end)
    prefix, prefix_ids = (
        _messages(view, cut.turn_start_index, cut.first_kept_index)
        if cut.is_split_turn
        else ([], [])
    )
    recent, recent_ids = _messages(view, cut.first_kept_index, end)
    if not summarize and not prefix:
        return NotCompactable(NOTHING_TO_COMPACT)

    file_ops = FileOps()
    if previous is not None and not previous.made_by_extension:
        file_ops.add_details(previous.details)
    for message in (*summarize, *prefix):
        file_ops.add_message(message)

    if tokens_before is None:
        tokens_before = view.estimate_context().tokens

    return CompactionPreparation(
        first_kept_entry_id=view.id_at(cut.first_kept_index),
        messages_to_summarize=summarize,
        turn_prefix_messages=prefix,
        recent_messages=recent,
        is_split_turn=cut.is_split_turn,
        tokens_before=tokens_before,
        previous_summary=previous.summary if previous is not None else None,
        previous_preserve_data=previous.preserve_data if previous is not None else None,
        file_ops=file_ops,
        settings=settings,
        summarize_entry_ids=summarize_ids,
        turn_prefix_entry_ids=prefix_ids,
        recent_entry_ids=recent_ids,
        keep_recent_tokens=keep,
        boundary_start_id=view.id_at(boundary_start) if boundary_start < end else None,
    )


def _messages(view: ProjectedPath, start: int, end: int) -> tuple[list[AnyMessage], list[str]]:
    """What entries ``start..end`` give the summarizer: their projected messages, system
    messages left out (the compaction carries their replay) and compactions giving none."""
    messages: list[AnyMessage] = []
    ids: list[str] = []
    for index in range(start, end):
        if view.type_at(index) == "compaction" or not view.roles_at(index):
            continue
        for message in view.messages_at(index):
            if isinstance(message, SystemMessage):
                continue
            messages.append(message)
            ids.append(view.id_at(index))
    return messages, ids


def adjusted_keep_recent_tokens(view: ProjectedPath, keep: int) -> int:
    """Shrink the keep budget when measured prompts show the estimator undercounts.

    oh-my-pi divides the budget by measured prompt tokens over estimated tokens;
    the measured prompt includes the system prompt and tool definitions, which
    the estimate never sees, so a large system prompt collapses the kept region
    to a single message. sessiond instead fits a line through
    the measurements of every request since the last compaction: prompt tokens
    against the estimate of the projected context that request carried. The slope is
    the estimator's bias, the intercept the fixed overhead. With fewer than two
    usable measurements the bias cannot be told from the overhead, and the
    budget is left as it is.
    """
    points: list[tuple[float, float]] = []
    running = 0
    for k in range(len(view)):
        if view.position(k) > view.compaction_index and "assistant" in view.roles_at(k):
            for message in view.messages_at(k):
                usage = assistant_usage(message)
                if usage is not None:
                    points.append((float(running), float(calculate_prompt_tokens(usage))))
        running += view.tokens_at(k)
    if len(points) < 2:
        return keep
    xs = [x for x, _ in points]
    spread = max(xs) - min(xs)
    if spread < max(1000.0, 0.05 * max(xs)):
        return keep
    mean_x = sum(xs) / len(xs)
    mean_y = sum(y for _, y in points) / len(points)
    variance = sum((x - mean_x) ** 2 for x in xs)
    covariance = sum((x - mean_x) * (y - mean_y) for x, y in points)
    slope = covariance / variance if variance else 0.0
    if not math.isfinite(slope) or slope <= 1.0:
        return keep
    return max(1, math.floor(keep / min(slope, _MAX_KEEP_RATIO)))
