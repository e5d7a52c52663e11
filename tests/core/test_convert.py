"""pi's convertToLlm: which roles pass, which become user messages, and how."""

from sessiond.core.convert import convert_to_llm, convert_to_llm_tracked
from sessiond.core.messages import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    FileMentionMessage,
    ImageContent,
    MentionedFile,
    TextContent,
    ToolResultMessage,
    UnknownMessage,
    UserMessage,
)
from sessiond.core.templates import template

from ..builders import usage


def only_text(message):
    assert isinstance(message, UserMessage)
    assert isinstance(message.content, list) and len(message.content) == 1
    return message.content[0].text


def test_user_assistant_tool_result_pass_through_unchanged():
    messages = [
        UserMessage(content="hi", timestamp=1),
        AssistantMessage(content=[], provider="p", model="m", usage=usage(), stop_reason="stop"),
        ToolResultMessage(tool_call_id="c", tool_name="t", content=[], is_error=False),
    ]
    tracked = convert_to_llm_tracked(messages)
    assert tracked == [(messages[0], 0, True), (messages[1], 1, True), (messages[2], 2, True)]


def test_bash_execution_rendering():
    ok = BashExecutionMessage(
        command="ls", output="a\nb", cancelled=False, truncated=False, exit_code=0
    )
    assert only_text(convert_to_llm([ok])[0]) == "Ran `ls`\n```\na\nb\n```"
    failed = BashExecutionMessage(
        command="false", output="", cancelled=False, truncated=False, exit_code=2
    )
    assert (
        only_text(convert_to_llm([failed])[0])
        == "Ran `false`\n(no output)\n\nCommand exited with code 2"
    )
    cancelled = BashExecutionMessage(
        command="sleep 9",
        output="x",
        cancelled=True,
        truncated=True,
        exit_code=None,
        full_output_path="/tmp/o",
    )
    assert only_text(convert_to_llm([cancelled])[0]) == (
        "Ran `sleep 9`\n```\nx\n```\n\n(command cancelled)\n\n[Output truncated. Full output: /tmp/o]"
    )


def test_excluded_bash_is_dropped():
    excluded = BashExecutionMessage(
        command="ls", output="", cancelled=False, truncated=False, exclude_from_context=True
    )
    assert convert_to_llm([excluded]) == []


def test_custom_string_becomes_text_block_and_images_survive():
    image = ImageContent(data="AAAA", mime_type="image/png")
    messages = [
        CustomMessage(custom_type="x", content="note", display=True, timestamp=5),
        CustomMessage(custom_type="x", content=[TextContent(text="t"), image], display=False),
    ]
    first, second = convert_to_llm(messages)
    assert first.content == [TextContent(text="note")] and first.timestamp == 5
    assert second.content == [TextContent(text="t"), image]


def test_summaries_are_wrapped_in_summary_tags():
    compaction = only_text(
        convert_to_llm([CompactionSummaryMessage(summary="S1", tokens_before=5)])[0]
    )
    branch = only_text(convert_to_llm([BranchSummaryMessage(summary="B1", from_id="x")])[0])
    assert compaction.endswith("\n\n<summary>\nS1\n</summary>")
    assert branch.endswith("\n\n<summary>\nB1\n</summary>")
    intro = template("compaction/compaction-summary-context").split("\n\n<summary>")[0]
    assert compaction.startswith(intro) and len(intro) > 40
    assert not compaction.endswith("\n")


def test_summary_text_with_braces_is_not_substituted():
    text = only_text(
        convert_to_llm([CompactionSummaryMessage(summary="{{summary}} x", tokens_before=1)])[0]
    )
    assert "<summary>\n{{summary}} x\n</summary>" in text


def test_pruned_tool_result_keeps_text_only():
    pruned = ToolResultMessage(
        tool_call_id="c",
        tool_name="bash",
        content=[
            TextContent(text="[Output truncated - 900 tokens]"),
            ImageContent(data="x", mime_type="image/png"),
        ],
        is_error=False,
        pruned_at=123,
    )
    [(converted, origin, unchanged)] = convert_to_llm_tracked([pruned])
    assert converted.content == [TextContent(text="[Output truncated - 900 tokens]")]
    assert (origin, unchanged) == (0, False)
    empty = ToolResultMessage(
        tool_call_id="c", tool_name="bash", content=[], is_error=False, pruned_at=1
    )
    assert convert_to_llm([empty])[0].content == [TextContent(text="[Output truncated]")]


def test_file_mention_becomes_system_reminder():
    mention = FileMentionMessage(
        files=[
            MentionedFile(path="a.py", content="print(1)"),
            MentionedFile(path="b.py", content="x"),
        ]
    )
    text = only_text(convert_to_llm([mention])[0])
    assert (
        text
        == '<system-reminder>\n<file path="a.py">\nprint(1)\n</file>\n\n<file path="b.py">\nx\n</file>\n</system-reminder>'
    )


def test_unknown_roles_are_dropped():
    assert convert_to_llm([UnknownMessage("future", {"role": "future"})]) == []
