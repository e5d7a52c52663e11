"""pi's end-of-turn checks (``checkCompaction``): overflow, pruning, threshold."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from sessiond.core.context import ModelRef
from sessiond.service.compactor import Compactor
from sessiond.service.runs import run_compaction
from sessiond.service.summarizer_setup import summary_context
from sessiond.service.turns import OVERFLOW_ONE_SHOT_MESSAGE, OverflowGuard, end_of_turn
from sessiond.store.session import SessionStore

from ..store.helpers import assistant, tool_result, user
from .helpers import CHARS, settings_with

WINDOW = 100_000


def settings(**compaction):
    return settings_with(
        compaction={"tokenEstimator": "chars", "keepRecentTokens": 2000, **compaction}
    )


async def check(store, config, guard=None, model=None, events=None):
    events = events if events is not None else []

    async def compact(reason, will_retry):
        compactor = Compactor(store, config.compaction, CHARS)
        return await run_compaction(
            compactor,
            summary_context(config, mode="auto"),
            reason=reason,
            will_retry=will_retry,
            emit=events.append,
        )

    return await end_of_turn(
        store,
        config,
        CHARS,
        context_window=WINDOW,
        model=model,
        guard=guard or OverflowGuard(),
        compact=compact,
        emit_ended=events.append,
        now_ms=1_000,
    )


def conversation(store: SessionStore, turns: int = 6, size: int = 4000) -> None:
    for turn in range(turns):
        store.append(user(f"q{turn} " + "q" * size))
        store.append(assistant(f"a{turn} " + "a" * size, input=1000 + turn))


async def test_below_threshold_does_nothing(tmp_path: Path):
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        conversation(store)
        count = store.entry_count
        result = await check(store, settings())
        assert result.action == "none" and result.outcome is None and store.entry_count == count
        assert result.context_tokens == 1055  # the last answer: 1005 in, 50 out


async def test_threshold_compacts_and_continues(tmp_path: Path):
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        conversation(store)
        store.append(user("final " + "f" * 4000))
        store.append(assistant("big", input=90_000))
        events: list[object] = []
        result = await check(store, settings(), events=events)
        assert result.action == "continue"
        assert result.prompt and "most recent request" in result.prompt
        assert result.outcome is not None and store.leaf_id == result.outcome.entry.id
        assert [type(e).__name__ for e in events] == ["CompactionStarted", "CompactionEnded"]
        assert events[0].reason == "threshold" and events[1].will_retry is False


async def test_threshold_without_auto_continue(tmp_path: Path):
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        conversation(store)
        store.append(assistant("big", input=90_000))
        result = await check(store, settings(autoContinue=False))
        assert result.action == "none" and result.outcome is not None and result.prompt is None


async def test_disabled_or_off_never_compacts(tmp_path: Path):
    for config in (settings(enabled=False), settings(strategy="off")):
        with SessionStore.create("/p", session_dir=tmp_path / str(id(config))) as store:
            conversation(store)
            store.append(assistant("big", input=99_000))
            assert (await check(store, config)).outcome is None


async def test_pruning_before_the_threshold_check(tmp_path: Path):
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        store.append(user("run the tools"))
        for index in range(6):
            store.append(assistant("", input=1000, stop="toolUse"))
            store.append(
                tool_result("o" * 60_000, tool="bash", call_id=f"c{index}")
            )  # 15k tokens each
        store.append(assistant("summary of work", input=89_000))
        original = store.path.read_bytes()
        result = await check(store, settings())
        # three results past the newest 40k are pruned (3 * (15000 - 9) saved); the edits
        # make the answer's 89k measurement stale, and the edited context's estimate is
        # under the 83616 threshold, so no compaction is needed
        assert result.pruned is not None and len(result.pruned.candidates) == 3
        assert result.outcome is None and result.action == "none"
        assert result.context_tokens is not None and result.context_tokens < 60_000
        # nothing was rewritten: three pi 1.6 context_edit entries were appended
        after = store.path.read_bytes()
        assert after.startswith(original)
        edits = [json.loads(line) for line in after[len(original) :].splitlines()]
        assert [e["type"] for e in edits] == ["context_edit"] * 3
        assert [e["targetId"] for e in edits] == [c.entry_id for c in result.pruned.candidates]
        assert result.pruned.edit_ids == [e["id"] for e in edits]
        assert all(
            e["replacement"]
            == {"content": [{"type": "text", "text": "[Output truncated - 15000 tokens]"}]}
            for e in edits
        )
        assert not store.path.with_name(store.path.name + ".pruned").exists()
        texts = [
            m.content[0].text for m in store.build_context().messages if hasattr(m, "tool_call_id")
        ]
        assert texts.count("[Output truncated - 15000 tokens]") == 3


async def test_overflow_compacts_and_asks_for_a_retry_once(tmp_path: Path):
    config = settings()
    guard = OverflowGuard()
    model = ModelRef("anthropic", "claude-test")
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        conversation(store)
        store.append(user("one more"))
        store.append(
            assistant(
                "", stop="error", errorMessage="prompt is too long: 210000 tokens > 200000 maximum"
            )
        )
        events: list[object] = []
        first = await check(store, config, guard, model, events)
        assert first.action == "retry" and first.outcome is not None
        assert events[0].reason == "overflow" and events[0].will_retry
        assert events[-1].will_retry is True
        # the retry overflows again: pi's one-shot message, no second compaction
        store.append(assistant("", stop="error", errorMessage="prompt is too long"))
        count = store.entry_count
        second = await check(store, config, guard, model, events)
        assert second.action == "none" and second.error_message == OVERFLOW_ONE_SHOT_MESSAGE
        assert store.entry_count == count and events[-1].error_message == OVERFLOW_ONE_SHOT_MESSAGE


async def test_a_retry_answered_in_the_compactions_millisecond_is_not_stale(tmp_path: Path):
    """Every entry gets the same timestamp: the retry's overflow still counts (it follows
    the compaction on the path), so the one-shot rule answers instead of silence."""
    frozen = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    config = settings()
    guard = OverflowGuard()
    model = ModelRef("anthropic", "claude-test")
    with SessionStore.create("/p", session_dir=tmp_path, clock=lambda: frozen) as store:
        conversation(store)
        store.append(user("one more"))
        store.append(assistant("", stop="error", errorMessage="prompt is too long"))
        first = await check(store, config, guard, model)
        assert first.action == "retry" and first.outcome is not None
        store.append(assistant("", stop="error", errorMessage="prompt is too long"))
        second = await check(store, config, guard, model)
        assert second.error_message == OVERFLOW_ONE_SHOT_MESSAGE


async def test_an_answer_made_before_the_compaction_but_appended_after_is_stale(tmp_path: Path):
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        conversation(store)
        store.append(assistant("big", input=90_000))
        assert (await check(store, settings())).outcome is not None
        # a late append of an answer timestamped before the compaction: pi ignores it
        store.append(assistant("late and huge", input=99_000, timestamp=1))
        assert (await check(store, settings())).outcome is None


async def test_overflow_guard_rearms_on_user_or_good_answer():
    guard = OverflowGuard(attempted=True)
    from tests.builders import assistant as typed_assistant
    from tests.builders import user as typed_user

    guard.observe(typed_assistant("x", None, stop_reason="error"))
    assert guard.attempted
    guard.observe(typed_user("u", None, "again"))
    assert not guard.attempted
    guard.attempted = True
    guard.observe(typed_assistant("y", None))
    assert not guard.attempted


async def test_overflow_from_another_model_is_ignored(tmp_path: Path):
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        conversation(store)
        store.append(assistant("", stop="error", errorMessage="prompt is too long"))
        result = await check(store, settings(), model=ModelRef("openai", "gpt-5"))
        assert result.outcome is None


async def test_aborted_answers_are_skipped(tmp_path: Path):
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        conversation(store)
        store.append(assistant("", stop="aborted", input=99_000))
        assert (await check(store, settings())).outcome is None


async def test_error_answers_measure_from_the_last_good_usage(tmp_path: Path):
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        conversation(store, turns=2)
        store.append(assistant("fine", input=95_000))
        store.append(user("next"))
        store.append(assistant("", stop="error", errorMessage="503 service unavailable"))
        result = await check(store, settings())
        assert result.outcome is not None  # 95k of the last good answer is over the threshold


async def test_error_without_any_usage_does_nothing(tmp_path: Path):
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        store.append(user("q"))
        store.append(assistant("", stop="error", errorMessage="503 service unavailable"))
        assert (await check(store, settings())).outcome is None


async def test_stale_answers_from_before_a_compaction_are_ignored(tmp_path: Path):
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        conversation(store)
        store.append(assistant("old and huge", input=610_000, timestamp=1))
        first_kept = store.records()[-3].id
        store.append(
            {
                "type": "compaction",
                "summary": "S",
                "firstKeptEntryId": first_kept,
                "tokensBefore": 610_000,
            }
        )
        assert (await check(store, settings())).outcome is None


async def test_turn_not_ended_when_a_user_message_is_last(tmp_path: Path):
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        conversation(store)
        store.append(assistant("x", input=99_000))
        store.append(user("the next question"))
        assert (await check(store, settings())).outcome is None


async def test_after_a_context_edit_the_size_is_the_edited_contexts_estimate(tmp_path: Path):
    # pi 1.6: a measurement taken before an edit describes a context that is gone
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        conversation(store)
        big = store.append(assistant("big", input=90_000))
        first = store.records()[0].id
        store.append({"type": "context_edit", "targetId": first, "replacement": None})
        result = await check(store, settings())
        assert result.outcome is None and result.action == "none"
        assert result.context_tokens == store.leaf_view.estimate_context(CHARS).tokens < 20_000
        # the same answer without the edit is over the threshold
        store.branch(big.id)
        assert (await check(store, settings())).outcome is not None
