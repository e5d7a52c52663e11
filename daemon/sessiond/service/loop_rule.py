"""The no-loop rule: a compaction that left the context over the threshold pauses automatic ones.

When the part a compaction keeps is already over the threshold (a window too small for
``keepRecentTokens``), every later turn is over the threshold too, and compacting again
would pay for a summary each turn and free next to nothing. The daemon remembers how
large the context was right after each compaction it wrote; while the context's newest
compaction is one that left it over the threshold now in force, and ``keepRecentTokens``
has not been lowered since, ``agent/turnEnded`` does not compact (``skipped``, with
what to do about it). A new compaction (manual), another branch, a larger window or a
lower ``keepRecentTokens`` lift the pause.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# Compactions remembered per session (the newest ones; a pause concerns the newest).
_REMEMBERED: Final = 16


@dataclass
class _Left:
    tokens_after: int
    keep_recent_tokens: int
    announced: bool = False


@dataclass
class Pause:
    message: str
    # True the first time this pause is reported (the event is sent once).
    first: bool


def pause_message(tokens_after: int, threshold: int) -> str:
    return (
        f"Automatic compaction paused: the last compaction left {tokens_after} tokens in "
        f"the context, over the threshold of {threshold}, so another one would free too "
        "little. Use a model with a larger context window, lower "
        "compaction.keepRecentTokens, or compact manually (compaction/run)."
    )


class CompactionsLeft:
    """The context's size right after each of the session's recent compactions."""

    def __init__(self) -> None:
        self._left: dict[str, _Left] = {}

    @property
    def empty(self) -> bool:
        """No compaction remembered: nothing can be paused (and nothing needs looking up)."""
        return not self._left

    def record(self, entry_id: str, tokens_after: int, keep_recent_tokens: int) -> None:
        self._left[entry_id] = _Left(tokens_after, keep_recent_tokens)
        while len(self._left) > _REMEMBERED:
            del self._left[next(iter(self._left))]

    def pause(
        self, compaction_id: str | None, threshold: int, keep_recent_tokens: int
    ) -> Pause | None:
        """Whether automatic compaction is paused, the context's newest compaction being
        ``compaction_id``. Nothing is changed: ``announced`` records the report."""
        left = self._left.get(compaction_id) if compaction_id is not None else None
        if left is None or left.tokens_after <= threshold:
            return None
        if keep_recent_tokens < left.keep_recent_tokens:
            return None
        return Pause(pause_message(left.tokens_after, threshold), not left.announced)

    def announced(self, compaction_id: str) -> None:
        """The pause this compaction caused was reported (its event is sent once)."""
        left = self._left.get(compaction_id)
        if left is not None:
            left.announced = True
