"""What a branch summary covers: the entries left behind, within a budget.

Navigating from the old leaf to a target abandons the entries between the old
leaf and the deepest ancestor the two share. Their messages (tool results
aside: the tool calls carry that context) are taken newest first until the
token budget is spent, so the summary favours what was done last.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, Generic, Protocol, TypeVar

from .entries import (
    BranchSummaryEntry,
    CompactionEntry,
    ContextEditEntry,
    CustomMessageEntry,
    Entry,
    MessageEntry,
)
from .fileops import FileOps
from .messages import AnyMessage, BranchSummaryMessage, ToolResultMessage
from .projection import (
    compaction_summary_message,
    iso_to_ms,
    latest_edits,
    message_of_entry,
    project_entry,
)
from .tokens import Estimator

# A summary entry at the edge of the budget is still taken while the total is
# under this share of it: summaries are dense and worth the overrun.
SUMMARY_SLACK: Final = 0.9
DEFAULT_CONTEXT_WINDOW: Final = 128_000


class _Node(Protocol):
    @property
    def id(self) -> str: ...


NodeT = TypeVar("NodeT", bound=_Node)


@dataclass
class BranchCollection(Generic[NodeT]):
    entries: list[NodeT]
    common_ancestor_id: str | None


@dataclass
class BranchEntries:
    messages: list[AnyMessage] = field(default_factory=list)
    file_ops: FileOps = field(default_factory=FileOps)
    total_tokens: int = 0


def collect_entries_for_branch_summary(
    path_of: Callable[[str], Sequence[NodeT]], old_leaf_id: str | None, target_id: str
) -> BranchCollection[NodeT]:
    """``path_of(id)`` is the root-first path to an entry (of entries, or of index
    records: only ids are looked at)."""
    if old_leaf_id is None:
        return BranchCollection([], None)
    old_path = path_of(old_leaf_id)
    old_ids = {entry.id for entry in old_path}
    common: str | None = None
    for entry in reversed(path_of(target_id)):
        if entry.id in old_ids:
            common = entry.id
            break
    collected: list[NodeT] = []
    for entry in reversed(old_path):
        if entry.id == common:
            break
        collected.append(entry)
    collected.reverse()
    return BranchCollection(collected, common)


def message_for_branch(entry: Entry, edit: ContextEditEntry | None = None) -> AnyMessage | None:
    """Tool results are skipped (the tool call says enough); compactions bring their summary;
    a message or custom message under a ``context_edit`` (pi 1.6) is what the edit left."""
    if isinstance(entry, MessageEntry) and isinstance(entry.message, ToolResultMessage):
        return None
    if isinstance(entry, CompactionEntry):
        return compaction_summary_message(entry)
    if isinstance(entry, BranchSummaryEntry):
        # pi takes even an empty branch summary here (it gives the context nothing).
        return BranchSummaryMessage(
            summary=entry.summary, from_id=entry.from_id, timestamp=iso_to_ms(entry.timestamp)
        )
    if edit is not None and isinstance(entry, (MessageEntry, CustomMessageEntry)):
        messages = project_entry(entry, edit)
        return messages[0] if messages else None
    return message_of_entry(entry)


def prepare_branch_entries(
    entries: Sequence[Entry], estimator: Estimator, token_budget: int = 0
) -> BranchEntries:
    result = BranchEntries()
    for entry in entries:
        if isinstance(entry, BranchSummaryEntry) and not entry.made_by_extension:
            result.file_ops.add_details(entry.details)
    edits = latest_edits(entries)
    kept: list[AnyMessage] = []
    for entry in reversed(entries):
        message = message_for_branch(entry, edits.get(entry.id))
        if message is None:
            continue
        # File operations count even for the message that overflows the budget.
        result.file_ops.add_message(message)
        tokens = estimator.estimate(message)
        if token_budget > 0 and result.total_tokens + tokens > token_budget:
            summary_like = isinstance(entry, (CompactionEntry, BranchSummaryEntry))
            if summary_like and result.total_tokens < SUMMARY_SLACK * token_budget:
                kept.append(message)
                result.total_tokens += tokens
            break
        kept.append(message)
        result.total_tokens += tokens
    kept.reverse()
    result.messages = kept
    return result


def branch_token_budget(context_window: int | None, reserve_tokens: int) -> int:
    """pi's budget for the branch's messages: the window less the reserve.

    When the reserve does not leave any of the window (a small model's window,
    or a large ``branchSummary.reserveTokens``), pi's budget is zero or less,
    which ``prepare_branch_entries`` reads as "no limit", so the whole branch went
    to the summarizer: the reserve is then taken as half the window instead."""
    window = context_window or DEFAULT_CONTEXT_WINDOW
    budget = window - reserve_tokens
    return budget if budget > 0 else max(1, window // 2)
