"""Agent messages and their content blocks, as pi and oh-my-pi store them.

The types are the schema: field names are snake_case in Python and camelCase on
disk and on the wire (``rename="camel"``). Optional fields default to ``None``
and are omitted when encoding, the way JavaScript drops ``undefined``.

Fields pi always writes are required, so that a struct encoded by sessiond
reads back in pi exactly as pi's own would. Files in the wild are looser than
that; ``core.lenient`` loads those without failing.

Unknown fields are ignored by these types. sessiond never loses them: the store
keeps the original line of every entry and writes it back untouched, and the
wire output of a stored message is its original JSON (see ``store``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

import msgspec

# Every struct here: camelCase on the wire, omit unset optionals, keyword-only
# construction (inheritance with defaults), and no GC tracking because decoded
# session data never forms reference cycles (100k entries would otherwise make
# every collection walk them all).
# (kw_only is spelled out on each class: msgspec does not inherit it, and mypy
# only sees it as a literal keyword.)
STRUCT_OPTIONS: dict[str, Any] = {"rename": "camel", "omit_defaults": True, "gc": False}

Number: TypeAlias = int | float


class TextContent(msgspec.Struct, tag_field="type", tag="text", kw_only=True, **STRUCT_OPTIONS):
    text: str
    text_signature: str | None = None


class ThinkingContent(
    msgspec.Struct, tag_field="type", tag="thinking", kw_only=True, **STRUCT_OPTIONS
):
    thinking: str
    thinking_signature: str | None = None
    item_id: str | None = None
    redacted: bool | None = None


class RedactedThinkingContent(
    msgspec.Struct, tag_field="type", tag="redactedThinking", kw_only=True, **STRUCT_OPTIONS
):
    data: str


class ImageContent(msgspec.Struct, tag_field="type", tag="image", kw_only=True, **STRUCT_OPTIONS):
    data: str
    mime_type: str


class ToolCall(msgspec.Struct, tag_field="type", tag="toolCall", kw_only=True, **STRUCT_OPTIONS):
    id: str
    name: str
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)
    thought_signature: str | None = None
    intent: str | None = None
    custom_wire_name: str | None = None


UserContentBlock: TypeAlias = TextContent | ImageContent
AssistantContentBlock: TypeAlias = (
    TextContent | ThinkingContent | ToolCall | RedactedThinkingContent
)
ContentBlock: TypeAlias = (
    TextContent | ThinkingContent | ToolCall | RedactedThinkingContent | ImageContent
)


class Cost(msgspec.Struct, kw_only=True, **STRUCT_OPTIONS):
    input: Number = 0
    output: Number = 0
    cache_read: Number = 0
    cache_write: Number = 0
    total: Number = 0


class TokenUsage(msgspec.Struct, kw_only=True, **STRUCT_OPTIONS):
    """Token usage of one provider call. ``input`` counts non-cached input only."""

    input: int
    output: int
    cache_read: int
    cache_write: int
    total_tokens: int
    cost: Cost | None = None
    premium_requests: Number | None = None
    reasoning_tokens: int | None = None
    cttl: Any = None
    server: Any = None


StopReason: TypeAlias = Literal["stop", "length", "toolUse", "error", "aborted"]


class UserMessage(msgspec.Struct, tag_field="role", tag="user", kw_only=True, **STRUCT_OPTIONS):
    content: str | list[UserContentBlock]
    timestamp: Number | None = None
    synthetic: bool | None = None
    attribution: str | None = None
    provider_payload: Any = None


class DeveloperMessage(
    msgspec.Struct, tag_field="role", tag="developer", kw_only=True, **STRUCT_OPTIONS
):
    content: str | list[UserContentBlock]
    timestamp: Number | None = None
    attribution: str | None = None
    provider_payload: Any = None


class AssistantMessage(
    msgspec.Struct, tag_field="role", tag="assistant", kw_only=True, **STRUCT_OPTIONS
):
    content: list[AssistantContentBlock]
    api: str | None = None
    provider: str
    model: str
    usage: TokenUsage
    stop_reason: str
    error_message: str | None = None
    timestamp: Number | None = None
    response_id: str | None = None
    provider_payload: Any = None
    duration: Number | None = None
    ttft: Number | None = None
    # pi 1.6: the thinking level the agent loop asked for (a record; the context's
    # level still comes from thinking_level_change entries).
    thinking_level: str | None = None
    # oh-my-pi: set on a failed answer that a retry superseded (not sent to the model).
    retry_recovery: Any = None


class ToolResultMessage(
    msgspec.Struct, tag_field="role", tag="toolResult", kw_only=True, **STRUCT_OPTIONS
):
    tool_call_id: str
    tool_name: str
    content: list[UserContentBlock]
    is_error: bool
    details: Any = None
    timestamp: Number | None = None
    attribution: str | None = None
    pruned_at: Number | None = None
    # pi 1.6: tool calls a tool made while it ran (codemode scripts): ``{calls: [{name,
    # arguments?}]}``; their file operations count for summaries.
    nested_calls: NestedToolCalls | None = None


# A tool as pi 1.6 declares it in a system message: ``{name, description, parameters
# (JSON Schema), constrainedSampling?}``. Kept as the stored object: its JSON text is
# what pi's estimate counts, so no field may be dropped or reordered.
ToolDeclaration = Annotated[
    dict[str, Any],
    msgspec.Meta(
        extra_json_schema={
            "required": ["name"],
            "properties": {
                "name": {"type": "string"},
                "description": {"type": "string"},
                "parameters": {"type": "object", "description": "JSON Schema of the arguments"},
            },
        }
    ),
]
# A tool a system message takes away: ``{name}``.
ToolReference = Annotated[
    dict[str, Any],
    msgspec.Meta(
        extra_json_schema={"required": ["name"], "properties": {"name": {"type": "string"}}}
    ),
]
# Tool calls a tool made while it ran (pi 1.6's codemode), recorded on its result.
NestedToolCalls = Annotated[
    dict[str, Any],
    msgspec.Meta(
        extra_json_schema={
            "properties": {
                "calls": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {
                            "id": {"type": "string"},
                            "name": {"type": "string"},
                            "arguments": {"type": "object"},
                        },
                    },
                }
            }
        }
    ),
]


class SystemMessage(msgspec.Struct, tag_field="role", tag="system", kw_only=True, **STRUCT_OPTIONS):
    """pi 1.6's prompt state in the transcript: the leading one is the system prompt,
    later ones add ``content``, replace ``sections`` by name (``null`` removes one) and
    add or remove tools. Replaying them in order gives the current prompt and tools."""

    content: str | list[TextContent]
    sections: dict[str, str | None] | None = None
    tools_added: list[ToolDeclaration] | None = None
    tools_removed: list[ToolReference] | None = None
    timestamp: Number | None = None


class BashExecutionMessage(
    msgspec.Struct, tag_field="role", tag="bashExecution", kw_only=True, **STRUCT_OPTIONS
):
    command: str
    output: str
    cancelled: bool
    truncated: bool
    exit_code: int | None = None
    exclude_from_context: bool | None = None
    full_output_path: str | None = None
    meta: Any = None
    timestamp: Number | None = None


class PythonExecutionMessage(
    msgspec.Struct, tag_field="role", tag="pythonExecution", kw_only=True, **STRUCT_OPTIONS
):
    code: str
    output: str
    cancelled: bool
    truncated: bool
    exit_code: int | None = None
    exclude_from_context: bool | None = None
    meta: Any = None
    timestamp: Number | None = None


class CustomMessage(msgspec.Struct, tag_field="role", tag="custom", kw_only=True, **STRUCT_OPTIONS):
    custom_type: str
    content: str | list[UserContentBlock]
    display: bool
    details: Any = None
    attribution: str | None = None
    timestamp: Number | None = None


class HookMessage(
    msgspec.Struct, tag_field="role", tag="hookMessage", kw_only=True, **STRUCT_OPTIONS
):
    """The pre-v3 name of ``custom``; the v3 migration renames it."""

    custom_type: str
    content: str | list[UserContentBlock]
    display: bool
    details: Any = None
    attribution: str | None = None
    timestamp: Number | None = None


class BranchSummaryMessage(
    msgspec.Struct, tag_field="role", tag="branchSummary", kw_only=True, **STRUCT_OPTIONS
):
    summary: str
    from_id: str
    timestamp: Number | None = None


class CompactionSummaryMessage(
    msgspec.Struct, tag_field="role", tag="compactionSummary", kw_only=True, **STRUCT_OPTIONS
):
    summary: str
    tokens_before: int
    timestamp: Number | None = None
    short_summary: str | None = None
    provider_payload: Any = None
    # oh-my-pi carries these from its compaction entry (display and provider replay data).
    tokens_after: int | None = None
    method: str | None = None
    warning: str | None = None
    history_rewrite_at: Number | None = None


class MentionedFile(msgspec.Struct, kw_only=True, **STRUCT_OPTIONS):
    path: str
    content: str | None = None
    line_count: int | None = None
    byte_size: int | None = None
    skipped_reason: str | None = None
    image: Any = None


class FileMentionMessage(
    msgspec.Struct, tag_field="role", tag="fileMention", kw_only=True, **STRUCT_OPTIONS
):
    files: list[MentionedFile]
    timestamp: Number | None = None


AgentMessage: TypeAlias = (
    UserMessage
    | SystemMessage
    | DeveloperMessage
    | AssistantMessage
    | ToolResultMessage
    | BashExecutionMessage
    | PythonExecutionMessage
    | CustomMessage
    | HookMessage
    | BranchSummaryMessage
    | CompactionSummaryMessage
    | FileMentionMessage
)

MESSAGE_ROLES: frozenset[str] = frozenset(
    {
        "user",
        "system",
        "developer",
        "assistant",
        "toolResult",
        "bashExecution",
        "pythonExecution",
        "custom",
        "hookMessage",
        "branchSummary",
        "compactionSummary",
        "fileMention",
    }
)


def text_of_blocks(content: str | list[UserContentBlock]) -> str:
    """The text of a user-like content: the string, or its text blocks concatenated."""
    if isinstance(content, str):
        return content
    return "".join(block.text for block in content if isinstance(block, TextContent))


class UnknownMessage:
    """A message whose role or shape sessiond does not understand.

    Context building passes it through (pi appends every message as it is), it
    counts no tokens, is never a cut point and is dropped by ``convert_to_llm``.
    ``data`` is the whole decoded message object, and that is what it encodes
    to (see ``core.encoding``). Not a Struct, so that encoding can reach it.
    """

    __slots__ = ("data", "role")

    def __init__(self, role: str, data: dict[str, Any]) -> None:
        self.role = role
        self.data = data

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnknownMessage) and other.data == self.data

    def __hash__(self) -> int:
        return hash(self.role)

    def __repr__(self) -> str:
        return f"UnknownMessage(role={self.role!r})"


AnyMessage: TypeAlias = AgentMessage | UnknownMessage


def message_role(message: AnyMessage) -> str:
    """The ``role`` of any message, known or not."""
    if isinstance(message, UnknownMessage):
        return message.role
    tag = type(message).__struct_config__.tag
    return tag if isinstance(tag, str) else ""
