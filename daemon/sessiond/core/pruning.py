"""Pre-compaction pruning of old tool outputs (oh-my-pi's pruneToolOutputs).

Walking from the newest tool result back, the first 40k tokens of output are
protected; older results (except ``skill`` and ``read``, whose content the
agent relies on) become ``[Output truncated - N tokens]`` — but only when that
saves at least 20k tokens, so the session file is not rewritten for little.

sessiond looks only at the tool results in the current context (from the
latest compaction's kept region on). oh-my-pi walks the whole path, so outputs
already summarized away count toward the savings it subtracts from the
measured context, which can skip a compaction that is due.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Final

from .entries import MessageEntry
from .messages import ToolResultMessage
from .path_view import PathView

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

    @property
    def empty(self) -> bool:
        return not self.candidates


def plan_pruning(
    path: PathView,
    start: int = 0,
    *,
    protect_tokens: int = PROTECT_TOKENS,
    minimum_savings: int = MINIMUM_SAVINGS,
) -> PrunePlan:
    """Which tool results in ``path[start:]`` to prune, and what that saves."""
    accumulated = 0
    candidates: list[PruneCandidate] = []
    for index in range(len(path) - 1, start - 1, -1):
        if path.type_at(index) != "message" or path.role_at(index) != "toolResult":
            continue
        entry = path.entry_at(index)
        if not isinstance(entry, MessageEntry) or not isinstance(entry.message, ToolResultMessage):
            continue
        tokens = path.tokens_at(index)
        protected = (
            entry.message.pruned_at is not None
            or accumulated < protect_tokens
            or entry.message.tool_name in PROTECTED_TOOLS
        )
        if not protected:
            candidates.append(PruneCandidate(index, entry.id, tokens))
        accumulated += tokens
    # The notice is charged at four characters a token, as oh-my-pi does.
    saved = sum(
        max(0, c.tokens - math.ceil(len(truncation_notice(c.tokens)) / 4)) for c in candidates
    )
    if not candidates or saved < minimum_savings:
        return PrunePlan()
    candidates.reverse()  # oldest first, the order they appear in the file
    return PrunePlan(candidates, saved)


def pruned_line_data(data: dict[str, Any], tokens: int, pruned_at: int) -> dict[str, Any]:
    """A tool-result entry (as decoded JSON) with its output replaced by the notice.

    Works on the JSON object so every other field, known or not, is kept."""
    message = dict(data["message"])
    message["content"] = [{"type": "text", "text": truncation_notice(tokens)}]
    message["prunedAt"] = pruned_at
    return {**data, "message": message}
