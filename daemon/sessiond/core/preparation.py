"""pi 0.73.1's prepareCompaction: what to summarize.

The window starts where the previous compaction's kept region starts, so the
region it kept is summarized this time (with its summary as the previous
summary); the cut keeps about ``keepRecentTokens`` of the newest messages.
The result is the ``CompactionPreparation`` hooks see and ``--dry-run`` prints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Final

from sessiond.settings import CompactionSettings

from .context import context_from_path
from .cutpoints import find_cut_point
from .entries import CompactionEntry, MessageEntry
from .fileops import FileOps
from .messages import AnyMessage
from .path_view import PathView, message_for_summary
from .tokens import Estimator, assistant_usage, calculate_prompt_tokens, estimate_context_tokens

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
    path: PathView,
    settings: CompactionSettings,
    *,
    tokens_before: int | None = None,
    estimator: Estimator | None = None,
) -> CompactionPreparation | NotCompactable:
    """``tokens_before`` is the context estimate at the leaf; computed from the path
    (with ``estimator``) when not given."""
    size = len(path)
    if size == 0:
        return NotCompactable(NOTHING_TO_COMPACT)
    if path.type_at(size - 1) == "compaction":
        return NotCompactable(ALREADY_COMPACTED)
    previous_index = next(
        (i for i in range(size - 1, -1, -1) if path.type_at(i) == "compaction"), -1
    )
    previous: CompactionEntry | None = None
    boundary_start = 0
    if previous_index >= 0:
        entry = path.entry_at(previous_index)
        previous = entry if isinstance(entry, CompactionEntry) else None
        boundary_start = previous_index + 1
        if previous is not None:
            for index in range(previous_index - 1, -1, -1):
                if path.id_at(index) == previous.first_kept_entry_id:
                    boundary_start = index
                    break

    keep = settings.keep_recent_tokens
    if settings.adjust_keep_by_usage:
        keep = adjusted_keep_recent_tokens(path, keep, previous_index, boundary_start)
    cut = find_cut_point(path, boundary_start, size, keep)
    if cut.first_kept_index >= size:
        return NotCompactable(NOTHING_TO_COMPACT)
    history_end = cut.turn_start_index if cut.is_split_turn else cut.first_kept_index

    summarize, summarize_ids = _messages(path, boundary_start, history_end)
    prefix, prefix_ids = (
        _messages(path, cut.turn_start_index, cut.first_kept_index)
        if cut.is_split_turn
        else ([], [])
    )
    recent, recent_ids = _messages(path, cut.first_kept_index, size)
    if not summarize and not prefix:
        return NotCompactable(NOTHING_TO_COMPACT)

    file_ops = FileOps()
    if previous is not None and not previous.made_by_extension:
        file_ops.add_details(previous.details)
    for message in (*summarize, *prefix):
        file_ops.add_message(message)

    if tokens_before is None:
        if estimator is None:
            raise ValueError("prepare_compaction needs tokens_before or an estimator")
        entries = [path.entry_at(i) for i in range(size)]
        tokens_before = estimate_context_tokens(
            context_from_path(entries).messages, estimator
        ).tokens

    return CompactionPreparation(
        first_kept_entry_id=path.id_at(cut.first_kept_index),
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
        boundary_start_id=path.id_at(boundary_start) if boundary_start < size else None,
    )


def _messages(path: PathView, start: int, end: int) -> tuple[list[AnyMessage], list[str]]:
    messages: list[AnyMessage] = []
    ids: list[str] = []
    for index in range(start, end):
        if path.type_at(index) not in ("message", "custom_message", "branch_summary"):
            continue
        message = message_for_summary(path.entry_at(index))
        if message is not None:
            messages.append(message)
            ids.append(path.id_at(index))
    return messages, ids


def adjusted_keep_recent_tokens(
    path: PathView, keep: int, previous_index: int, boundary_start: int
) -> int:
    """Shrink the keep budget when measured prompts show the estimator undercounts.

    oh-my-pi divides the budget by measured prompt tokens over estimated tokens;
    the measured prompt includes the system prompt and tool definitions, which
    the estimate never sees, so a large system prompt collapses the kept region
    to a single message. sessiond instead fits a line through
    the measurements of every request since the last compaction: prompt tokens
    against the estimate of the context that request carried. The slope is the
    estimator's bias, the intercept the fixed overhead. With fewer than two
    usable measurements the bias cannot be told from the overhead, and the
    budget is left as it is.
    """
    points: list[tuple[float, float]] = []
    running = 0
    if previous_index >= 0:
        running += path.tokens_at(previous_index)  # the summary message leads the context
        context_ranges = [
            range(boundary_start, previous_index),
            range(previous_index + 1, len(path)),
        ]
    else:
        context_ranges = [range(0, len(path))]
    for span in context_ranges:
        for index in span:
            kind = path.type_at(index)
            if kind == "message" and path.role_at(index) == "assistant" and index > previous_index:
                entry = path.entry_at(index)
                usage = assistant_usage(entry.message) if isinstance(entry, MessageEntry) else None
                if usage is not None:
                    points.append((float(running), float(calculate_prompt_tokens(usage))))
            if kind in ("message", "custom_message", "branch_summary"):
                running += path.tokens_at(index)
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
