"""pi 1.6's changes, on tiny paths (the examples of protocol/behaviour.md).

``u`` user, ``a`` answer, ``tr`` tool result, ``cm`` custom message, ``bs`` branch
summary, ``C`` compaction; the parity tests (tests/parity/test_parity_pi16.py) check the
same rules against pi 1.6 itself on sessions it wrote.
"""

from __future__ import annotations

import json

import msgspec

from sessiond.core.context import build_session_context
from sessiond.core.decode import decode_entry
from sessiond.core.messages import AssistantMessage, SystemMessage, TextContent, ToolCall
from sessiond.core.path_reader import EntryPath
from sessiond.core.preparation import (
    NOTHING_TO_COMPACT,
    CompactionPreparation,
    NotCompactable,
    prepare_compaction,
)
from sessiond.core.projected_path import ProjectedPath
from sessiond.core.tokens import CharsEstimator
from sessiond.settings import CompactionSettings

from ..builders import (
    assistant,
    branch_summary,
    compaction,
    context_edit,
    custom_message,
    model_change,
    system,
    tool_result,
    usage,
    usage_entry,
    user,
)

chars = CharsEstimator()


def prepare(entries, keep=500):
    settings = CompactionSettings(keep_recent_tokens=keep, adjust_keep_by_usage=False)
    return prepare_compaction(EntryPath(entries, chars), settings, estimator=chars)


def ids(context):
    return context.entry_ids


def test_edits_omit_and_replace_and_the_latest_on_the_path_wins():
    entries = [
        user("u1", None, "first"),
        assistant("a1", "u1", "original answer"),
        user("u2", "a1", "second"),
        context_edit("e1", "u2", "u1"),  # omit u1
        context_edit("e2", "e1", "a1", "replaced"),
        context_edit("e3", "e2", "a1", "replaced again"),
        usage_entry("x", "e3"),
    ]
    context = build_session_context(entries, "x")
    assert ids(context) == ["a1", "u2"]
    answer = context.messages[0]
    assert isinstance(answer, AssistantMessage)
    # a string replacing an answer's content is one text block; the rest of it stays
    assert answer.content == [TextContent(text="replaced again")] and answer.model == "claude-test"
    assert context.edited == {0}
    # branch-relative: on the path to u2 no edit applies
    assert ids(build_session_context(entries, "u2")) == ["u1", "a1", "u2"]


def test_null_content_reads_as_pi16_reads_it():
    line = b'{"type":"message","id":"u","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":null,"timestamp":1}}'
    entry = decode_entry(line)
    context = build_session_context([entry], "u")
    assert msgspec.to_builtins(context.messages[0])["content"] == []
    cm = decode_entry(
        b'{"type":"custom_message","customType":"n","display":true,"id":"c","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z"}'
    )
    assert msgspec.to_builtins(build_session_context([cm], "c").messages[0])["content"] == []


def test_the_checkpoint_leads_and_kept_system_messages_are_dropped():
    checkpoint = SystemMessage(content="prompt", tools_added=[{"name": "read"}], timestamp=5)
    entries = [
        system("s1", None, "prompt"),
        user("u1", "s1", "q"),
        system("s2", "u1", "", sections={"skills": "x"}),
        assistant("a1", "s2", "answer"),
        compaction("c", "a1", "S", "u1"),
        user("u2", "c", "next"),
    ]
    entries[4].system_message = checkpoint
    context = build_session_context(entries, "u2")
    assert ids(context) == ["c", "c", "u1", "a1", "u2"]
    assert context.messages[0] == checkpoint


def test_retain_none_and_an_older_compaction_inside_the_kept_range():
    entries = [
        user("u1", None, "q"),
        compaction("c1", "u1", "first", "u1"),
        assistant("a1", "c1", "answer"),
        compaction("c2", "a1", "second", "u1"),  # keeps from u1: c1 lies in the kept range
        compaction("c3", "c2", "third", "c3"),  # keeps nothing
        user("u2", "c3", "next"),
    ]
    assert ids(build_session_context(entries, "c2")) == ["c2", "u1", "a1"]
    assert ids(build_session_context(entries, "u2")) == ["c3", "u2"]
    view = ProjectedPath(EntryPath(entries[:4], chars), chars)
    assert [view.id_at(k) for k in range(len(view))] == ["c2", "u1", "c1", "a1"]
    assert view.messages_at(2) == [] and view.tokens_at(2) == 0


def test_a_custom_message_counts_and_is_summarized():
    # [u1, a1, cm, u2 (1000)], 500: 0.73.1 kept from cm; pi 1.6 keeps from u2
    entries = [
        user("u1", None, "a" * 40),
        assistant("a1", "u1", "b" * 40),
        custom_message("cm", "a1", "c" * 40),
        user("u2", "cm", "d" * 4000),
    ]
    prep = prepare(entries)
    assert isinstance(prep, CompactionPreparation)
    assert prep.first_kept_entry_id == "u2" and not prep.is_split_turn
    assert prep.summarize_entry_ids == ["u1", "a1", "cm"]


def test_an_empty_branch_summary_is_no_cut_point_and_no_turn_start():
    # [u1, a1, bs(""), u2 (1000)], 500: the empty summary is pulled in like metadata;
    # pi 1.6 then reports a split turn from u1, sessiond a whole turn (its decision)
    entries = [
        user("u1", None, "a" * 40),
        assistant("a1", "u1", "b" * 40),
        branch_summary("bs", "a1", "", "a1"),
        user("u2", "bs", "d" * 4000),
    ]
    prep = prepare(entries)
    assert isinstance(prep, CompactionPreparation)
    assert prep.first_kept_entry_id == "bs" and not prep.is_split_turn
    assert prep.summarize_entry_ids == ["u1", "a1"]


def test_trailing_tool_results_over_the_budget_keep_the_answer_that_called():
    # [u1, a1 (toolCall), tr1 (1000)], 500: 0.73.1 kept everything; pi 1.6 keeps from a1
    call = ToolCall(id="c1", name="bash", arguments={})
    entries = [
        user("u1", None, "go"),
        assistant("a1", "u1", "", tool_calls=[call]),
        tool_result("tr1", "a1", "r" * 4000, call_id="c1"),
    ]
    prep = prepare(entries)
    assert isinstance(prep, CompactionPreparation)
    assert prep.first_kept_entry_id == "a1" and prep.is_split_turn
    assert prep.summarize_entry_ids == [] and prep.turn_prefix_entry_ids == ["u1"]


def test_compaction_works_on_the_projection():
    # [u1, a1, u2, a2, mc, C (kept from u2), u3 (1000), a3], 500: pi 1.6 keeps from mc (the
    # metadata now sits right before u3); sessiond does not call that a split turn
    entries = [
        user("u1", None, "a" * 40),
        assistant("a1", "u1", "b" * 40),
        user("u2", "a1", "c" * 40),
        assistant("a2", "u2", "d" * 40),
        model_change("mc", "a2", "openai", "gpt-5"),
        compaction("C", "mc", "S", "u2"),
        user("u3", "C", "e" * 4000),
        assistant("a3", "u3", "f" * 40),
    ]
    prep = prepare(entries)
    assert isinstance(prep, CompactionPreparation)
    assert prep.first_kept_entry_id == "mc" and not prep.is_split_turn
    assert prep.summarize_entry_ids == ["u2", "a2"] and prep.previous_summary == "S"


def test_usage_before_a_compaction_or_an_edit_is_stale():
    # [u1, a1 (usage 5000), C (kept from u1), u2, a2 (aborted)]: pi 1.6 counts no usage
    entries = [
        user("u1", None, "a" * 400),
        assistant("a1", "u1", "b" * 400, the_usage=usage(input=4950, output=50)),
        compaction("C", "a1", "S" * 40, "u1"),
        user("u2", "C", "c" * 400),
        assistant("a2", "u2", "d" * 40, stop_reason="aborted"),
    ]
    view = ProjectedPath(EntryPath(entries, chars), chars)
    estimate = view.estimate_context()
    assert estimate.usage_tokens == 0 and estimate.tokens == 10 + 100 + 100 + 100 + 10
    # the same answer measured after the compaction counts
    fresh = [*entries[:4], assistant("a3", "u2", "e", the_usage=usage(input=700, output=0))]
    assert ProjectedPath(EntryPath(fresh, chars), chars).estimate_context().usage_tokens == 700
    # and an edit after it makes it stale again
    edited = [*fresh, context_edit("x", "a3", "u2", "short")]
    assert ProjectedPath(EntryPath(edited, chars), chars).estimate_context().usage_tokens == 0


def test_all_zero_usage_and_user_images_in_the_estimate():
    entries = [
        user("u1", None, "a" * 400),
        assistant("a1", "u1", "b" * 40, the_usage=usage(input=0, output=0)),
    ]
    estimate = ProjectedPath(EntryPath(entries, chars), chars).estimate_context()
    assert estimate.usage_tokens == 0 and estimate.tokens == 110
    picture = decode_entry(
        json.dumps(
            {
                "type": "message",
                "id": "p",
                "parentId": None,
                "timestamp": "2026-01-01T00:00:00.000Z",
                "message": {
                    "role": "user",
                    "content": [{"type": "image", "data": "x", "mimeType": "image/png"}],
                },
            }
        ).encode()
    )
    assert chars.estimate(picture.message) == 1200


def test_edits_apply_before_cut_points_and_summaries():
    entries = [
        user("u1", None, "a" * 4000),
        assistant("a1", "u1", "b" * 4000),
        user("u2", "a1", "c" * 400),
        assistant("a2", "u2", "d" * 400),
        context_edit("e1", "a2", "u1", "short"),
        context_edit("e2", "e1", "a1"),
    ]
    prep = prepare(entries, keep=150)
    assert isinstance(prep, CompactionPreparation)
    # a1 is omitted: no message, no cut point, pulled into the kept part like metadata;
    # u1 is summarized as edited
    assert prep.summarize_entry_ids == ["u1"]
    assert prep.messages_to_summarize[0].content == "short"
    assert prep.first_kept_entry_id == "a1" and not prep.is_split_turn


def test_nothing_left_to_summarize_after_the_edits():
    entries = [
        user("u1", None, "a" * 4000),
        context_edit("e1", "u1", "u1"),
        user("u2", "e1", "b" * 4000),
    ]
    assert prepare(entries) == NotCompactable(NOTHING_TO_COMPACT)


def test_an_omitted_overflow_attempt_after_the_cut_moves_the_cut_past_it():
    # the recovery pi 1.6 writes: the failed attempt is omitted by an edit after it
    entries = [
        user("u1", None, "a" * 4000),
        assistant("a1", "u1", "b" * 400),
        user("u2", "a1", "c" * 4000),
        assistant("a2", "u2", "", stop_reason="error", error_message="prompt is too long"),
        context_edit("e", "a2", "a2"),
    ]
    view = ProjectedPath(EntryPath(entries, chars), chars)
    from sessiond.core.cutpoints import find_cut_point

    cut = find_cut_point(view, 0, len(view), 500)
    assert view.id_at(cut.first_kept_index) == "a2" and cut.is_split_turn
