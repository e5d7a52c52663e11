"""What the daemon asks its clients (hooks and ``llm/complete``), and their answers."""

from __future__ import annotations

from typing import Any

import msgspec

from sessiond.wire.compaction import CompactionResult, SuppliedBranchSummary
from sessiond.wire.completion import Purpose, ReasoningLevel

from .entry_types import BranchSummaryEntryJson, CompactionEntryJson, StoredMessageJson
from .types import WIRE_OPTIONS, CompactionPreparationWire


class BeforeCompactHookParams(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str
    preparation: CompactionPreparationWire
    custom_instructions: str | None = None


class BeforeCompactHookResult(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    cancel: bool = False
    compaction: CompactionResult | None = None


class CompactingHookParams(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str
    messages: list[StoredMessageJson]


class CompactingHookResult(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    prompt: str | None = None
    context: list[str] | None = None
    preserve_data: dict[str, Any] | None = None


class CompactHookParams(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str
    compaction_entry: CompactionEntryJson
    from_extension: bool


class BeforeTreeHookParams(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str
    target_id: str
    old_leaf_id: str | None
    common_ancestor_id: str | None
    entry_ids_to_summarize: list[str]
    user_wants_summary: bool
    custom_instructions: str | None = None
    replace_instructions: bool = False
    label: str | None = None


class BeforeTreeHookResult(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    cancel: bool = False
    summary: SuppliedBranchSummary | None = None
    custom_instructions: str | None = None
    replace_instructions: bool | None = None
    label: str | None = None


class TreeHookParams(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str
    new_leaf_id: str | None
    old_leaf_id: str | None
    summary_entry: BranchSummaryEntryJson | None = None
    from_extension: bool | None = None


class LlmCompleteParams(msgspec.Struct, kw_only=True, rename="camel"):
    """``llm/complete``: every field is always sent."""

    system_prompt: str
    prompt: str
    max_tokens: int
    # The caller wants extended reasoning (at ``reasoningLevel``, "high" when null).
    reasoning: bool
    purpose: Purpose
    # The session's thinking level; null when ``reasoning`` is false.
    reasoning_level: ReasoningLevel | None


class LlmCompleteResult(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    text: str
