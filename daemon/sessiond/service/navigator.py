"""pi's navigateTree: move the leaf, optionally leaving a summary of the branch.

The summary is written at the new position (a child of the target, or of a
user message's parent), never on the abandoned branch. Everything that waits
(the ``session_before_tree`` hook, then the summary) comes before the first
write, so an abort during either returns ``{cancelled, aborted}`` at once and
writes nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

from sessiond.core.branch import (
    branch_token_budget,
    collect_entries_for_branch_summary,
    prepare_branch_entries,
)
from sessiond.core.entries import BranchSummaryEntry, CustomMessageEntry, Entry, MessageEntry
from sessiond.core.fileops import with_file_tags
from sessiond.core.messages import UserMessage, text_of_blocks
from sessiond.core.summary_prompts import (
    BRANCH_SUMMARY_MAX_TOKENS,
    branch_instructions,
    branch_preamble,
    branch_prompt,
)
from sessiond.core.tokens import Estimator
from sessiond.errors import ConflictError, NotFoundError, SessiondError
from sessiond.settings import Settings
from sessiond.store.session import SessionStore

from .hooks import Hooks, NoHooks, TreePreparation
from .summarize import SummaryContext, summarize_fitted

T = TypeVar("T")

NO_CONTENT = "No content to summarize"
NO_SUMMARY = "No summary generated"


@dataclass
class NavigationResult:
    cancelled: bool
    leaf_id: str | None
    aborted: bool = False
    editor_text: str | None = None
    summary_entry: BranchSummaryEntry | None = None


@dataclass
class BranchSummary:
    summary: str
    details: dict[str, Any]


async def generate_branch_summary(
    summaries: SummaryContext,
    entries: list[Entry],
    estimator: Estimator,
    *,
    context_window: int | None,
    reserve_tokens: int,
    custom_instructions: str | None,
    replace_instructions: bool,
) -> BranchSummary:
    """pi's generateBranchSummary: budgeted messages, the branch prompt, 2048 tokens."""
    budget = branch_token_budget(context_window, reserve_tokens)
    prepared = prepare_branch_entries(entries, estimator, budget)
    if not prepared.messages:
        return BranchSummary(NO_CONTENT, {})
    instructions = branch_instructions(custom_instructions, replace_instructions)
    text = await summarize_fitted(
        summaries,
        prepared.messages,
        lambda conversation: branch_prompt(conversation, instructions),
        max_tokens=BRANCH_SUMMARY_MAX_TOKENS,
        purpose="branch",
        reasoning=None,  # pi asks for none in a branch summary
    )
    read_files, modified_files = prepared.file_ops.lists()
    summary = with_file_tags(f"{branch_preamble()}\n\n{text}", read_files, modified_files)
    details: dict[str, Any] = {"readFiles": read_files, "modifiedFiles": modified_files}
    if summaries.completions:
        details["summarizer"] = {
            "models": sorted({c.model for c in summaries.completions}),
            "extractive": any(c.extractive for c in summaries.completions),
        }
    return BranchSummary(summary or NO_SUMMARY, details)


def editor_text_for(entry: Entry) -> str | None:
    if isinstance(entry, MessageEntry) and isinstance(entry.message, UserMessage):
        return text_of_blocks(entry.message.content)
    if isinstance(entry, CustomMessageEntry):
        return text_of_blocks(entry.content or [])
    return None


async def navigate_tree(
    store: SessionStore,
    settings: Settings,
    estimator: Estimator,
    *,
    target_id: str,
    summaries: SummaryContext | None,
    summarize: bool = False,
    custom_instructions: str | None = None,
    replace_instructions: bool = False,
    label: str | None = None,
    context_window: int | None = None,
    hooks: Hooks | None = None,
    abort: asyncio.Event | None = None,
) -> NavigationResult:
    hooks = hooks or NoHooks()
    old_leaf = store.leaf_id
    if target_id == old_leaf:
        return NavigationResult(cancelled=False, leaf_id=old_leaf)
    if summarize and summaries is None:
        raise SessiondError("No model available for summarization")
    target = store.get_entry(target_id)
    if target is None:
        raise NotFoundError(f"Entry {target_id} not found", entryId=target_id)
    collection = collect_entries_for_branch_summary(store.path_records, old_leaf, target_id)
    abandoned = [store.entry_of(record) for record in collection.entries]
    preparation = TreePreparation(
        target_id=target_id,
        old_leaf_id=old_leaf,
        common_ancestor_id=collection.common_ancestor_id,
        entries_to_summarize=abandoned,
        user_wants_summary=summarize,
        custom_instructions=custom_instructions,
        replace_instructions=replace_instructions,
        label=label,
    )
    decided = await _abortable(
        _decide(
            preparation,
            hooks,
            summaries,
            estimator,
            abandoned,
            reserve_tokens=settings.branch_summary.reserve_tokens,
            context_window=context_window,
        ),
        abort,
    )
    if decided is None:
        return NavigationResult(cancelled=True, aborted=True, leaf_id=old_leaf)
    if decided.cancelled:
        return NavigationResult(cancelled=True, leaf_id=old_leaf)
    label, summary_text = decided.label, decided.summary_text
    if store.leaf_id != old_leaf:
        raise ConflictError(
            "the session's leaf moved while the branch summary was being written; "
            "nothing was written",
            leafId=store.leaf_id,
        )
    editor_text = editor_text_for(target)
    new_leaf = target.parent_id if editor_text is not None else target_id
    summary_entry: BranchSummaryEntry | None = None
    if summary_text:
        written = store.branch_with_summary(
            new_leaf, summary_text, decided.details, from_extension=decided.from_extension
        )
        assert isinstance(written, BranchSummaryEntry)
        summary_entry = written
        if label:
            store.append_label(written.id, label)
    else:
        if new_leaf is None:
            store.reset_leaf()
        else:
            store.branch(new_leaf)
        if label:
            store.append_label(target_id, label)
    await hooks.tree_changed(
        store.leaf_id, old_leaf, summary_entry, decided.from_extension if summary_text else None
    )
    return NavigationResult(
        cancelled=False,
        leaf_id=store.leaf_id,
        editor_text=editor_text,
        summary_entry=summary_entry,
    )


@dataclass
class _Decision:
    """What the navigation writes, settled before anything is written."""

    cancelled: bool = False
    label: str | None = None
    summary_text: str | None = None
    details: Any = None
    from_extension: bool = False


async def _decide(
    preparation: TreePreparation,
    hooks: Hooks,
    summaries: SummaryContext | None,
    estimator: Estimator,
    abandoned: list[Entry],
    *,
    reserve_tokens: int,
    context_window: int | None,
) -> _Decision:
    """The waiting part of a navigation: the hook's answer, then the branch summary."""
    answer = await hooks.before_tree(preparation)
    if answer.cancel:
        return _Decision(cancelled=True)
    custom_instructions = preparation.custom_instructions
    replace_instructions = preparation.replace_instructions
    if answer.custom_instructions is not None:
        custom_instructions = answer.custom_instructions
    if answer.replace_instructions is not None:
        replace_instructions = answer.replace_instructions
    label = answer.label if answer.label is not None else preparation.label
    summarize = preparation.user_wants_summary
    if summarize and answer.summary is not None:
        return _Decision(
            label=label,
            summary_text=answer.summary.summary,
            details=answer.summary.details,
            from_extension=True,
        )
    if not (summarize and abandoned):
        return _Decision(label=label)
    assert summaries is not None
    generated = await generate_branch_summary(
        summaries,
        abandoned,
        estimator,
        context_window=context_window,
        reserve_tokens=reserve_tokens,
        custom_instructions=custom_instructions,
        replace_instructions=replace_instructions,
    )
    if answer.problems:
        generated.details["hookProblems"] = answer.problems
    return _Decision(label=label, summary_text=generated.summary, details=generated.details)


async def _abortable(work: Coroutine[Any, Any, T], abort: asyncio.Event | None) -> T | None:
    """Run ``work``; None if ``abort`` is set first. The work is cancelled then, which
    withdraws whatever it waits for: a hook request (the client gets
    ``$/cancelRequest``, as when a compaction is aborted) or a summarizer call."""
    task: asyncio.Task[T] = asyncio.ensure_future(work)
    if abort is None:
        return await task
    waiter = asyncio.ensure_future(abort.wait())
    try:
        done, _ = await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        waiter.cancel()
        raise
    if task in done and not abort.is_set():
        waiter.cancel()
        return task.result()
    # Aborted, even if the work finished meanwhile: nothing has been written yet.
    waiter.cancel()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return None
