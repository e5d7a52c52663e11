"""Tree navigation with branch summaries (pi's ``navigateTree``) and forking (``fork``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sessiond.core.entries import BranchSummaryEntry, LabelEntry
from sessiond.errors import InvalidParamsError, NotFoundError, SummarizerError
from sessiond.service.forking import fork_at_user_message, user_messages_for_forking
from sessiond.service.hooks import BeforeTreeAnswer, NoHooks
from sessiond.service.navigator import NO_CONTENT, navigate_tree
from sessiond.service.summarizer_setup import summary_context
from sessiond.store.session import SessionStore
from sessiond.wire.compaction import SuppliedBranchSummary

from ..fake_provider import Answer, FakeProvider
from ..store.helpers import assistant, tool_call, tool_result, user
from .helpers import CHARS, settings_with

OFFLINE = settings_with(compaction={"tokenEstimator": "chars"})


def six(store: SessionStore) -> dict[str, str]:
    ids = {}
    for name, body in [
        ("u1", user("first question")),
        (
            "a1",
            assistant("first answer", tools=[tool_call("read", path="src/a.py")], stop="toolUse"),
        ),
        ("t1", tool_result("contents of a.py", tool="read", call_id="call-read")),
        ("u2", user("second question")),
        ("a2", assistant("second answer", tools=[tool_call("edit", path="src/b.py")])),
        ("u3", user("third question")),
        ("a3", assistant("third answer")),
    ]:
        ids[name] = store.append(body).id
    return ids


async def navigate(store, target, summarize=False, settings=OFFLINE, **options):
    return await navigate_tree(
        store,
        settings,
        CHARS,
        target_id=target,
        summaries=summary_context(settings, mode="manual"),
        summarize=summarize,
        **options,
    )


async def test_to_a_user_message_puts_its_text_in_the_editor(tmp_path: Path):
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        ids = six(store)
        count = store.entry_count
        result = await navigate(store, ids["u1"])
        assert result.editor_text == "first question" and not result.cancelled
        assert store.leaf_id is None and result.leaf_id is None  # a root's parent
        assert store.entry_count == count  # no summary asked, nothing written


async def test_to_a_non_user_message(tmp_path: Path):
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        ids = six(store)
        result = await navigate(store, ids["a1"])
        assert result.editor_text is None and store.leaf_id == ids["a1"]


async def test_summary_when_navigating_to_the_root_user_message(tmp_path: Path):
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        ids = six(store)
        result = await navigate(store, ids["u1"], summarize=True)
        entry = result.summary_entry
        assert isinstance(entry, BranchSummaryEntry) and entry.parent_id is None
        # pi 1.6: the leaf the summary comes from (0.73.1 wrote "root", the position)
        assert entry.from_id == ids["a3"] and store.leaf_id == entry.id
        assert result.editor_text == "first question"
        assert entry.summary.startswith("Before returning to this point, the user explored")
        assert entry.details["readFiles"] == ["src/a.py"] and entry.details["modifiedFiles"] == [
            "src/b.py"
        ]
        assert "<modified-files>\nsrc/b.py\n</modified-files>" in entry.summary
        assert entry.from_hook is False


async def test_summary_attaches_to_the_parent_of_a_nested_user_message(tmp_path: Path):
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        ids = six(store)
        result = await navigate(store, ids["u2"], summarize=True)
        assert result.summary_entry.parent_id == ids["t1"]
        children = store.get_children(ids["t1"])
        assert [type(c).__name__ for c in children] == ["MessageEntry", "BranchSummaryEntry"]


async def test_summary_attaches_to_a_selected_assistant(tmp_path: Path):
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        ids = six(store)
        result = await navigate(store, ids["a1"], summarize=True)
        assert (
            result.summary_entry.parent_id == ids["a1"] and store.leaf_id == result.summary_entry.id
        )
        assert result.editor_text is None


async def test_no_op_for_the_current_leaf(tmp_path: Path):
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        ids = six(store)
        count = store.entry_count
        result = await navigate(store, ids["a3"], summarize=True)
        assert not result.cancelled and store.leaf_id == ids["a3"] and store.entry_count == count


async def test_unknown_target(tmp_path: Path):
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        six(store)
        with pytest.raises(NotFoundError, match="^Entry nope not found$"):
            await navigate(store, "nope")


async def test_abort_during_the_summary_writes_nothing(tmp_path: Path, provider: FakeProvider):
    settings = settings_with(
        compaction={"tokenEstimator": "chars"},
        summarizer={"candidates": [provider.candidate()], "extractiveFallback": False},
    )
    provider.responder = lambda body: Answer(text="too late", hold=True)
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        ids = six(store)
        count, leaf = store.entry_count, store.leaf_id
        abort = asyncio.Event()
        task = asyncio.ensure_future(
            navigate(store, ids["u2"], summarize=True, settings=settings, abort=abort)
        )
        await asyncio.to_thread(provider.arrived.wait, 5)
        abort.set()
        result = await asyncio.wait_for(task, 1)
        assert result.cancelled and result.aborted and result.summary_entry is None
        assert store.entry_count == count and store.leaf_id == leaf


async def test_summary_without_credentials_fails_and_moves_nothing(
    tmp_path: Path, provider: FakeProvider
):
    """A branch summary is asked for by the user: a 401 is pi's credentials error, not
    an offline summary written in the model's place."""
    settings = settings_with(
        compaction={"tokenEstimator": "chars"}, summarizer={"candidates": [provider.candidate()]}
    )
    provider.responder = lambda body: Answer(status=401, error="invalid api key")
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        ids = six(store)
        count, leaf = store.entry_count, store.leaf_id
        with pytest.raises(SummarizerError) as info:
            await navigate(store, ids["u2"], summarize=True, settings=settings)
        assert info.value.kind == "summarizerFailed" and info.value.details["errorKind"] == "auth"
        assert info.value.message.startswith("Compaction requires usable credentials for ")
        assert store.entry_count == count and store.leaf_id == leaf


async def test_a_window_smaller_than_the_reserve_still_budgets_the_branch(
    tmp_path: Path, provider: FakeProvider
):
    """contextWindow 8000 with the default 16384 reserve: half the window (4000 tokens)
    of the newest messages, not the whole branch."""
    settings = settings_with(
        compaction={"tokenEstimator": "chars"},
        summarizer={"candidates": [provider.candidate()], "extractiveFallback": False},
    )
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        start = store.append(user("start here")).id
        for turn in range(10):  # 1000 tokens each
            store.append(user(f"question {turn} " + "q" * 3988))
            store.append(assistant(f"answer {turn} " + "a" * 3990))
        await navigate(store, start, summarize=True, settings=settings, context_window=8000)
        (prompt,) = provider.prompts()
        assert "answer 9 " in prompt and "question 8 " in prompt
        assert "question 7 " not in prompt and "question 0 " not in prompt


async def test_custom_instructions_append_or_replace(tmp_path: Path, provider: FakeProvider):
    settings = settings_with(
        compaction={"tokenEstimator": "chars"},
        summarizer={"candidates": [provider.candidate()], "extractiveFallback": False},
    )
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        ids = six(store)
        await navigate(
            store,
            ids["a1"],
            summarize=True,
            settings=settings,
            custom_instructions="exactly 3 words",
        )
        store.branch(ids["a3"])
        await navigate(
            store,
            ids["a1"],
            summarize=True,
            settings=settings,
            custom_instructions="ONLY THIS",
            replace_instructions=True,
        )
    appended, replaced = provider.prompts()
    assert appended.endswith("Additional focus: exactly 3 words") and "## Goal" in appended
    assert replaced.endswith("</conversation>\n\nONLY THIS")
    request = provider.requests[0]
    assert request.get("max_tokens", request.get("max_completion_tokens")) == 2048
    assert "[Tool result]" not in appended  # tool results are left out of branch summaries
    assert '[Assistant tool calls]: read(path="src/a.py")' not in appended  # a1 is the target
    assert '[Assistant tool calls]: edit(path="src/b.py")' in appended


async def test_navigating_between_branches(tmp_path: Path):
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        ids = six(store)
        store.branch(ids["a1"])
        other = store.append(user("Main branch continue")).id
        store.append(assistant("ok"))
        result = await navigate(store, ids["u2"], summarize=True)
        assert result.editor_text == "second question"
        assert result.summary_entry.summary and result.summary_entry.parent_id == ids["t1"]
        assert other in [r.id for r in store.records()]


async def test_summary_with_nothing_abandoned_is_not_written(tmp_path: Path):
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        ids = six(store)
        store.branch(ids["a1"])
        result = await navigate(store, ids["a3"], summarize=True)  # a descendant
        assert result.summary_entry is None and store.leaf_id == ids["a3"]


async def test_only_tool_results_abandoned_gives_no_content(tmp_path: Path):
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        ids = six(store)
        store.branch(ids["t1"])
        result = await navigate(store, ids["a1"], summarize=True)
        assert result.summary_entry.summary == NO_CONTENT


async def test_navigating_to_a_compaction_entry(tmp_path: Path):
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        ids = six(store)
        compaction = store.append(
            {"type": "compaction", "summary": "S", "firstKeptEntryId": ids["u3"], "tokensBefore": 9}
        ).id
        store.append(user("after"))
        result = await navigate(store, compaction, summarize=True)
        assert result.summary_entry.parent_id == compaction and result.editor_text is None


async def test_label_on_navigation(tmp_path: Path):
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        ids = six(store)
        plain = await navigate(store, ids["a1"], label="checkpoint")
        assert store.get_label(ids["a1"]) == "checkpoint"
        assert isinstance(
            store.get_entry(store.leaf_id), LabelEntry
        )  # labels move the leaf, as in pi
        assert plain.leaf_id == store.leaf_id
        store.branch(ids["a3"])
        summarized = await navigate(store, ids["a2"], summarize=True, label="tried")
        assert store.get_label(summarized.summary_entry.id) == "tried"


class TreeHooks(NoHooks):
    def __init__(self, answer):
        self.answer = answer
        self.seen = []
        self.after = []

    async def before_tree(self, preparation):
        self.seen.append(preparation)
        return self.answer

    async def tree_changed(self, new_leaf_id, old_leaf_id, summary_entry, from_extension):
        self.after.append((new_leaf_id, old_leaf_id, summary_entry, from_extension))


async def test_hook_cancels_navigation(tmp_path: Path):
    hooks = TreeHooks(BeforeTreeAnswer(cancel=True))
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        ids = six(store)
        result = await navigate(store, ids["u2"], summarize=True, hooks=hooks)
        assert result.cancelled and store.leaf_id == ids["a3"] and hooks.after == []
        preparation = hooks.seen[0]
        # the target is on the current path, so it is the common ancestor and is
        # not summarized itself (its text goes back to the editor)
        assert preparation.common_ancestor_id == ids["u2"] and preparation.user_wants_summary
        assert [e.id for e in preparation.entries_to_summarize] == [ids["a2"], ids["u3"], ids["a3"]]


async def test_hook_supplies_the_summary(tmp_path: Path):
    hooks = TreeHooks(
        BeforeTreeAnswer(summary=SuppliedBranchSummary(summary="FROM THE HOOK", details={"k": 1}))
    )
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        ids = six(store)
        old = store.leaf_id
        result = await navigate(store, ids["a1"], summarize=True, hooks=hooks)
        entry = result.summary_entry
        assert (
            entry.summary == "FROM THE HOOK"
            and entry.details == {"k": 1}
            and entry.made_by_extension
        )
        assert hooks.after == [(entry.id, old, entry, True)]


async def test_hook_summary_ignored_without_summarize(tmp_path: Path):
    hooks = TreeHooks(BeforeTreeAnswer(summary=SuppliedBranchSummary(summary="unused")))
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        ids = six(store)
        result = await navigate(store, ids["a1"], hooks=hooks)
        assert result.summary_entry is None and hooks.after[0][3] is None


# --- fork (8.6, 13.9)


async def test_fork_from_a_middle_user_message(tmp_path: Path):
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        ids = six(store)
        result = fork_at_user_message(store, ids["u2"])
        with result.store as forked:
            assert result.selected_text == "second question"
            assert [r.id for r in forked.records()] == [ids["u1"], ids["a1"], ids["t1"]]
            assert forked.header.parent_session == str(store.path) and forked.persisted


async def test_fork_from_the_first_message_is_empty(tmp_path: Path):
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        ids = six(store)
        result = fork_at_user_message(store, ids["u1"])
        with result.store as forked:
            assert forked.entry_count == 0 and forked.build_context().messages == []
            assert result.selected_text == "first question"


async def test_fork_needs_a_user_message(tmp_path: Path):
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        ids = six(store)
        with pytest.raises(InvalidParamsError, match="^Invalid entry ID for forking$"):
            fork_at_user_message(store, ids["a1"])
        assert user_messages_for_forking(store) == [
            (ids["u1"], "first question"),
            (ids["u2"], "second question"),
            (ids["u3"], "third question"),
        ]
