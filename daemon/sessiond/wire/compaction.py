"""What a compaction or a branch summary produces, whoever wrote it: a summarizer or a hook."""

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
