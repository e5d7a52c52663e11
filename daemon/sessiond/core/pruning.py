"""Pre-compaction pruning of old tool outputs (oh-my-pi's pruneToolOutputs), as pi 1.6 edits.

Walking from the newest tool result back, the first 40k tokens of output are
protected; older results (except ``skill`` and ``read``, whose content the
agent relies on) become ``[Output truncated - N tokens]``, but only when that
saves at least 20k tokens.

sessiond prunes by appending pi 1.6 ``context_edit`` entries that replace each
output with the notice: nothing in the file is changed in place, the original
output stays in it, and pi 1.6 reads the edits. It looks only at the tool results
in the current context (the projection: from the latest compaction's kept region
on, edits applied); oh-my-pi walks the whole path, so outputs already summarized
away count toward the savings it subtracts from the measured context, which can
skip a compaction that is due.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Final

from .messages import ToolResultMessage
from .projected_path import ProjectedPath

PROTECT_TOKENS: Final = 40_000
MINIMUM_SAVINGS: Final = 20_000
PROTECTED_TOOLS: Final = frozenset({"skill", "read"})


def truncation_notice(tokens: int) -> str:
    return f"[Output truncated - {tokens} tokens]"


@dataclass(frozen=True)
class PruneCandidate:
    index: int
    entry_id: str
    tokens: int


@dataclass
class PrunePlan:
    candidates: list[PruneCandidate] = field(default_factory=list)
    tokens_saved: int = 0
    # The ids of the context_edit entries that applied it, once appended.
    edit_ids: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.candidates


def plan_pruning(
    view: ProjectedPath,
    *,
    protect_tokens: int = PROTECT_TOKENS,
    minimum_savings: int = MINIMUM_SAVINGS,
) -> PrunePlan:
    """Which tool results of the projected context to prune, and what that saves.

    A result an edit already changed (an earlier pruning, or the agent's own edit) is
    protected, as is one pruned by an older sessiond (``prunedAt``)."""
    accumulated = 0
    candidates: list[PruneCandidate] = []
    for index in range(len(view) - 1, -1, -1):
        if view.roles_at(index) != ("toolResult",):
            continue
        (message,) = view.messages_at(index)
        if not isinstance(message, ToolResultMessage):
            continue
        tokens = view.tokens_at(index)
        protected = (
            view.edit_at(index) is not None
            or message.pruned_at is not None
            or accumulated < protect_tokens
            or message.tool_name in PROTECTED_TOOLS
        )
        if not protected:
            candidates.append(PruneCandidate(index, view.id_at(index), tokens))
        accumulated += tokens
    # The notice is charged at four characters a token, as oh-my-pi does.
    saved = sum(
        max(0, c.tokens - math.ceil(len(truncation_notice(c.tokens)) / 4)) for c in candidates
    )
    if not candidates or saved < minimum_savings:
        return PrunePlan()
    candidates.reverse()  # oldest first, the order they appear in the file
    return PrunePlan(candidates, saved)


def pruning_edit(candidate: PruneCandidate) -> dict[str, Any]:
    """The ``context_edit`` entry (to append) that replaces a candidate's output."""
    return {
        "type": "context_edit",
        "targetId": candidate.entry_id,
        "replacement": {"content": [{"type": "text", "text": truncation_notice(candidate.tokens)}]},
    }
