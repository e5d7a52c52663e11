"""What oh-my-pi's context rules read of each entry, without the message body.

oh-my-pi's rules look at the whole context (a tool result makes an earlier tool call
answered; a note after a failed answer keeps it), but of each entry they need only a
few facts: the role of the message it gives, an answer's tool calls, whether it failed,
a result's call id. A ``Turn`` holds them, so the store can plan a context over a
100k-entry path from its index, decoding each entry once (``store.omp_leaf_view``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from .entries import (
    BranchSummaryEntry,
    CustomMessageEntry,
    Entry,
    MessageEntry,
    UnknownEntry,
    entry_type,
)
from .jsjson import js_trim
from .messages import (
    AnyMessage,
    AssistantMessage,
    CustomMessage,
    HookMessage,
    RedactedThinkingContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UnknownMessage,
    UserMessage,
    message_role,
)

INTERRUPTED_THINKING: Final = "interrupted-thinking"
# Custom messages oh-my-pi keeps out of the model's context.
HIDDEN_CUSTOM_TYPES: Final = frozenset({"prewalk-plan", "vibe-mode-context"})
DEFAULT_CUSTOM_TYPE: Final = "custom-message"
# Custom messages that are the user's own request (a skill or collab prompt they sent).
USER_PROMPT_TYPES: Final = frozenset({"skill-prompt", "collab-prompt"})
CONTEXT_NOTES_TYPE: Final = "experimental_context_notes"
MAX_CONTEXT_NOTES_BYTES: Final = 16_384
_FAILED: Final = frozenset({"aborted", "error"})


@dataclass(frozen=True, slots=True)
class Turn:
    """What the rules need of the message an entry gives, without the message."""

    role: str
    call_ids: tuple[str, ...] = ()  # an answer's tool calls, in order
    blocks: int = 0  # an answer's content blocks
    redacted: int = 0  # ... of which redacted thinking
    failed: bool = False  # an answer that was aborted or ended in an error
    result_id: str | None = None  # a tool result's call id
    custom_type: str | None = None
    user_request: bool = False  # what a rollover brings back


class OmpPath(Protocol):
    """A root-first path, as the rules read it."""

    def __len__(self) -> int: ...

    def id_at(self, index: int) -> str: ...

    def type_at(self, index: int) -> str: ...

    def role_at(self, index: int) -> str | None:
        """The message role of a ``message`` entry (None for other types)."""
        ...

    def entry_at(self, index: int) -> Entry: ...

    def turn_at(self, index: int) -> Turn | None:
        """``turn_of`` the entry (cached by the path)."""
        ...


def turn_of(entry: Entry) -> Turn | None:
    """The message an entry adds to oh-my-pi's context, described; None if it adds none
    (metadata, an empty branch summary, a retried or empty failed answer, a custom
    message of a type oh-my-pi keeps out)."""
    if isinstance(entry, MessageEntry):
        return _turn_of_message(entry.message)
    if isinstance(entry, CustomMessageEntry):
        custom_type = entry.custom_type or DEFAULT_CUSTOM_TYPE
        if custom_type in HIDDEN_CUSTOM_TYPES or entry.content is None:
            return None
        return Turn(
            role="custom",
            custom_type=custom_type,
            user_request=custom_type in USER_PROMPT_TYPES and entry.attribution == "user",
        )
    if isinstance(entry, BranchSummaryEntry):
        return Turn(role="branchSummary") if entry.summary else None
    if isinstance(entry, UnknownEntry) and entry.type == "message":
        message = entry.data.get("message")
        if isinstance(message, dict):
            role = message.get("role")
            return _opaque(role if isinstance(role, str) else "")
    return None


def _turn_of_message(message: AnyMessage) -> Turn | None:
    if isinstance(message, UnknownMessage):
        return _opaque(message.role)
    if isinstance(message, AssistantMessage):
        if message.retry_recovery or _empty_error_turn(message):
            return None
        return Turn(
            role="assistant",
            call_ids=tuple(b.id for b in message.content if isinstance(b, ToolCall)),
            blocks=len(message.content),
            redacted=sum(isinstance(b, RedactedThinkingContent) for b in message.content),
            failed=message.stop_reason in _FAILED,
        )
    if isinstance(message, ToolResultMessage):
        return Turn(role="toolResult", result_id=message.tool_call_id)
    if isinstance(message, CustomMessage | HookMessage):
        role = message_role(message)
        return Turn(
            role=role,
            custom_type=message.custom_type,
            user_request=role == "custom"
            and message.custom_type in USER_PROMPT_TYPES
            and message.attribution == "user",
        )
    if isinstance(message, UserMessage):
        return Turn(role="user", user_request=True)
    return Turn(role=message_role(message))


def _opaque(role: str) -> Turn:
    """A message sessiond could not read as its role: only its role counts (it is never
    stripped or dropped)."""
    return Turn(role=role, user_request=role == "user")


def _empty_error_turn(message: AssistantMessage) -> bool:
    """oh-my-pi's ``isEmptyErrorTurn``: an error answer with nothing in it."""
    if message.stop_reason != "error":
        return False
    for block in message.content:
        if isinstance(block, TextContent) and js_trim(block.text):
            return False
        if isinstance(block, ThinkingContent) and (
            js_trim(block.thinking) or js_trim(block.thinking_signature or "")
        ):
            return False
        if isinstance(block, RedactedThinkingContent) and js_trim(block.data):
            return False
        if isinstance(block, ToolCall):
            return False
    return True


def notes_text(data: Any) -> str | None:
    """The text of a context-notes revision, or None when the data is not a valid one
    (exactly ``version`` 1 and a ``text`` of at most 16 KiB)."""
    if not isinstance(data, dict) or set(data) != {"version", "text"}:
        return None
    version, text = data["version"], data["text"]
    if version != 1 or isinstance(version, bool) or not isinstance(text, str):
        return None
    if len(text.encode("utf-8", "surrogatepass")) > MAX_CONTEXT_NOTES_BYTES:
        return None
    return text


class EntryOmpPath:
    """An ``OmpPath`` over typed entries (the reference, tests, small tools)."""

    def __init__(self, entries: Sequence[Entry]) -> None:
        self._entries = list(entries)
        self._turns: dict[int, Turn | None] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def id_at(self, index: int) -> str:
        return self._entries[index].id

    def type_at(self, index: int) -> str:
        return entry_type(self._entries[index])

    def role_at(self, index: int) -> str | None:
        entry = self._entries[index]
        if isinstance(entry, MessageEntry):
            return message_role(entry.message)
        if isinstance(entry, UnknownEntry) and isinstance(entry.data.get("message"), dict):
            role = entry.data["message"].get("role")
            return role if isinstance(role, str) else None
        return None

    def entry_at(self, index: int) -> Entry:
        return self._entries[index]

    def turn_at(self, index: int) -> Turn | None:
        if index not in self._turns:
            self._turns[index] = turn_of(self._entries[index])
        return self._turns[index]
