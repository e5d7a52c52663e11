"""What a compaction run reports while and after it runs (pi's compaction events)."""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec

CompactionReason: TypeAlias = Literal["manual", "threshold", "overflow"]


class CompactionResult(msgspec.Struct, rename="camel", kw_only=True, omit_defaults=True):
    """pi's ``CompactionResult``: what was (or would be) written as the entry."""

    summary: str
    first_kept_entry_id: str
    tokens_before: int
    details: Any = None
    short_summary: str | None = None
    preserve_data: dict[str, Any] | None = None


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
