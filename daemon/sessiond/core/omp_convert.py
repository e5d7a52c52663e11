"""The provider form of a context on oh-my-pi's files.

sessiond's ``convert_to_llm`` (pi's rules), with what oh-my-pi does otherwise:

- custom messages become ``developer`` messages (pi: user messages), as oh-my-pi's
  ``convertMessageToLlm`` sends them, except a skill or collab prompt the user sent,
  which stays the user's message;
- a summary written by a handoff (``method: "handoff"``) is wrapped as a handoff
  document, not as a compaction summary;
- an image that oh-my-pi moved to its blob store is stored as ``blob:sha256:<hash>``
  in place of its data. oh-my-pi reads those from its own store under the user's home;
  sessiond does not, so such an image becomes a short text saying which image is
  missing, instead of a reference sent to a provider as if it were image data.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from .convert import LlmMessage, convert_to_llm_tracked
from .messages import (
    AnyMessage,
    CompactionSummaryMessage,
    CustomMessage,
    DeveloperMessage,
    HookMessage,
    ImageContent,
    TextContent,
    ToolResultMessage,
    UserContentBlock,
    UserMessage,
)
from .omp_turns import USER_PROMPT_TYPES
from .templates import render

BLOB_REF_PREFIX: Final = "blob:sha256:"


def omp_convert_to_llm_tracked(
    messages: Sequence[AnyMessage],
) -> list[tuple[LlmMessage, int, bool]]:
    """Like ``convert_to_llm_tracked``: each message with the index it came from and
    whether it is that message unchanged."""
    converted: list[tuple[LlmMessage, int, bool]] = []
    for index, message in enumerate(messages):
        if isinstance(message, CustomMessage | HookMessage):
            content: list[UserContentBlock] = (
                [TextContent(text=message.content)]
                if isinstance(message.content, str)
                else list(message.content)
            )
            content = _without_blob_refs(content) or content
            llm: LlmMessage
            if isinstance(message, CustomMessage) and _users_prompt(message):
                llm = UserMessage(content=content, timestamp=message.timestamp, attribution="user")
            else:
                llm = DeveloperMessage(
                    content=content, timestamp=message.timestamp, attribution=message.attribution
                )
            converted.append((llm, index, False))
        elif isinstance(message, CompactionSummaryMessage) and message.method == "handoff":
            text = render("context/handoff-summary-context", summary=message.summary)
            handoff = UserMessage(content=[TextContent(text=text)], timestamp=message.timestamp)
            converted.append((handoff, index, False))
        else:
            for llm, _, unchanged in convert_to_llm_tracked([message]):
                readable = _readable(llm)
                converted.append((readable, index, unchanged and readable is llm))
    return converted


def _users_prompt(message: CustomMessage) -> bool:
    """A skill or collab prompt the user sent: oh-my-pi sends it as the user's message."""
    return message.custom_type in USER_PROMPT_TYPES and message.attribution == "user"


def _readable(message: LlmMessage) -> LlmMessage:
    """The message with blob-store images replaced by a note (itself when it has none)."""
    if isinstance(message, UserMessage | DeveloperMessage) and not isinstance(message.content, str):
        content = _without_blob_refs(message.content)
        return message if content is None else msgspec.structs.replace(message, content=content)
    if isinstance(message, ToolResultMessage):
        content = _without_blob_refs(message.content)
        return message if content is None else msgspec.structs.replace(message, content=content)
    return message


def _without_blob_refs(blocks: list[UserContentBlock]) -> list[UserContentBlock] | None:
    """The blocks with each blob-store image as a text note; None when there is none."""
    if not any(_is_blob_ref(block) for block in blocks):
        return None
    return [
        TextContent(text=blob_note(block))
        if isinstance(block, ImageContent) and _is_blob_ref(block)
        else block
        for block in blocks
    ]


def _is_blob_ref(block: UserContentBlock) -> bool:
    return isinstance(block, ImageContent) and block.data.startswith(BLOB_REF_PREFIX)


def blob_note(image: ImageContent) -> str:
    return (
        f"[image ({image.mime_type}) not available: oh-my-pi keeps it in its blob store "
        f"as {image.data[:80]}]"
    )
