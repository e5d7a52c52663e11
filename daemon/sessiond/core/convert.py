"""pi's convertToLlm: agent messages to the messages a provider accepts.

User, system, assistant and tool-result messages pass through (pi 1.6 keeps system
messages in place; a provider without mid-conversation system messages replays them
into the leading one, see ``core.system_state``); the other roles
(bash and python runs, custom messages, summaries, file mentions) become user
messages; a message excluded from context, or of a role sessiond does not
know, is dropped. Order is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import msgspec

from .messages import (
    AnyMessage,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    DeveloperMessage,
    FileMentionMessage,
    HookMessage,
    ImageContent,
    PythonExecutionMessage,
    SystemMessage,
    TextContent,
    ToolResultMessage,
    UserContentBlock,
    UserMessage,
)
from .templates import render

LlmMessage: TypeAlias = (
    UserMessage | SystemMessage | DeveloperMessage | AssistantMessage | ToolResultMessage
)

PRUNED_OUTPUT_TEXT = "[Output truncated]"


def convert_to_llm(messages: Sequence[AnyMessage]) -> list[LlmMessage]:
    return [message for message, _, _ in convert_to_llm_tracked(messages)]


def convert_to_llm_tracked(
    messages: Sequence[AnyMessage],
) -> list[tuple[LlmMessage, int, bool]]:
    """Each converted message with the index of the input message it came from and
    whether it is that message unchanged. The wire layer sends an unchanged
    stored message as its original JSON, unknown fields included."""
    converted: list[tuple[LlmMessage, int, bool]] = []
    for index, message in enumerate(messages):
        if isinstance(message, (UserMessage, SystemMessage, DeveloperMessage, AssistantMessage)):
            converted.append((message, index, True))
        elif isinstance(message, ToolResultMessage):
            if message.pruned_at is not None:
                converted.append((_pruned_tool_result(message), index, False))
            else:
                converted.append((message, index, True))
        else:
            user = _as_user_message(message)
            if user is not None:
                converted.append((user, index, False))
    return converted


def _as_user_message(message: AnyMessage) -> UserMessage | None:
    if isinstance(message, BashExecutionMessage):
        if message.exclude_from_context:
            return None
        return _user_text(bash_execution_text(message), message.timestamp)
    if isinstance(message, PythonExecutionMessage):
        if message.exclude_from_context:
            return None
        return _user_text(python_execution_text(message), message.timestamp)
    if isinstance(message, (CustomMessage, HookMessage)):
        content: list[UserContentBlock] = (
            [TextContent(text=message.content)]
            if isinstance(message.content, str)
            else list(message.content)
        )
        return UserMessage(
            content=content, timestamp=message.timestamp, attribution=message.attribution
        )
    if isinstance(message, BranchSummaryMessage):
        text = render("compaction/branch-summary-context", summary=message.summary)
        return _user_text(text, message.timestamp)
    if isinstance(message, CompactionSummaryMessage):
        text = render("compaction/compaction-summary-context", summary=message.summary)
        return _user_text(text, message.timestamp)
    if isinstance(message, FileMentionMessage):
        return _file_mention(message)
    return None


def _user_text(text: str, timestamp: float | None) -> UserMessage:
    return UserMessage(content=[TextContent(text=text)], timestamp=timestamp)


def _pruned_tool_result(message: ToolResultMessage) -> ToolResultMessage:
    # Images are dropped with the output they belonged to.
    text = "".join(block.text for block in message.content if isinstance(block, TextContent))
    return msgspec.structs.replace(message, content=[TextContent(text=text or PRUNED_OUTPUT_TEXT)])


def bash_execution_text(message: BashExecutionMessage) -> str:
    """pi's rendering of a shell run for the model."""
    text = f"Ran `{message.command}`\n"
    text += f"```\n{message.output}\n```" if message.output else "(no output)"
    if message.cancelled:
        text += "\n\n(command cancelled)"
    elif message.exit_code not in (None, 0):
        text += f"\n\nCommand exited with code {message.exit_code}"
    if message.truncated and message.full_output_path:
        text += f"\n\n[Output truncated. Full output: {message.full_output_path}]"
    return text


def python_execution_text(message: PythonExecutionMessage) -> str:
    text = f"Ran Python:\n```python\n{message.code}\n```\n"
    text += f"Output:\n```\n{message.output}\n```" if message.output else "(no output)"
    if message.cancelled:
        text += "\n\n(execution cancelled)"
    elif message.exit_code not in (None, 0):
        text += f"\n\nExecution failed with code {message.exit_code}"
    return text


def _file_mention(message: FileMentionMessage) -> UserMessage:
    elements: list[str] = []
    images: list[UserContentBlock] = []
    for mentioned in message.files:
        if mentioned.skipped_reason:
            body = f"(skipped: {mentioned.skipped_reason})"
        else:
            body = mentioned.content or ""
        elements.append(f'<file path="{mentioned.path}">\n{body}\n</file>')
        if isinstance(mentioned.image, dict):
            data, mime = mentioned.image.get("data"), mentioned.image.get("mimeType")
            if isinstance(data, str) and isinstance(mime, str):
                images.append(ImageContent(data=data, mime_type=mime))
    text = "<system-reminder>\n" + "\n\n".join(elements) + "\n</system-reminder>"
    return UserMessage(content=[TextContent(text=text), *images], timestamp=message.timestamp)
