"""pi's build-context.test.ts and the buildSessionContext cases of its compaction tests."""

from sessiond.core.context import ModelRef, build_session_context
from sessiond.core.entries import UnknownEntry
from sessiond.core.messages import (
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    UnknownMessage,
    UserMessage,
)

from ..builders import (
    assistant,
    branch_summary,
    compaction,
    custom,
    custom_message,
    label,
    model_change,
    thinking,
    user,
)


def texts(context):
    out = []
    for message in context.messages:
        if isinstance(message, UserMessage):
            out.append(message.content)
        elif isinstance(message, (CompactionSummaryMessage, BranchSummaryMessage)):
            out.append(f"[{message.summary}]")
        else:
            out.append(message.content[0].text if message.content else "")
    return out


def test_empty_entries_give_empty_context():
    context = build_session_context([])
    assert context.messages == [] and context.thinking_level == "off" and context.model is None


def test_null_leaf_gives_empty_context():
    context = build_session_context([user("1", None, "hi")], None)
    assert context.messages == []


def test_single_user_message():
    context = build_session_context([user("1", None, "hello")])
    assert texts(context) == ["hello"] and context.entry_ids == ["1"]


def test_simple_conversation_roles():
    entries = [user("1", None, "a"), assistant("2", "1"), user("3", "2", "b"), assistant("4", "3")]
    context = build_session_context(entries)
    assert [type(m).__name__ for m in context.messages] == [
        "UserMessage",
        "AssistantMessage",
        "UserMessage",
        "AssistantMessage",
    ]


def test_tracks_thinking_level_changes():
    entries = [user("1", None, "a"), thinking("2", "1", "high"), assistant("3", "2")]
    context = build_session_context(entries)
    assert context.thinking_level == "high" and len(context.messages) == 2


def test_cleared_thinking_level_is_off():
    entries = [thinking("1", None, "high"), thinking("2", "1", None)]
    assert build_session_context(entries).thinking_level == "off"


def test_tracks_model_from_assistant_message():
    context = build_session_context([user("1", None, "a"), assistant("2", "1")])
    assert context.model == ModelRef("anthropic", "claude-test")


def test_later_assistant_overrides_model_change_as_pi_073():
    entries = [
        user("1", None, "a"),
        model_change("2", "1", "openai", "gpt-4"),
        assistant("3", "2", provider="anthropic", model="claude-test"),
    ]
    assert build_session_context(entries).model == ModelRef("anthropic", "claude-test")


def test_model_change_after_assistant_wins():
    entries = [
        user("1", None, "a"),
        assistant("2", "1"),
        model_change("3", "2", "openai", "gpt-4"),
        thinking("4", "3", "high"),
    ]
    context = build_session_context(entries)
    assert context.model == ModelRef("openai", "gpt-4") and context.thinking_level == "high"


def test_includes_summary_before_kept_messages():
    entries = [
        user("1", None, "first"),
        assistant("2", "1", "response1"),
        user("3", "2", "second"),
        assistant("4", "3", "response2"),
        compaction("5", "4", "Summary of first", "3"),
        user("6", "5", "third"),
        assistant("7", "6", "response3"),
    ]
    context = build_session_context(entries)
    assert texts(context) == ["[Summary of first]", "second", "response2", "third", "response3"]
    assert context.entry_ids == ["5", "3", "4", "6", "7"]
    summary = context.messages[0]
    assert isinstance(summary, CompactionSummaryMessage) and summary.tokens_before == 1000


def test_compaction_keeping_from_first_message():
    entries = [
        user("1", None, "first"),
        assistant("2", "1", "r1"),
        compaction("3", "2", "S", "1"),
        user("4", "3", "next"),
    ]
    assert texts(build_session_context(entries)) == ["[S]", "first", "r1", "next"]


def test_first_kept_not_on_path_keeps_nothing_before():
    entries = [
        user("1", None, "first"),
        assistant("2", "1", "r1"),
        compaction("3", "2", "S", "nope"),
        user("4", "3", "next"),
    ]
    assert texts(build_session_context(entries)) == ["[S]", "next"]


def test_multiple_compactions_use_latest():
    entries = [
        user("1", None, "a"),
        assistant("2", "1", "b"),
        compaction("3", "2", "S1", "1"),
        user("4", "3", "c"),
        assistant("5", "4", "d"),
        compaction("6", "5", "S2", "4"),
        user("7", "6", "e"),
    ]
    assert texts(build_session_context(entries)) == ["[S2]", "c", "d", "e"]


def test_follows_path_to_specified_leaf():
    entries = [
        user("1", None, "start"),
        assistant("2", "1", "r1"),
        user("3", "2", "branch A"),
        user("4", "2", "branch B"),
    ]
    assert texts(build_session_context(entries, "3")) == ["start", "r1", "branch A"]
    assert texts(build_session_context(entries, "4")) == ["start", "r1", "branch B"]


def test_includes_branch_summary_in_path():
    entries = [
        user("1", None, "start"),
        assistant("2", "1", "r1"),
        branch_summary("3", "2", "tried X", "2"),
        user("4", "3", "after"),
    ]
    context = build_session_context(entries)
    assert texts(context) == ["start", "r1", "[tried X]", "after"]
    assert isinstance(context.messages[2], BranchSummaryMessage)
    assert context.messages[2].from_id == "2"


def test_empty_branch_summary_contributes_nothing():
    entries = [user("1", None, "a"), branch_summary("2", "1", "", "1")]
    assert texts(build_session_context(entries)) == ["a"]


def test_complex_tree_with_branches_and_compaction():
    entries = [
        user("1", None, "start"),
        assistant("2", "1", "r1"),
        user("3", "2", "q2"),
        assistant("4", "3", "r2"),
        compaction("5", "4", "main summary", "3"),
        user("6", "5", "q3"),
        assistant("7", "6", "r3"),
        branch_summary("8", "4", "explored", "4"),
        user("9", "8", "better approach"),
    ]
    assert texts(build_session_context(entries, "7")) == ["[main summary]", "q2", "r2", "q3", "r3"]
    assert texts(build_session_context(entries, "9")) == [
        "start",
        "r1",
        "q2",
        "r2",
        "[explored]",
        "better approach",
    ]


def test_unknown_leaf_falls_back_to_last_entry():
    entries = [user("1", None, "a"), assistant("2", "1")]
    assert len(build_session_context(entries, "missing").messages) == 2


def test_orphaned_entries_are_handled():
    entries = [user("1", None, "a"), user("3", "2-missing", "orphan")]
    assert texts(build_session_context(entries)) == ["orphan"]


def test_self_parented_entry_does_not_loop():
    entries = [user("1", "1", "loop")]
    assert texts(build_session_context(entries)) == ["loop"]


def test_metadata_entries_contribute_nothing():
    entries = [
        user("1", None, "a"),
        custom("2", "1"),
        label("3", "2", "1", "start"),
        assistant("4", "3"),
    ]
    assert len(build_session_context(entries).messages) == 2


def test_custom_message_becomes_custom_role_with_ms_timestamp():
    entry = custom_message("1", None, "note text")
    context = build_session_context([entry])
    message = context.messages[0]
    assert isinstance(message, CustomMessage)
    assert message.content == "note text" and message.custom_type == "note" and message.display
    assert (
        message.timestamp
        == 1767225600000
        + int(entry.timestamp[17:19]) * 1000
        + int(entry.timestamp[14:16]) * 60000
        + int(entry.timestamp[11:13]) * 3600000
    )


def test_unreadable_message_passes_through_as_unknown():
    odd = UnknownEntry(
        type="message",
        id="2",
        parent_id="1",
        timestamp="2026-01-01T00:00:00.000Z",
        data={"type": "message", "message": {"role": "futureRole", "x": 1}},
    )
    context = build_session_context([user("1", None, "a"), odd])
    assert isinstance(context.messages[1], UnknownMessage)
    assert context.messages[1].data == {"role": "futureRole", "x": 1}
