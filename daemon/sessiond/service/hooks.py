"""The hook points of compaction and tree navigation (pi's extension events), as an interface.

The daemon implements it by asking the clients that declared each hook; the
library and the CLI use ``NoHooks``. Hook results are plain values; a hook
that fails, times out or is disconnected counts as no answer, and what went
wrong is reported back in ``problems`` so it can be recorded in the entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from sessiond.core.entries import BranchSummaryEntry, CompactionEntry, Entry
from sessiond.core.preparation import CompactionPreparation
from sessiond.wire.compaction import CompactionResult, SuppliedBranchSummary

# The root-to-leaf entries, built only if a hook listener wants them (it can be
# the whole session).
BranchLoader = Callable[[], list[Entry]]


@dataclass
class BeforeCompactAnswer:
    cancel: bool = False
    # A complete compaction from a hook, used as it is (no validation, as pi).
    compaction: CompactionResult | None = None
    # Who answered with it, as problems name a client: "vscode (connection 2)".
    supplied_by: str = "a hook"
    problems: list[str] = field(default_factory=list)


@dataclass
class CompactingAnswer:
    prompt: str | None = None
    context: list[str] = field(default_factory=list)
    preserve_data: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)


@dataclass
class TreePreparation:
    target_id: str
    old_leaf_id: str | None
    common_ancestor_id: str | None
    entries_to_summarize: list[Entry]
    user_wants_summary: bool
    custom_instructions: str | None = None
    replace_instructions: bool = False
    label: str | None = None


@dataclass
class BeforeTreeAnswer:
    cancel: bool = False
    summary: SuppliedBranchSummary | None = None
    # pi lets the hook override these three
    custom_instructions: str | None = None
    replace_instructions: bool | None = None
    label: str | None = None
    problems: list[str] = field(default_factory=list)


class Hooks(Protocol):
    async def before_compact(
        self,
        preparation: CompactionPreparation,
        branch_entries: BranchLoader,
        custom_instructions: str | None,
    ) -> BeforeCompactAnswer: ...

    async def compacting(self, preparation: CompactionPreparation) -> CompactingAnswer: ...

    async def compacted(self, entry: CompactionEntry, from_extension: bool) -> None: ...

    def answer_ignored(self, problem: str) -> None:
        """A hook's answer was set aside by the run's own rule (it is also recorded in
        the entry's ``details.hookProblems``): tell whoever listens."""

    async def before_tree(self, preparation: TreePreparation) -> BeforeTreeAnswer: ...

    async def tree_changed(
        self,
        new_leaf_id: str | None,
        old_leaf_id: str | None,
        summary_entry: BranchSummaryEntry | None,
        from_extension: bool | None,
    ) -> None: ...


class NoHooks:
    """No client is listening: every hook answers nothing."""

    async def before_compact(
        self,
        preparation: CompactionPreparation,
        branch_entries: BranchLoader,
        custom_instructions: str | None,
    ) -> BeforeCompactAnswer:
        return BeforeCompactAnswer()

    async def compacting(self, preparation: CompactionPreparation) -> CompactingAnswer:
        return CompactingAnswer()

    async def compacted(self, entry: CompactionEntry, from_extension: bool) -> None:
        return None

    def answer_ignored(self, problem: str) -> None:
        return None

    async def before_tree(self, preparation: TreePreparation) -> BeforeTreeAnswer:
        return BeforeTreeAnswer()

    async def tree_changed(
        self,
        new_leaf_id: str | None,
        old_leaf_id: str | None,
        summary_entry: BranchSummaryEntry | None,
        from_extension: bool | None,
    ) -> None:
        return None
