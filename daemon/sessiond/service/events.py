"""What a compaction run reports while and after it runs (pi's compaction events)."""

from __future__ import annotations

import msgspec

from sessiond.wire.compaction import CompactionReason, CompactionResult


class CompactionStarted(msgspec.Struct, rename="camel", kw_only=True):
    reason: CompactionReason
    # A retry of the prompt follows a successful overflow compaction.
    will_retry: bool = False


class CompactionEnded(msgspec.Struct, rename="camel", kw_only=True, omit_defaults=True):
    reason: CompactionReason
    aborted: bool
    will_retry: bool
    result: CompactionResult | None = None
    error_message: str | None = None
    # Nothing was done and nothing was wrong (nothing to compact).
    skipped: bool = False
    entry_id: str | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None
    # Skipped because automatic compaction is paused (the no-loop rule).
    paused: bool = False
    # The entry's summary was written in the background before this compaction.
    prepared: bool = False
