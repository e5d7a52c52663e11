"""Cut points, serialization, compaction preparation, file operations and pruning."""

from __future__ import annotations

import pytest

from sessiond.core.cutpoints import find_cut_point, find_valid_cut_points
from sessiond.core.entries import MessageEntry
from sessiond.core.fileops import FileOps, format_file_tags, with_file_tags
from sessiond.core.messages import (
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from sessiond.core.path_reader import EntryPath
from sessiond.core.preparation import (
    ALREADY_COMPACTED,
    NOTHING_TO_COMPACT,
    CompactionPreparation,
    NotCompactable,
    adjusted_keep_recent_tokens,
    prepare_compaction,
)
from sessiond.core.projected_path import ProjectedPath
from sessiond.core.pruning import plan_pruning, pruning_edit
from sessiond.core.serialize import serialize_conversation
from sessiond.core.tokens import CharsEstimator
from sessiond.settings import CompactionSettings

from ..builders import (
    assistant,
    branch_summary,
    compaction,
    context_edit,
    custom_message,
    model_change,
    tool_result,
    usage,
    user,
)

chars = CharsEstimator()


def path_of(entries):
    return EntryPath(entries, chars)


def view_of(entries):
    """The path as pi 1.6's compaction sees it (projected)."""
    return ProjectedPath(EntryPath(entries, chars), chars)


def linear(count: int, size: int = 400):
    entries = []
    parent = None
    for index in range(count):
        entry_id = f"e{index}"
        if index % 2 == 0:
            entries.append(user(entry_id, parent, f"question {index} " + "q" * size))
        else:
            entries.append(assistant(entry_id, parent, f"answer {index} " + "a" * size))
        parent = entry_id
    return entries


# --- cut points (13.1)


def test_cut_point_lands_on_user_or_assistant():
    entries = linear(20, size=1000)  # about 250 tokens a message
    cut = find_cut_point(view_of(entries), 0, len(entries), 2500)
    assert isinstance(entries[cut.first_kept_index], MessageEntry)
    assert cut.first_kept_index > 0


def test_single_assistant_gives_start():
    cut = find_cut_point(view_of([assistant("a", None)]), 0, 1, 1000)
    assert cut.first_kept_index == 0


def test_everything_fits_keeps_everything():
    cut = find_cut_point(view_of(linear(6)), 0, 6, 50_000)
    assert (cut.first_kept_index, cut.is_split_turn) == (0, False)


def test_split_turn_when_cutting_at_an_assistant():
    entries = [
        user("u1", None, "first"),
        assistant("a1", "u1", "x" * 4000),
        user("u2", "a1", "second"),
        assistant("a2-1", "u2", "y" * 4000),
        assistant("a2-2", "a2-1", "z" * 4000),
        assistant("a2-3", "a2-2", "w" * 4000),
    ]
    cut = find_cut_point(view_of(entries), 0, len(entries), 3000)
    assert isinstance(entries[cut.first_kept_index].message, AssistantMessage)
    assert cut.is_split_turn and cut.turn_start_index == 2


def test_never_cuts_at_a_tool_result():
    entries = [
        user("u1", None, "go"),
        assistant("a1", "u1", "", tool_calls=[ToolCall(id="c1", name="bash", arguments={})]),
        tool_result("t1", "a1", "r" * 20000, call_id="c1"),
    ]
    points = find_valid_cut_points(view_of(entries), 0, 3)
    assert points == [0, 1]
    # a huge trailing result pushes the budget over at the result itself, which has no
    # cut point after it: pi 1.6 keeps the answer that made the call (0.73.1 kept everything)
    cut = find_cut_point(view_of(entries), 0, 3, 100)
    assert (cut.first_kept_index, cut.turn_start_index, cut.is_split_turn) == (1, 0, True)


def test_never_separates_tool_calls_from_their_results():
    calls = [ToolCall(id="c1", name="a", arguments={}), ToolCall(id="c2", name="b", arguments={})]
    entries = [
        user("u1", None, "go"),
        assistant("a1", "u1", "", tool_calls=calls),
        tool_result("t1", "a1", "one", call_id="c1"),
        custom_message("m1", "t1", "an extension's note in the middle of the batch"),
        tool_result("t2", "m1", "two", call_id="c2"),
        custom_message("m2", "t2", "after the batch"),
    ]
    assert find_valid_cut_points(view_of(entries), 0, len(entries)) == [0, 1, 5]


def test_metadata_before_a_user_message_is_not_a_split_turn():
    entries = [
        user("u1", None, "a" * 4000),
        assistant("a1", "u1", "b" * 4000),
        model_change("mc", "a1", "openai", "gpt-5"),
        user("u2", "mc", "c" * 4000),
        assistant("a2", "u2", "d" * 400),
    ]
    cut = find_cut_point(view_of(entries), 0, len(entries), 1100)
    assert cut.first_kept_index == 2  # the model change is pulled into the kept part
    assert not cut.is_split_turn and cut.turn_start_index == -1  # pi says split (14 item 3)


# --- preparation


def test_nothing_to_compact_and_already_compacted():
    settings = CompactionSettings()
    assert prepare_compaction(
        path_of([]), settings, tokens_before=0, estimator=chars
    ) == NotCompactable(NOTHING_TO_COMPACT)
    small = linear(2)
    assert prepare_compaction(
        path_of(small), settings, tokens_before=0, estimator=chars
    ) == NotCompactable(NOTHING_TO_COMPACT)
    done = [*linear(4), compaction("c", "e3", "S", "e2")]
    assert prepare_compaction(
        path_of(done), settings, tokens_before=0, estimator=chars
    ) == NotCompactable(ALREADY_COMPACTED)


def test_first_compaction_summarizes_before_the_cut():
    entries = linear(20)
    prep = prepare_compaction(
        path_of(entries), CompactionSettings(keep_recent_tokens=500), estimator=chars
    )
    assert isinstance(prep, CompactionPreparation)
    kept = int(prep.first_kept_entry_id[1:])
    assert prep.summarize_entry_ids == [f"e{i}" for i in range(kept)] or prep.is_split_turn
    assert prep.previous_summary is None and prep.tokens_before > 0
    assert [m for m in prep.recent_messages] and prep.recent_entry_ids[
        0
    ] == prep.first_kept_entry_id


def test_second_compaction_summarizes_the_previously_kept_region():
    entries = linear(10)
    entries.append(compaction("c1", "e9", "FIRST SUMMARY", "e6"))
    parent = "c1"
    for index in range(10, 20):
        maker = user if index % 2 == 0 else assistant
        entries.append(maker(f"e{index}", parent, f"m{index} " + "x" * 400))
        parent = f"e{index}"
    prep = prepare_compaction(
        path_of(entries), CompactionSettings(keep_recent_tokens=300), estimator=chars
    )
    assert isinstance(prep, CompactionPreparation)
    assert prep.previous_summary == "FIRST SUMMARY"
    assert prep.summarize_entry_ids[:4] == [
        "e6",
        "e7",
        "e8",
        "e9",
    ]  # pi 0.73.1: kept region re-summarized
    assert "c1" not in prep.summarize_entry_ids
    assert prep.boundary_start_id == "e6"


def test_previous_compaction_with_unknown_first_kept_starts_after_it():
    entries = [*linear(4), compaction("c1", "e3", "S", "missing")]
    entries += [
        user("n0", "c1", "x" * 800),
        assistant("n1", "n0", "y" * 800),
        user("n2", "n1", "z" * 80),
    ]
    prep = prepare_compaction(
        path_of(entries), CompactionSettings(keep_recent_tokens=30), estimator=chars
    )
    assert isinstance(prep, CompactionPreparation) and prep.boundary_start_id == "n0"
    assert prep.summarize_entry_ids == [] and prep.turn_prefix_entry_ids == ["n0"]


def test_split_turn_preparation_lists_the_prefix():
    entries = [
        user("u1", None, "old " * 500),
        assistant("a1", "u1", "old answer " * 200),
        user("u2", "a1", "new request"),
        assistant("a2", "u2", "step " * 400),
        assistant("a3", "a2", "more " * 400),
    ]
    prep = prepare_compaction(
        path_of(entries), CompactionSettings(keep_recent_tokens=400), estimator=chars
    )
    assert isinstance(prep, CompactionPreparation) and prep.is_split_turn
    assert prep.first_kept_entry_id == "a3"
    assert prep.summarize_entry_ids == ["u1", "a1"] and prep.turn_prefix_entry_ids == ["u2", "a2"]


def test_file_ops_carry_through_pi_made_compactions_only():
    read = ToolCall(id="r", name="read", arguments={"path": "src/a.py"})
    edit = ToolCall(id="e", name="edit", arguments={"path": "src/b.py"})
    write = ToolCall(id="w", name="write", arguments={"path": "src/a.py"})
    other = ToolCall(id="o", name="grep", arguments={"path": "src/c.py"})
    entries = [
        user("u0", None, "x" * 400),
        assistant("a0", "u0", "y" * 400),
        compaction("c0", "a0", "S", "u0"),
    ]
    entries[2].details = {"readFiles": ["old/read.py"], "modifiedFiles": ["old/mod.py"]}
    entries += [
        user("u1", "c0", "do it"),
        assistant("a1", "u1", "", tool_calls=[read, edit, other]),
        tool_result("t1", "a1", "z" * 2000, call_id="r"),
        assistant("a2", "t1", "", tool_calls=[write]),
        user("u2", "a2", "k" * 4000),
        assistant("a3", "u2", "done" * 400),
    ]
    prep = prepare_compaction(
        path_of(entries), CompactionSettings(keep_recent_tokens=1000), estimator=chars
    )
    assert isinstance(prep, CompactionPreparation)
    read_files, modified = prep.file_ops.lists()
    assert read_files == ["old/read.py"]
    assert modified == ["old/mod.py", "src/a.py", "src/b.py"]
    entries[2].from_hook = True
    prep = prepare_compaction(
        path_of(entries), CompactionSettings(keep_recent_tokens=1000), estimator=chars
    )
    assert prep.file_ops.lists() == ([], ["src/a.py", "src/b.py"])


def test_keep_adjustment_ignores_a_large_system_prompt():
    # Each request's prompt = 50k of system prompt and tools + the estimated context:
    # the estimator is exact, so the keep budget must not shrink.
    entries, parent, running = [], None, 0
    for index in range(6):
        entries.append(user(f"u{index}", parent, "q" * 8000))
        running += 2000
        entries.append(
            assistant(
                f"a{index}",
                f"u{index}",
                "a" * 8000,
                the_usage=usage(input=50_000 + running, output=10),
            )
        )
        running += 2000
        parent = f"a{index}"
    assert adjusted_keep_recent_tokens(view_of(entries), 20_000) == 20_000


def test_keep_adjustment_follows_the_estimators_bias():
    # The real tokenizer counts 2x what the estimate says, plus a 30k overhead.
    entries, parent, running = [], None, 0
    for index in range(6):
        entries.append(user(f"u{index}", parent, "q" * 8000))
        running += 2000
        entries.append(
            assistant(
                f"a{index}",
                f"u{index}",
                "a" * 8000,
                the_usage=usage(input=30_000 + 2 * running, output=10),
            )
        )
        running += 2000
        parent = f"a{index}"
    assert adjusted_keep_recent_tokens(view_of(entries), 20_000) == 10_000


def test_keep_adjustment_needs_two_measurements():
    entries = [user("u", None, "q" * 400), assistant("a", "u", the_usage=usage(input=900_000))]
    assert adjusted_keep_recent_tokens(view_of(entries), 20_000) == 20_000


# --- serialization (13.2)


def test_tool_results_truncated_at_2000_characters():
    long = ToolResultMessage(
        tool_call_id="c", tool_name="t", content=[TextContent(text="x" * 5000)], is_error=False
    )
    text = serialize_conversation([long])
    assert text == "[Tool result]: " + "x" * 2000 + "\n\n[... 3000 more characters truncated]"
    short = ToolResultMessage(
        tool_call_id="c", tool_name="t", content=[TextContent(text="y" * 1500)], is_error=False
    )
    assert serialize_conversation([short]) == "[Tool result]: " + "y" * 1500


def test_truncation_counts_utf16_units():
    emoji = ToolResultMessage(
        tool_call_id="c", tool_name="t", content=[TextContent(text="😀" * 1500)], is_error=False
    )
    text = serialize_conversation([emoji])
    assert text.endswith("[... 1000 more characters truncated]")
    assert text.count("😀") == 1000


def test_user_and_assistant_text_never_truncated_and_formats():
    messages = [
        UserMessage(content=[TextContent(text="a" * 3000), TextContent(text="b")]),
        AssistantMessage(
            content=[
                ThinkingContent(thinking="t1"),
                ThinkingContent(thinking="t2"),
                TextContent(text="x" * 3000),
                TextContent(text="y"),
                ToolCall(id="1", name="read", arguments={"path": "a.py", "limit": 10}),
                ToolCall(id="2", name="bash", arguments={"command": "ls -la"}),
            ],
            provider="p",
            model="m",
            usage=usage(),
            stop_reason="toolUse",
        ),
    ]
    assert (
        serialize_conversation(messages)
        == (
            "[User]: " + "a" * 3000 + "b\n\n"  # thinking is left out (pi 1.2 on)
            "[Assistant]: " + "x" * 3000 + "\ny\n\n"
            '[Assistant tool calls]: read(path="a.py", limit=10); bash(command="ls -la")'
        )
    )


# --- file tags (6.9)


def test_file_tags_one_path_per_line_and_replaced_not_appended():
    assert format_file_tags([], []) == ""
    tags = format_file_tags(["a.ts", "b.ts"], ["c.ts"])
    assert (
        tags
        == "<read-files>\na.ts\nb.ts\n</read-files>\n\n<modified-files>\nc.ts\n</modified-files>"
    )
    summary = with_file_tags("The summary.", ["a.ts"], [])
    assert summary == "The summary.\n\n<read-files>\na.ts\n</read-files>"
    assert with_file_tags(summary, ["z.ts"], ["y.ts"]).count("<read-files>") == 1
    assert with_file_tags(summary, [], []) == "The summary."


def test_file_lists_sorted_like_javascript():
    ops = FileOps()
    for path in ["b", "a", "😀", "\uffff", "Z"]:
        ops.read.add(path)
    assert ops.lists()[0] == ["Z", "a", "b", "😀", "\uffff"]


# --- pruning (7)


def result(entry_id, parent, tokens, tool="bash", pruned=None):
    entry = tool_result(entry_id, parent, "r" * (tokens * 4), tool=tool)
    entry.message.pruned_at = pruned
    return entry


def test_pruning_protects_the_newest_40k_and_needs_20k_savings():
    entries = [user("u", None, "go")]
    parent = "u"
    for index in range(8):
        entries.append(result(f"t{index}", parent, 10_000))
        parent = f"t{index}"
    plan = plan_pruning(view_of(entries))
    # newest four reach 40k (the one crossing it is protected), the older four are pruned
    assert [c.entry_id for c in plan.candidates] == ["t0", "t1", "t2", "t3"]
    # each notice "[Output truncated - 10000 tokens]" costs ceil(33 / 4) = 9
    assert plan.tokens_saved == 4 * (10_000 - 9)


def test_pruning_skips_protected_tools_and_small_savings():
    entries = [user("u", None, "go")]
    parent = "u"
    for index, tool in enumerate(["read", "skill", "bash", "bash", "bash"]):
        entries.append(result(f"t{index}", parent, 25_000, tool=tool))
        parent = f"t{index}"
    plan = plan_pruning(view_of(entries))
    assert [c.entry_id for c in plan.candidates] == ["t2"]
    assert plan.empty is False
    small = [user("u", None, "go"), result("t0", "u", 15_000), result("t1", "t0", 45_000)]
    assert plan_pruning(view_of(small)).empty  # 15k saved < 20k minimum


def test_already_pruned_results_count_but_are_not_pruned_again():
    entries = [
        user("u", None, "go"),
        result("old", "u", 30_000),
        result("p", "old", 10, pruned=5),
        result("new", "p", 45_000),
    ]
    plan = plan_pruning(view_of(entries))
    assert [c.entry_id for c in plan.candidates] == ["old"]


def test_results_an_edit_changed_are_not_pruned_again():
    entries = [
        user("u", None, "go"),
        result("old", "u", 30_000),
        result("edited", "old", 30_000),
        context_edit("x", "edited", "edited", "[Output truncated - 30000 tokens]"),
        result("new", "x", 45_000),
    ]
    plan = plan_pruning(view_of(entries))
    assert [c.entry_id for c in plan.candidates] == ["old"]
    assert pruning_edit(plan.candidates[0]) == {
        "type": "context_edit",
        "targetId": "old",
        "replacement": {"content": [{"type": "text", "text": "[Output truncated - 30000 tokens]"}]},
    }


@pytest.mark.parametrize("with_branch_summary", [True, False])
def test_branch_summaries_in_range_are_summarized(with_branch_summary):
    entries = [user("u1", None, "q" * 2000), assistant("a1", "u1", "a" * 2000)]
    parent = "a1"
    if with_branch_summary:
        entries.append(branch_summary("b1", "a1", "explored", "a1"))
        parent = "b1"
    entries += [user("u2", parent, "z" * 2000), assistant("a2", "u2", "y" * 2000)]
    entries += [user("u3", "a2", "w" * 2000), assistant("a3", "u3", "v" * 2000)]
    prep = prepare_compaction(
        path_of(entries), CompactionSettings(keep_recent_tokens=600), estimator=chars
    )
    assert isinstance(prep, CompactionPreparation) and prep.first_kept_entry_id == "u3"
    assert ("b1" in prep.summarize_entry_ids) is with_branch_summary


def test_branch_summary_just_before_the_cut_is_summarized():
    entries = [
        user("u1", None, "q" * 2000),
        assistant("a1", "u1", "a" * 2000),
        branch_summary("b1", "a1", "explored", "a1"),
        user("u2", "b1", "z" * 2000),
        assistant("a2", "u2", "y" * 2000),
    ]
    prep = prepare_compaction(
        path_of(entries), CompactionSettings(keep_recent_tokens=600), estimator=chars
    )
    assert isinstance(prep, CompactionPreparation)
    # pi 1.6: a branch summary gives the context a message, so it is not pulled in
    # (0.73.1 kept from b1 and summarized [u1, a1])
    assert prep.first_kept_entry_id == "u2" and not prep.is_split_turn
    assert prep.summarize_entry_ids == ["u1", "a1", "b1"]
