"""The compaction runner (pi's ``compact`` and its hooks) against real summarizers."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from sessiond.core.entries import CompactionEntry
from sessiond.core.messages import CompactionSummaryMessage
from sessiond.core.preparation import CompactionPreparation
from sessiond.errors import (
    AlreadyCompactedError,
    ConflictError,
    NothingToCompactError,
    OperationCancelledError,
    SummarizerError,
)
from sessiond.llm.base import Completion
from sessiond.service.compactor import Compactor
from sessiond.service.hooks import (
    BeforeCompactAnswer,
    CompactingAnswer,
    NoHooks,
)
from sessiond.service.navigator import navigate_tree
from sessiond.service.runs import run_compaction
from sessiond.service.summarize import SummaryContext
from sessiond.service.summarizer_setup import summary_context
from sessiond.settings import Settings
from sessiond.store.session import SessionStore
from sessiond.wire.compaction import CompactionEnded, CompactionResult, CompactionStarted

from ..fake_provider import Answer, FakeProvider, default_answer, purpose_of
from ..store.helpers import assistant, user
from .helpers import CHARS, long_session, settings_with


def compactor(store, settings, hooks=None):
    return Compactor(store, settings.compaction, CHARS, hooks)


def offline():
    return settings_with(compaction={"keepRecentTokens": 2000, "tokenEstimator": "chars"})


def with_provider(provider: FakeProvider, **compaction):
    return settings_with(
        compaction={"keepRecentTokens": 2000, "tokenEstimator": "chars", **compaction},
        summarizer={"candidates": [provider.candidate()], "extractiveFallback": False},
        retry={"enabled": False},
    )


async def test_manual_compaction_with_the_offline_summarizer(tmp_path: Path):
    settings = offline()
    with long_session(tmp_path) as store:
        before = store.entry_count
        outcome = await compactor(store, settings).run(summary_context(settings, mode="manual"))
        entry = outcome.entry
        assert isinstance(entry, CompactionEntry) and store.leaf_id == entry.id
        assert store.entry_count == before + 1
        assert not store.needs_sync  # compaction entries are fsynced before returning
        assert "## Goal" in entry.summary and entry.short_summary
        assert entry.from_hook is False and not entry.made_by_extension
        assert entry.details["summarizer"]["extractive"] is True
        assert (
            "<modified-files>" in entry.summary and "src/out0.py" in entry.details["modifiedFiles"]
        )
        assert entry.tokens_before > 0 and outcome.tokens_after < entry.tokens_before
        context = store.build_context()
        assert isinstance(context.messages[0], CompactionSummaryMessage)
        assert context.entry_ids[1] == entry.first_kept_entry_id
    with SessionStore.open(store.path, readonly=True) as reopened:
        assert reopened.get_entry(entry.id) == entry


async def test_already_compacted_and_too_small(tmp_path: Path):
    settings = offline()
    with long_session(tmp_path) as store:
        run = compactor(store, settings)
        await run.run(summary_context(settings, mode="manual"))
        with pytest.raises(AlreadyCompactedError, match="^Already compacted$"):
            await run.run(summary_context(settings, mode="manual"))
    with SessionStore.create("/p", session_dir=tmp_path / "small") as small:
        small.append(user("hi"))
        small.append(assistant("hello"))
        with pytest.raises(
            NothingToCompactError, match=r"^Nothing to compact \(session too small\)$"
        ):
            await compactor(small, settings).run(summary_context(settings, mode="manual"))


async def test_requests_carry_the_conversation_and_prompts(tmp_path: Path, provider: FakeProvider):
    settings = with_provider(provider)
    with long_session(tmp_path) as store:
        outcome = await compactor(store, settings).run(
            summary_context(settings, mode="manual"), custom_instructions="focus on the tests"
        )
    by_purpose = {
        purpose: request for purpose, request in zip(provider.purposes(), provider.requests)
    }
    # The short summary is asked alongside the history summary, not after it.
    assert set(by_purpose) <= {"history", "turnPrefix", "short"} and "short" in by_purpose
    assert "<previous-summary>" not in by_purpose["short"]["messages"][1]["content"]
    history = by_purpose["history"]
    assert history["messages"][0]["role"] == "system"
    prompt = history["messages"][1]["content"]
    assert prompt.startswith("<conversation>\n[User]: request 0")
    assert '[Assistant tool calls]: read(path="src/file0.py"); edit(path="src/out0.py")' in prompt
    assert prompt.rstrip().endswith("Additional focus: focus on the tests")
    assert history["max_tokens"] == int(0.8 * 16384) or history.get("max_completion_tokens") == int(
        0.8 * 16384
    )
    assert outcome.entry.short_summary.startswith("## Goal\nshort summary")
    calls = len(provider.requests)
    assert outcome.entry.details["summarizer"] == {
        "models": ["openai/fake-model"],
        "calls": calls,
        "extractive": False,
    }


async def test_second_compaction_updates_the_previous_summary(
    tmp_path: Path, provider: FakeProvider
):
    settings = with_provider(provider)
    with long_session(tmp_path) as store:
        first = await compactor(store, settings).run(summary_context(settings, mode="manual"))
        for turn in range(6):
            store.append(user(f"more work {turn} " + "z" * 3000))
            store.append(assistant("ok " + "w" * 3000, input=40_000 + turn))
        await compactor(store, settings).run(summary_context(settings, mode="manual"))
    updates = [
        p for purpose, p in zip(provider.purposes(), provider.prompts()) if purpose == "update"
    ]
    assert len(updates) == 1
    assert "<previous-summary>\n" + first.entry.summary.split("\n\n<read-files>")[0] in updates[0]


async def test_split_turn_runs_both_summaries_and_keeps_previous_summary(
    tmp_path: Path, provider: FakeProvider
):
    settings = with_provider(provider, keepRecentTokens=800)
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        store.append(user("old question " + "q" * 4000))
        store.append(assistant("old answer " + "a" * 4000))
        store.append(
            {
                "type": "compaction",
                "summary": "EARLIER SUMMARY",
                "firstKeptEntryId": store.records()[-1].id,
                "tokensBefore": 5,
            }
        )
        store.append(user("one long turn"))
        for step in range(4):
            store.append(assistant(f"step {step} " + "s" * 2000, input=50_000 + step))
        preparation = compactor(store, settings).prepare()
        assert isinstance(preparation, CompactionPreparation) and preparation.is_split_turn
        outcome = await compactor(store, settings).run(
            summary_context(settings, mode="manual"), custom_instructions="the parser"
        )
    summary = outcome.entry.summary
    assert "\n\n---\n\n**Turn Context (split turn):**\n\n" in summary
    # pi 1.6 gives the run's focus to the turn prefix too
    prompts = dict(zip(provider.purposes(), provider.prompts()))
    assert prompts["turnPrefix"].endswith("\n\nAdditional focus: the parser")
    assert sorted(provider.purposes()) in (
        ["short", "turnPrefix", "update"],
        ["history", "short", "turnPrefix"],
    )


def _split_turn_session(store: SessionStore) -> None:
    store.append(user("old question " + "q" * 4000))
    store.append(assistant("old answer " + "a" * 4000))
    store.append(user("one long turn"))
    for step in range(4):
        store.append(assistant(f"step {step} " + "s" * 2000, input=50_000 + step))


@pytest.mark.parametrize("history_fails", [True, False])
async def test_a_split_turn_failure_does_not_depend_on_which_call_answers_first(
    tmp_path: Path, history_fails: bool
):
    """The turn-prefix call fails at once, the history call later: the history's failure
    is the one reported when it fails too, the prefix's only when the history succeeded."""
    settings = settings_with(
        compaction={"keepRecentTokens": 800, "tokenEstimator": "chars", "shortSummary": False}
    )
    finished: list[str] = []

    async def complete(request, progress):
        if request.purpose == "turnPrefix":
            finished.append("turnPrefix")
            raise SummarizerError("prefix model down")
        await asyncio.sleep(0.05)
        finished.append(request.purpose)
        if history_fails:
            raise SummarizerError("history model down")
        return Completion(text="## Goal\nhistory", model="test/model")

    with SessionStore.create("/p", session_dir=tmp_path) as store:
        _split_turn_session(store)
        prep = compactor(store, settings).prepare()
        assert isinstance(prep, CompactionPreparation) and prep.is_split_turn
        assert prep.messages_to_summarize
        context = SummaryContext(complete=complete, count_tokens=len)
        with pytest.raises(SummarizerError) as info:
            await compactor(store, settings).run(context)
    assert finished == ["turnPrefix", "history"]  # the prefix failed first
    expected = (
        "Summarization failed: history model down"
        if history_fails
        else "Turn prefix summarization failed: prefix model down"
    )
    assert info.value.message == expected


async def test_split_turn_without_history_keeps_the_previous_summary(
    tmp_path: Path, provider: FakeProvider
):
    settings = with_provider(provider, keepRecentTokens=800)
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        store.append(user("only " + "q" * 400))
        store.append(
            {
                "type": "compaction",
                "summary": "EARLIER SUMMARY",
                "firstKeptEntryId": store.records()[-1].id,
                "tokensBefore": 5,
            }
        )
        store.append(user("the long turn"))
        for step in range(4):
            store.append(assistant(f"step {step} " + "s" * 2000))
        prep = compactor(store, settings).prepare()
        assert isinstance(prep, CompactionPreparation)
        assert (prep.is_split_turn and prep.messages_to_summarize == []) or prep.summarize_entry_ids
        outcome = await compactor(store, settings).run(summary_context(settings, mode="manual"))
    if prep.messages_to_summarize == []:
        # pi would write "No prior history." here and lose the earlier summary
        assert outcome.entry.summary.startswith(
            "EARLIER SUMMARY\n\n---\n\n**Turn Context (split turn):**"
        )


async def test_failure_writes_nothing(tmp_path: Path, provider: FakeProvider):
    settings = with_provider(provider)
    provider.responder = lambda body: Answer(status=500, error="upstream exploded")
    with long_session(tmp_path) as store:
        leaf, size = store.leaf_id, store.path.stat().st_size
        with pytest.raises(SummarizerError) as info:
            await compactor(store, settings).run(summary_context(settings, mode="manual"))
        # pi's string; with a split turn too, the history summary's failure is the one told
        assert info.value.message.startswith("Summarization failed: ")
        assert "upstream exploded" in info.value.message
        assert store.leaf_id == leaf and store.path.stat().st_size == size


def _fallback_on(provider: FakeProvider, **candidate) -> Settings:
    """The one candidate, with the extractive fallback left on (the default)."""
    return settings_with(
        compaction={"keepRecentTokens": 2000, "tokenEstimator": "chars", "shortSummary": False},
        summarizer={"candidates": [provider.candidate(**candidate)]},
    )


@pytest.mark.parametrize("failure", ["401", "no key"])
async def test_manual_run_without_credentials_fails_and_writes_nothing(
    tmp_path: Path, provider: FakeProvider, failure: str, monkeypatch: pytest.MonkeyPatch
):
    """pi's manual path: no usable credentials is pi's credentials error, never an
    offline summary written in the model's place."""
    monkeypatch.delenv("SESSIOND_TEST_MISSING_KEY", raising=False)
    if failure == "401":
        settings = _fallback_on(provider)
        provider.responder = lambda body: Answer(status=401, error="invalid x-api-key")
    else:
        settings = _fallback_on(provider, apiKeyEnv="SESSIOND_TEST_MISSING_KEY")
    with long_session(tmp_path) as store:
        leaf, size = store.leaf_id, store.path.stat().st_size
        with pytest.raises(SummarizerError) as info:
            await compactor(store, settings).run(summary_context(settings, mode="manual"))
        assert info.value.code == -32015 and info.value.kind == "summarizerFailed"
        assert info.value.message.startswith(
            "Compaction requires usable credentials for openai/fake-model. "
        )
        assert info.value.details["errorKind"] == "auth"
        assert [a["outcome"] for a in info.value.details["attempts"]] == (
            ["error"] if failure == "401" else ["skipped"]
        )
        assert store.leaf_id == leaf and store.path.stat().st_size == size


async def test_automatic_run_without_credentials_falls_back_to_extractive(
    tmp_path: Path, provider: FakeProvider
):
    settings = _fallback_on(provider)
    provider.responder = lambda body: Answer(status=401, error="invalid x-api-key")
    with long_session(tmp_path) as store:
        outcome = await compactor(store, settings).run(
            summary_context(settings, mode="auto"), reason="threshold"
        )
        summarizer = outcome.entry.details["summarizer"]
        assert summarizer["extractive"] is True
        assert summarizer["fallbackReason"].startswith("Compaction requires usable credentials")


def _at_level(store: SessionStore, level: str) -> None:
    store.append({"type": "thinking_level_change", "thinkingLevel": level})
    store.append(user("and now " + "n" * 9000))
    store.append(assistant("done " + "d" * 9000))


@pytest.mark.parametrize(
    ("level", "effort"),
    [
        ("off", None),
        ("minimal", "minimal"),
        ("low", "low"),
        ("medium", "medium"),
        ("high", "high"),
        ("xhigh", "high"),
    ],
)
async def test_the_summary_reasons_at_the_sessions_thinking_level(
    tmp_path: Path, provider: FakeProvider, level: str, effort: str | None
):
    """pi 0.73.1 passes the session's thinking level to the summarizer (none when off)."""
    settings = settings_with(
        compaction={"keepRecentTokens": 2000, "tokenEstimator": "chars"},
        summarizer={"candidates": [provider.candidate(reasoning=True)]},
    )
    with long_session(tmp_path) as store:
        _at_level(store, level)
        await compactor(store, settings).run(summary_context(settings, mode="manual"))
    assert len(provider.requests) >= 2  # the history summary and the short one
    assert all(request.get("reasoning_effort") == effort for request in provider.requests)


@pytest.mark.parametrize(
    ("level", "budget"),
    [
        ("off", None),
        ("minimal", 1024),
        ("low", 2048),
        ("medium", 8192),
        ("high", 16384),
        ("xhigh", 16384),
    ],
)
async def test_anthropic_thinking_budget_follows_the_level(
    tmp_path: Path, provider: FakeProvider, level: str, budget: int | None
):
    settings = settings_with(
        compaction={"keepRecentTokens": 2000, "tokenEstimator": "chars", "shortSummary": False},
        summarizer={"candidates": [provider.anthropic_candidate(reasoning=True)]},
    )
    with long_session(tmp_path) as store:
        _at_level(store, level)
        await compactor(store, settings).run(summary_context(settings, mode="manual"))
    assert provider.requests
    for request in provider.requests:
        # the text's own room: 0.8 of the 16384 reserve (history), or 0.5 (a turn prefix)
        text_tokens = {"history": 13107, "turnPrefix": 8192}[purpose_of(request)]
        if budget is None:
            assert "thinking" not in request and request["max_tokens"] == text_tokens
        else:
            assert request["thinking"] == {"type": "enabled", "budget_tokens": budget}
            assert request["max_tokens"] == text_tokens + budget


async def test_a_branch_summary_never_asks_for_reasoning(tmp_path: Path, provider: FakeProvider):
    settings = settings_with(
        compaction={"tokenEstimator": "chars"},
        summarizer={"candidates": [provider.candidate(reasoning=True)]},
    )
    with long_session(tmp_path) as store:
        _at_level(store, "high")
        target = store.path_records()[0].id
        await navigate_tree(
            store,
            settings,
            CHARS,
            target_id=target,
            summaries=summary_context(settings, mode="manual"),
            summarize=True,
        )
    assert provider.purposes() == ["branch"] and "reasoning_effort" not in provider.requests[0]


async def test_cancelling_mid_request_writes_nothing(tmp_path: Path, provider: FakeProvider):
    settings = with_provider(provider)
    provider.responder = lambda body: Answer(text="late", hold=True)
    with long_session(tmp_path) as store:
        leaf, size = store.leaf_id, store.path.stat().st_size
        task = asyncio.ensure_future(
            compactor(store, settings).run(summary_context(settings, mode="manual"))
        )
        await asyncio.to_thread(provider.arrived.wait, 5)
        task.cancel()  # the provider holds its answer: only the cancellation ends the run
        done, _ = await asyncio.wait({task}, timeout=30)
        assert done and task.cancelled()
        assert store.leaf_id == leaf and store.path.stat().st_size == size


class RecordingHooks(NoHooks):
    def __init__(self, before=None, compacting=None):
        self.before = before or BeforeCompactAnswer()
        self.compacting_answer = compacting or CompactingAnswer()
        self.calls: list[str] = []
        self.compacted_entries: list[tuple[CompactionEntry, bool]] = []
        self.ignored: list[str] = []

    def answer_ignored(self, problem):
        self.ignored.append(problem)

    async def before_compact(self, preparation, branch_entries, custom_instructions):
        self.calls.append("before")
        assert isinstance(preparation.tokens_before, int) and isinstance(
            preparation.is_split_turn, bool
        )
        assert branch_entries()[-1].id == preparation.recent_entry_ids[-1]
        return self.before

    async def compacting(self, preparation):
        self.calls.append("compacting")
        return self.compacting_answer

    async def compacted(self, entry, from_extension):
        self.calls.append("compacted")
        self.compacted_entries.append((entry, from_extension))


async def test_hook_cancels(tmp_path: Path):
    settings = offline()
    hooks = RecordingHooks(before=BeforeCompactAnswer(cancel=True))
    with long_session(tmp_path) as store:
        count = store.entry_count
        with pytest.raises(OperationCancelledError, match="^Compaction cancelled$"):
            await compactor(store, settings, hooks).run(summary_context(settings, mode="manual"))
        assert store.entry_count == count and hooks.calls == ["before"]


async def test_hook_supplies_the_compaction(tmp_path: Path):
    settings = offline()
    supplied = CompactionResult(
        summary="HOOK SUMMARY", first_kept_entry_id="whatever", tokens_before=999, details={"x": 1}
    )
    hooks = RecordingHooks(before=BeforeCompactAnswer(compaction=supplied))
    with long_session(tmp_path) as store:
        outcome = await compactor(store, settings, hooks).run(
            summary_context(settings, mode="manual")
        )
    entry = outcome.entry
    assert (entry.summary, entry.first_kept_entry_id, entry.tokens_before, entry.details) == (
        "HOOK SUMMARY",
        "whatever",
        999,
        {"x": 1},
    )
    assert entry.from_hook and entry.from_extension
    assert hooks.calls == ["before", "compacted"]  # compacting is skipped, as in oh-my-pi
    assert hooks.compacted_entries == [(entry, True)]


async def test_compacting_hook_shapes_the_request(tmp_path: Path, provider: FakeProvider):
    settings = with_provider(provider)
    answer = CompactingAnswer(
        prompt="SUMMARIZE LIKE A PIRATE",
        context=["the user is on vacation", "ship it"],
        preserve_data={"memory": [1]},
    )
    hooks = RecordingHooks(
        compacting=answer, before=BeforeCompactAnswer(problems=["client 2 timed out"])
    )
    with long_session(tmp_path) as store:
        outcome = await compactor(store, settings, hooks).run(
            summary_context(settings, mode="manual")
        )
    prompts = dict(zip(provider.purposes(), provider.prompts()))
    prompt = prompts["history"]
    assert prompt.endswith("SUMMARIZE LIKE A PIRATE")
    assert (
        "<additional-context>\n- the user is on vacation\n- ship it\n</additional-context>"
        in prompt
    )
    assert "<additional-context>" in prompts["short"]  # the short summary sees it too
    assert "PIRATE" not in prompts.get("turnPrefix", "")  # the prefix keeps its own prompt
    assert outcome.entry.preserve_data == {"memory": [1]}
    assert outcome.entry.details["hookProblems"] == ["client 2 timed out"]
    assert hooks.calls == ["before", "compacting", "compacted"]


async def test_a_reviewed_summary_is_not_replaced_by_a_hooks_compaction(tmp_path: Path):
    settings = offline()
    with long_session(tmp_path) as store:
        supplied = CompactionResult(
            summary="the hook's own summary", first_kept_entry_id="x", tokens_before=1
        )
        hooks = RecordingHooks(before=BeforeCompactAnswer(compaction=supplied))
        outcome = await compactor(store, settings, hooks).run(
            summary_context(settings, mode="manual"), supplied_summary="Reviewed by the user."
        )
        assert outcome.entry.summary.startswith("Reviewed by the user.")
        assert not outcome.from_extension and outcome.entry.from_hook is False
        assert outcome.entry.first_kept_entry_id != "x"
        assert outcome.entry.details["summarizer"] == {"kind": "supplied"}
        problem = (
            "a hook: hooks/session_before_compact returned a compaction; "
            "the reviewed summary was kept instead"
        )
        assert outcome.entry.details["hookProblems"] == [problem]
        assert hooks.ignored == [problem]
        assert hooks.calls == ["before", "compacting", "compacted"]


async def test_a_hook_can_still_cancel_a_reviewed_summary(tmp_path: Path):
    settings = offline()
    with long_session(tmp_path) as store:
        leaf = store.leaf_id
        hooks = RecordingHooks(before=BeforeCompactAnswer(cancel=True))
        with pytest.raises(OperationCancelledError, match="^Compaction cancelled$"):
            await compactor(store, settings, hooks).run(
                summary_context(settings, mode="manual"), supplied_summary="Reviewed."
            )
        assert store.leaf_id == leaf


async def test_prepare_review_commit(tmp_path: Path):
    settings = offline()
    with long_session(tmp_path) as store:
        run = compactor(store, settings)
        preparation = run.prepare()
        assert isinstance(preparation, CompactionPreparation)
        outcome = await run.run(
            summary_context(settings, mode="manual"),
            supplied_summary="A reviewed summary.",
            expected_first_kept_id=preparation.first_kept_entry_id,
        )
        assert outcome.entry.summary.startswith("A reviewed summary.\n\n<read-files>")
        assert outcome.entry.details["summarizer"] == {"kind": "supplied"}
        assert outcome.entry.short_summary is None
        store.append(user("more " + "m" * 9000))
        store.append(assistant("and " + "n" * 9000))
        with pytest.raises(ConflictError):
            await run.run(
                summary_context(settings, mode="manual"),
                supplied_summary="stale",
                expected_first_kept_id=preparation.first_kept_entry_id,
            )


async def test_appends_during_the_summary_are_kept(tmp_path: Path, provider: FakeProvider):
    settings = with_provider(provider)
    provider.responder = lambda body: Answer(text="summary", hold=True)
    with long_session(tmp_path) as store:
        task = asyncio.ensure_future(
            compactor(store, settings).run(summary_context(settings, mode="manual"))
        )
        await asyncio.to_thread(provider.arrived.wait, 5)
        late = store.append(user("typed while compacting")).id
        provider.released.set()
        outcome = await task
        path = [r.id for r in store.path_records()]
        assert path[-2:] == [late, outcome.entry.id]
        assert store.build_context().entry_ids[-1] == late


async def test_leaf_moved_to_another_branch_is_refused(tmp_path: Path, provider: FakeProvider):
    settings = with_provider(provider)
    provider.responder = lambda body: Answer(text="summary", hold=True)
    with long_session(tmp_path) as store:
        first = store.records()[0].id
        task = asyncio.ensure_future(
            compactor(store, settings).run(summary_context(settings, mode="manual"))
        )
        await asyncio.to_thread(provider.arrived.wait, 5)
        store.branch(first)
        store.append(user("elsewhere"))
        count = store.entry_count
        provider.released.set()
        with pytest.raises(ConflictError):
            await task
        assert store.entry_count == count


async def test_fitting_to_a_small_summarizer_window(tmp_path: Path, provider: FakeProvider):
    settings = settings_with(
        compaction={
            "keepRecentTokens": 2000,
            "tokenEstimator": "chars",
            "reserveTokens": 1000,
            "shortSummary": False,
        },
        summarizer={
            "candidates": [provider.candidate(contextWindow=4000)],
            "extractiveFallback": False,
        },
        retry={"enabled": False},
    )
    with long_session(tmp_path, turns=12) as store:
        outcome = await compactor(store, settings).run(summary_context(settings, mode="manual"))
    assert len(provider.requests) > 1  # folded in chunks, oldest first
    for request in provider.requests:
        text = request["messages"][0]["content"] + request["messages"][1]["content"]
        assert len(text) / 4 + 800 <= 4000
    history = [
        p
        for purpose, p in zip(provider.purposes(), provider.prompts())
        if purpose in ("history", "update")
    ]
    assert len(history) > 1  # folded in chunks, oldest first
    assert "<previous-summary>" not in history[0]
    assert all("<previous-summary>" in prompt for prompt in history[1:])
    assert outcome.entry.summary.startswith("## Goal\nupdate summary")


async def test_events_for_manual_and_automatic_runs(tmp_path: Path, provider: FakeProvider):
    settings = with_provider(provider)
    events: list[object] = []
    with long_session(tmp_path) as store:
        outcome, ended = await run_compaction(
            compactor(store, settings),
            summary_context(settings, mode="auto"),
            reason="threshold",
            will_retry=False,
            emit=events.append,
        )
        assert outcome is not None
        assert events == [CompactionStarted(reason="threshold", will_retry=False), ended]
        assert ended.result is not None and ended.entry_id == outcome.entry.id and not ended.aborted
        provider.responder = lambda body: Answer(status=500, error="boom")
        store.append(user("x" * 9000))
        store.append(assistant("y" * 9000))
        events.clear()
        outcome, ended = await run_compaction(
            compactor(store, settings),
            summary_context(settings, mode="auto"),
            reason="overflow",
            will_retry=True,
            emit=events.append,
        )
        assert outcome is None
        assert re.match(
            r"Context overflow recovery failed: Summarization failed: ",
            ended.error_message,
        )
        assert not ended.will_retry and events[-1] == ended
        events.clear()
        with pytest.raises(SummarizerError):
            await run_compaction(
                compactor(store, settings),
                summary_context(settings, mode="manual"),
                reason="manual",
                will_retry=False,
                emit=events.append,
            )
        assert isinstance(events[-1], CompactionEnded)
        assert re.match(r"Compaction failed: Summarization failed: ", events[-1].error_message)
        provider.responder = default_answer
