"""What a compaction or a branch summary produces, whoever wrote it (a summarizer or a
hook), and what a compaction run reports while and after it runs."""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec

# "background": a summary written ahead of the threshold while the agent goes on; its
# commit is reported with the reason of the compaction that commits it.
CompactionReason: TypeAlias = Literal["manual", "threshold", "overflow", "background"]


class CompactionResult(msgspec.Struct, rename="camel", kw_only=True, omit_defaults=True):
    """pi's ``CompactionResult``: what was (or would be) written as the entry. A
    ``session_before_compact`` hook may answer with one, used as it is (as pi does)."""

    summary: str
    first_kept_entry_id: str
    tokens_before: int
    details: Any = None
    short_summary: str | None = None
    preserve_data: dict[str, Any] | None = None


class SuppliedBranchSummary(msgspec.Struct, rename="camel", kw_only=True, omit_defaults=True):
    """A branch summary a ``session_before_tree`` hook wrote instead of the summarizer."""

    summary: str
    details: Any = None


class CompactionStarted(msgspec.Struct, rename="camel", kw_only=True):
    """pi's ``compaction_start``: a compaction run began."""

    reason: CompactionReason
    # A retry of the prompt follows a successful overflow compaction.
    will_retry: bool


class CompactionEnded(msgspec.Struct, rename="camel", kw_only=True, omit_defaults=True):
    """pi's ``compaction_end``: how a compaction run ended."""

    reason: CompactionReason
    aborted: bool
    will_retry: bool
    # What was written (or, with an error, would have been).
    result: CompactionResult | None = None
    error_message: str | None = None
    # Nothing was done and nothing was wrong (nothing to compact).
    skipped: bool = False
    entry_id: str | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None
    # Skipped because automatic compaction is paused (the no-loop rule); ``error_message``
    # says what to do.
    paused: bool = False
    # The entry's summary was written in the background before this compaction started.
    prepared: bool = False
