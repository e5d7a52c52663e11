"""A compaction run: prepare, ask the hooks, summarize, write the entry (pi's ``compact``).

Nothing is written until the summary is complete: a failure, a cancellation
or an abort leaves the file and the leaf exactly as they were. The entry is
fsynced before the run returns. Entries appended while the summary was being
written are kept (they follow the cut); if the leaf moved to another branch
meanwhile, the run is refused rather than grafted onto the wrong branch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

from sessiond.core.dialect import CompactionFields
from sessiond.core.entries import CompactionEntry
from sessiond.core.fileops import with_file_tags
from sessiond.core.preparation import (
    ALREADY_COMPACTED,
    CompactionPreparation,
    NotCompactable,
    prepare_compaction,
)
from sessiond.core.summary_prompts import (
    NO_PRIOR_HISTORY,
    SPLIT_TURN_SEPARATOR,
    history_max_tokens,
    short_summary_max_tokens,
    short_summary_prompt,
    turn_prefix_max_tokens,
    turn_prefix_prompt,
)
from sessiond.core.tokens import Estimator
from sessiond.errors import (
    AlreadyCompactedError,
    ConflictError,
    NothingToCompactError,
    OperationCancelledError,
    SessiondError,
    SummarizerError,
)
from sessiond.settings import CompactionSettings
from sessiond.store.path_access import StorePath
from sessiond.store.session import SessionStore
from sessiond.wire.compaction import CompactionReason, CompactionResult

from .hooks import CompactingAnswer, Hooks, NoHooks
from .summarize import SummaryContext, reasoning_for, summarize_fitted, summarize_history

if TYPE_CHECKING:
    from sessiond.llm.base import Completion

COMPACTION_CANCELLED = "Compaction cancelled"
REVIEWED_SUMMARY_KEPT = (
    "hooks/session_before_compact returned a compaction; the reviewed summary was kept instead"
)
# oh-my-pi's native remote compaction state; stale once a local compaction runs.
_REMOTE_STATE_KEY = "openaiRemoteCompaction"


@dataclass
class PreparedSummary:
    """A summary written before its commit (background compaction): what it covers,
    what it says, and the leaf it was prepared at."""

    preparation: CompactionPreparation
    result: CompactionResult
    prepared_leaf: str | None
    # What ``session.compacting`` reported while it was written.
    problems: list[str] = field(default_factory=list)
    completions: list[Completion] = field(default_factory=list)


@dataclass
class CompactionOutcome:
    entry: CompactionEntry
    result: CompactionResult
    from_extension: bool
    tokens_after: int
    preparation: CompactionPreparation | None = None
    completions: list[Completion] = field(default_factory=list)


def prepare(
    store: SessionStore, settings: CompactionSettings, estimator: Estimator
) -> CompactionPreparation | NotCompactable:
    """The preparation for the current leaf (a dry run: no model, no write)."""
    path = StorePath(store, store.path_records(), estimator)
    tokens_before = store.leaf_view.estimate_context(estimator).tokens
    window = store.dialect.compaction_path(path)
    return prepare_compaction(window, settings, tokens_before=tokens_before, estimator=estimator)


def raise_not_compactable(result: NotCompactable) -> None:
    if result.reason == ALREADY_COMPACTED:
        raise AlreadyCompactedError(result.reason)
    raise NothingToCompactError(result.reason)


class Compactor:
    def __init__(
        self,
        store: SessionStore,
        settings: CompactionSettings,
        estimator: Estimator,
        hooks: Hooks | None = None,
        *,
        now_ms: Callable[[], int] | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.estimator = estimator
        self.hooks = hooks or NoHooks()
        self._now_ms = now_ms

    def prepare(self) -> CompactionPreparation | NotCompactable:
        return prepare(self.store, self.settings, self.estimator)

    async def write_ahead(
        self, preparation: CompactionPreparation, summaries: SummaryContext
    ) -> PreparedSummary:
        """The summary of ``preparation``, written now and committed later (``run`` with
        ``ready``): ``session.compacting`` is asked here, ``session_before_compact`` at
        the commit, where it still sees, cancels or replaces what is written."""
        prepared_leaf = self.store.leaf_id
        compacting = await self.hooks.compacting(preparation)
        # Nobody waits for this summary: the short summary reads the finished one.
        result = await self._summarize(
            preparation, summaries, compacting, None, None, short_alongside=False
        )
        return PreparedSummary(
            preparation=preparation,
            result=result,
            prepared_leaf=prepared_leaf,
            problems=list(compacting.problems),
            completions=list(summaries.completions),
        )

    async def run(
        self,
        summaries: SummaryContext,
        *,
        reason: CompactionReason = "manual",
        custom_instructions: str | None = None,
        supplied_summary: str | None = None,
        expected_first_kept_id: str | None = None,
        ready: PreparedSummary | None = None,
    ) -> CompactionOutcome:
        """Compact the current leaf's path. Raises pi's errors (``Already compacted``,
        ``Nothing to compact (session too small)``, ``Compaction cancelled``,
        ``Summarization failed: ...``) as ``SessiondError`` subclasses.

        With ``ready``, its summary is committed instead of a new one: the range it
        summarized is kept, and what was appended since it was prepared stays in the
        kept part (the caller has checked that it is still valid)."""
        if ready is not None:
            preparation = ready.preparation
            prepared_leaf = ready.prepared_leaf
        else:
            found = self.prepare()
            if isinstance(found, NotCompactable):
                raise_not_compactable(found)
            assert isinstance(found, CompactionPreparation)
            preparation = found
            prepared_leaf = self.store.leaf_id
        if expected_first_kept_id is not None and (
            expected_first_kept_id != preparation.first_kept_entry_id
        ):
            raise ConflictError(
                f"the session changed since the preparation: the cut is now at "
                f"{preparation.first_kept_entry_id}, not {expected_first_kept_id}",
                firstKeptEntryId=preparation.first_kept_entry_id,
            )
        problems: list[str] = []
        answer = await self.hooks.before_compact(
            preparation, self.store.get_branch, custom_instructions
        )
        problems += answer.problems
        if answer.cancel:
            raise OperationCancelledError(COMPACTION_CANCELLED)
        if answer.compaction is not None and supplied_summary is not None:
            # The user reviewed this text: a hook may veto it, not replace it.
            problem = f"{answer.supplied_by}: {REVIEWED_SUMMARY_KEPT}"
            problems.append(problem)
            self.hooks.answer_ignored(problem)
            answer.compaction = None
        from_extension = answer.compaction is not None
        completions = list(summaries.completions)
        if answer.compaction is not None:
            result = answer.compaction
        elif ready is not None:
            completions = list(ready.completions)
            # The size now, as a compaction started here would record it.
            tokens_before = self.store.leaf_view.estimate_context(self.estimator).tokens
            result = msgspec.structs.replace(ready.result, tokens_before=tokens_before)
            result.details = self._details(
                preparation, completions, problems + ready.problems, supplied=False
            )
        else:
            compacting = await self.hooks.compacting(preparation)
            problems += compacting.problems
            result = await self._summarize(
                preparation,
                summaries,
                compacting,
                custom_instructions,
                supplied_summary,
                short_alongside=True,
            )
            completions = list(summaries.completions)
            result.details = self._details(
                preparation, completions, problems, supplied=supplied_summary is not None
            )
        entry = self._commit(result, prepared_leaf, from_extension)
        await self.hooks.compacted(entry, from_extension)
        tokens_after = self.store.leaf_view.estimate_context(self.estimator).tokens
        return CompactionOutcome(
            entry=entry,
            result=result,
            from_extension=from_extension,
            tokens_after=tokens_after,
            preparation=preparation,
            completions=completions,
        )

    async def _summarize(
        self,
        preparation: CompactionPreparation,
        summaries: SummaryContext,
        compacting: CompactingAnswer,
        custom_instructions: str | None,
        supplied_summary: str | None,
        *,
        short_alongside: bool,
    ) -> CompactionResult:
        """The entry's texts. With ``short_alongside`` the short summary is asked at the
        same time as the history summary (given the previous summary rather than the new
        one), so that whoever waits pays for one request's time, not two in sequence."""
        reserve = self.settings.reserve_tokens
        # pi (0.73.1 and 1.6) asks the summarizer to reason at the session's thinking level.
        reasoning = reasoning_for(self.store.leaf_view.thinking_level)
        wants_short = self.settings.short_summary and supplied_summary is None

        def short(merged: str | None) -> Awaitable[str]:
            return _failing_as(
                "Short summary failed",
                summarize_fitted(
                    summaries,
                    preparation.recent_messages,
                    lambda conversation: short_summary_prompt(
                        conversation, merged, compacting.context
                    ),
                    max_tokens=short_summary_max_tokens(reserve),
                    purpose="short",
                    reasoning=reasoning,
                ),
            )

        short_summary: str | None = None
        if supplied_summary is not None:
            summary = supplied_summary
        else:

            async def history() -> str:
                if not preparation.messages_to_summarize:
                    # sessiond keeps the previous summary; pi writes "No prior history.".
                    return preparation.previous_summary or NO_PRIOR_HISTORY
                return await _failing_as(
                    "Summarization failed",
                    summarize_history(
                        summaries,
                        preparation.messages_to_summarize,
                        preparation.previous_summary,
                        max_tokens=history_max_tokens(reserve),
                        extra_context=compacting.context,
                        custom_instructions=custom_instructions,
                        prompt_override=compacting.prompt,
                        reasoning=reasoning,
                    ),
                )

            works: list[Awaitable[str]] = [history()]
            split = preparation.is_split_turn and bool(preparation.turn_prefix_messages)
            if split:
                works.append(
                    _failing_as(
                        "Turn prefix summarization failed",
                        summarize_fitted(
                            summaries,
                            preparation.turn_prefix_messages,
                            lambda conversation: turn_prefix_prompt(
                                conversation, custom_instructions
                            ),
                            max_tokens=turn_prefix_max_tokens(reserve),
                            purpose="turnPrefix",
                            reasoning=reasoning,
                        ),
                    )
                )
            if wants_short and short_alongside:
                works.append(short(preparation.previous_summary))
            texts = await _in_order(works)
            summary = texts[0] + (SPLIT_TURN_SEPARATOR + texts[1] if split else "")
            if wants_short and short_alongside:
                short_summary = texts[-1]
        if wants_short and short_summary is None:
            short_summary = await short(summary)
        read_files, modified_files = preparation.file_ops.lists()
        carried = dict(preparation.previous_preserve_data or {})
        carried.pop(_REMOTE_STATE_KEY, None)
        preserve = {**(compacting.preserve_data or {}), **carried}
        return CompactionResult(
            summary=with_file_tags(summary, read_files, modified_files),
            first_kept_entry_id=preparation.first_kept_entry_id,
            tokens_before=preparation.tokens_before,
            short_summary=short_summary,
            preserve_data=preserve or None,
        )

    def _details(
        self,
        preparation: CompactionPreparation,
        completions: list[Completion],
        problems: list[str],
        *,
        supplied: bool,
    ) -> dict[str, Any]:
        read_files, modified_files = preparation.file_ops.lists()
        details: dict[str, Any] = {"readFiles": read_files, "modifiedFiles": modified_files}
        if supplied:
            details["summarizer"] = {"kind": "supplied"}
        elif completions:
            details["summarizer"] = _summarizer_details(completions)
        if problems:
            details["hookProblems"] = problems
        return details

    def _commit(
        self, result: CompactionResult, prepared_leaf: str | None, from_extension: bool
    ) -> CompactionEntry:
        self._check_leaf(prepared_leaf)
        dialect = self.store.dialect
        system = self.store.leaf_view.current_system_message()
        fields = CompactionFields(
            summary=result.summary,
            first_kept_entry_id=result.first_kept_entry_id,
            tokens_before=result.tokens_before,
            details=result.details,
            from_extension=from_extension,
            short_summary=result.short_summary,
            preserve_data=result.preserve_data,
            # pi 1.6's checkpoint: the compacted context starts with the replayed system
            # prompt and tools. Its timestamp is left for the store: the entry's time.
            system_message=msgspec.to_builtins(msgspec.structs.replace(system, timestamp=None))
            if system is not None
            else None,
        )
        tokens_after = None
        if dialect.records_tokens_after:
            tokens_after = self.store.estimate_after(
                dialect.compaction_body(fields), self.estimator
            )
        body = dialect.compaction_body(fields, tokens_after)
        entry = self.store.append(body)
        assert isinstance(entry, CompactionEntry)
        return entry

    def _check_leaf(self, prepared_leaf: str | None) -> None:
        """Entries appended since the preparation are fine; another branch is not."""
        current = self.store.leaf_id
        if current == prepared_leaf:
            return
        if (
            prepared_leaf is not None
            and current is not None
            and any(r.id == prepared_leaf for r in self.store.path_records())
        ):
            return
        raise ConflictError(
            "the session's leaf moved to another branch while the summary was being "
            "written; nothing was written",
            leafId=current,
            expectedLeafId=prepared_leaf,
        )


async def _failing_as(prefix: str, work: Awaitable[str]) -> str:
    """Run a summary call; a summarizer failure becomes pi's ``<prefix>: <error>``.

    No candidate with usable credentials is not a failed call: pi reports its
    credentials error as it is."""
    try:
        return await work
    except asyncio.CancelledError:
        raise
    except SessiondError as exc:
        if isinstance(exc, OperationCancelledError):
            raise
        if exc.details.get("errorKind") == "auth":
            raise SummarizerError(exc.message, **exc.details) from None
        raise SummarizerError(
            f"{prefix}: {exc.message or 'Unknown error'}", **exc.details
        ) from None


async def _in_order(works: list[Awaitable[str]]) -> list[str]:
    """Run summary calls at once; their texts in the order given.

    The failure reported does not depend on which of several failing calls answers
    first: the first failing one in the order given is reported (the history summary
    before the turn prefix before the short summary) and the others are cancelled (pi's
    ``Promise.all`` reports whichever rejects first)."""
    tasks = [asyncio.ensure_future(work) for work in works]
    try:
        return [await task for task in tasks]
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def _summarizer_details(completions: list[Completion]) -> dict[str, Any]:
    models = sorted({c.model for c in completions})
    details: dict[str, Any] = {
        "models": models,
        "calls": len(completions),
        "extractive": any(c.extractive for c in completions),
    }
    reasons = [c.fallback_reason for c in completions if c.fallback_reason]
    if reasons:
        details["fallbackReason"] = reasons[0]
    attempts = [a for c in completions for a in c.attempts if a.outcome != "ok"]
    if attempts:
        details["failedAttempts"] = msgspec.to_builtins(attempts)
    return details
