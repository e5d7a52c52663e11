"""Branch summaries: collecting the abandoned branch and fitting it to a budget."""

from __future__ import annotations

from sessiond.core.branch import (
    branch_token_budget,
    collect_entries_for_branch_summary,
    message_for_branch,
    prepare_branch_entries,
)
from sessiond.core.context import path_to
from sessiond.core.messages import (
    BranchSummaryMessage,
    CompactionSummaryMessage,
    ToolCall,
    UserMessage,
)
from sessiond.core.tokens import CharsEstimator

from ..builders import assistant, branch_summary, compaction, label, tool_result, user

chars = CharsEstimator()


def tree():
    #   u1 - a1 -+- u2 - a2 - u3 - a3        (old leaf a3)
    #            +- u4 - a4                  (other branch)
    entries = [
        user("u1", None, "start"),
        assistant("a1", "u1", "r1"),
        user("u2", "a1", "q2"),
        assistant("a2", "u2", "r2"),
        user("u3", "a2", "q3"),
        assistant("a3", "u3", "r3"),
        user("u4", "a1", "q4"),
        assistant("a4", "u4", "r4"),
    ]
    by_id = {e.id: e for e in entries}
    return entries, lambda entry_id: path_to(by_id[entry_id], by_id)


def ids(collection):
    return [e.id for e in collection.entries]


def test_no_old_leaf_collects_nothing():
    _, path_of = tree()
    collection = collect_entries_for_branch_summary(path_of, None, "u2")
    assert collection.entries == [] and collection.common_ancestor_id is None


def test_target_on_another_branch():
    _, path_of = tree()
    collection = collect_entries_for_branch_summary(path_of, "a3", "a4")
    assert collection.common_ancestor_id == "a1"
    assert ids(collection) == ["u2", "a2", "u3", "a3"]


def test_target_is_an_ancestor():
    _, path_of = tree()
    collection = collect_entries_for_branch_summary(path_of, "a3", "u2")
    assert collection.common_ancestor_id == "u2"
    assert ids(collection) == ["a2", "u3", "a3"]  # the target itself is not summarized


def test_target_is_a_descendant():
    _, path_of = tree()
    collection = collect_entries_for_branch_summary(path_of, "a2", "a3")
    assert collection.common_ancestor_id == "a2" and ids(collection) == []


def test_disjoint_roots_collect_the_whole_old_path():
    entries = [user("r1", None, "a"), assistant("r2", "r1"), user("s1", None, "b")]
    by_id = {e.id: e for e in entries}
    collection = collect_entries_for_branch_summary(lambda i: path_to(by_id[i], by_id), "r2", "s1")
    assert collection.common_ancestor_id is None and ids(collection) == ["r1", "r2"]


def test_extraction_rules():
    assert message_for_branch(tool_result("t", None, "x")) is None
    assert isinstance(message_for_branch(user("u", None, "x")), UserMessage)
    assert isinstance(message_for_branch(compaction("c", None, "S", "u")), CompactionSummaryMessage)
    assert isinstance(message_for_branch(branch_summary("b", None, "B", "x")), BranchSummaryMessage)
    assert message_for_branch(label("l", None, "u", "x")) is None


def test_budget_newest_first_with_summary_slack():
    entries = [
        user("u1", None, "a" * 4000),  # 1000 tokens
        compaction("c1", "u1", "s" * 2800, "u1"),  # 700 tokens, summary: kept under 0.9
        user("u2", "c1", "b" * 2000),  # 500
        assistant("a2", "u2", "c" * 2000),  # 500 + text
    ]
    prepared = prepare_branch_entries(entries, chars, token_budget=1500)
    kinds = [type(m).__name__ for m in prepared.messages]
    # newest first: a2 (~500) + u2 (500) = ~1001; c1 overflows the budget but the
    # total is under 0.9 * 1500, so the summary is still taken; then the walk stops.
    assert kinds == ["CompactionSummaryMessage", "UserMessage", "AssistantMessage"]
    plain = prepare_branch_entries(entries[:1] + entries[2:], chars, token_budget=1500)
    assert [type(m).__name__ for m in plain.messages] == ["UserMessage", "AssistantMessage"]


def test_zero_budget_takes_everything():
    entries, _ = tree()
    prepared = prepare_branch_entries(entries[:6], chars, 0)
    assert len(prepared.messages) == 6


def test_file_ops_from_pi_made_branch_summaries_and_overflowing_message():
    old = branch_summary("b0", None, "earlier", "root")
    old.details = {"readFiles": ["x.py"], "modifiedFiles": ["y.py"]}
    hook_made = branch_summary("b1", "b0", "hook", "b0")
    hook_made.details = {"readFiles": ["hook.py"], "modifiedFiles": []}
    hook_made.from_extension = True
    edit = ToolCall(id="e", name="edit", arguments={"path": "big.py"})
    entries = [
        old,
        hook_made,
        assistant("a0", "b1", "z" * 8000, tool_calls=[edit]),  # overflows the budget
        user("u1", "a0", "small"),
    ]
    prepared = prepare_branch_entries(entries, chars, token_budget=100)
    assert [type(m).__name__ for m in prepared.messages] == ["UserMessage"]
    assert prepared.file_ops.lists() == (["x.py"], ["big.py", "y.py"])


def test_budget_uses_the_fallback_window():
    assert branch_token_budget(None, 16384) == 128000 - 16384
    assert branch_token_budget(200000, 1000) == 199000
    # A reserve as large as the window or larger would mean no limit at all: half instead.
    assert branch_token_budget(8000, 16384) == 4000
    assert branch_token_budget(16384, 16384) == 8192
    assert branch_token_budget(1, 16384) == 1
