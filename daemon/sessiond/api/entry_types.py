"""Entries and messages on the wire: what ``session/append`` takes, what reads return.

Reads send stored entries and messages as their original JSON (``msgspec.Raw``)
so that fields sessiond does not know reach the client untouched. The shape of
those bytes is the session file format, whose types are ``core.entries`` and
``core.messages``; the aliases below (``StoredEntryJson``, ...) tie each raw
field to the schema of its type, and ``SCHEMA_UNIONS`` names the unions they
refer to, for ``rpc.schema``.

Appends take entries without the fields sessiond assigns (``id``, ``parentId``,
``timestamp``): the ``*EntryInput`` types, one per entry type, with the same
fields as the stored entry otherwise (a test holds them to that). Two rules are
stricter than reading: a message to append cannot be a ``compactionSummary`` or
``branchSummary`` (sessiond builds those from their entries), and an assistant
message needs ``api``, as pi always writes it. A message's ``timestamp`` may be
left out; sessiond stamps it. ``store.SessionStore.append_entries`` enforces the
same rules; these types only describe them.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeAlias

import msgspec

from sessiond.core.convert import LlmMessage
from sessiond.core.entries import ContextReplacement, KnownEntry
from sessiond.core.messages import (
    AgentMessage,
    AssistantContentBlock,
    AssistantMessage,
    BashExecutionMessage,
    CustomMessage,
    DeveloperMessage,
    FileMentionMessage,
    HookMessage,
    PythonExecutionMessage,
    SystemMessage,
    TokenUsage,
    ToolResultMessage,
    UserContentBlock,
    UserMessage,
)

_STRUCT_OPTIONS: dict[str, Any] = {"rename": "camel", "omit_defaults": True}
# The fields of a stored entry that sessiond assigns on append (Python names).
ASSIGNED_FIELDS = ("id", "parent_id", "timestamp")


class AssistantMessageInput(AssistantMessage, tag="assistant", kw_only=True):
    """An assistant message to append: as stored, but api is required (pi always writes it)."""

    api: str


MessageInput: TypeAlias = (
    UserMessage
    | SystemMessage
    | DeveloperMessage
    | AssistantMessageInput
    | ToolResultMessage
    | BashExecutionMessage
    | PythonExecutionMessage
    | CustomMessage
    | HookMessage
    | FileMentionMessage
)


class MessageEntryInput(
    msgspec.Struct, tag_field="type", tag="message", kw_only=True, **_STRUCT_OPTIONS
):
    message: MessageInput


class ThinkingLevelChangeEntryInput(
    msgspec.Struct, tag_field="type", tag="thinking_level_change", kw_only=True, **_STRUCT_OPTIONS
):
    thinking_level: str | None
    configured: str | None = None


class ModelChangeEntryInput(
    msgspec.Struct, tag_field="type", tag="model_change", kw_only=True, **_STRUCT_OPTIONS
):
    provider: str | None = None
    model_id: str | None = None
    model: str | None = None
    role: str | None = None
    resolved_model_is_fallback: bool | None = None


class CompactionEntryInput(
    msgspec.Struct, tag_field="type", tag="compaction", kw_only=True, **_STRUCT_OPTIONS
):
    summary: str
    first_kept_entry_id: str
    tokens_before: int
    details: Any = None
    from_hook: bool | None = None
    from_extension: bool | None = None
    short_summary: str | None = None
    preserve_data: dict[str, Any] | None = None
    usage: TokenUsage | None = None
    # Its timestamp may be left out: sessiond stamps the entry's time.
    system_message: SystemMessage | None = None
    tokens_after: int | None = None
    method: str | None = None
    provider_replay_through_entry_id: str | None = None
    warning: str | None = None


class BranchSummaryEntryInput(
    msgspec.Struct, tag_field="type", tag="branch_summary", kw_only=True, **_STRUCT_OPTIONS
):
    from_id: str
    summary: str
    details: Any = None
    from_hook: bool | None = None
    from_extension: bool | None = None
    usage: TokenUsage | None = None


class CustomEntryInput(
    msgspec.Struct, tag_field="type", tag="custom", kw_only=True, **_STRUCT_OPTIONS
):
    custom_type: str
    data: Any = None


class CustomMessageEntryInput(
    msgspec.Struct, tag_field="type", tag="custom_message", kw_only=True, **_STRUCT_OPTIONS
):
    custom_type: str
    content: str | list[UserContentBlock] | None = None
    display: bool
    details: Any = None
    attribution: str | None = None


class LabelEntryInput(
    msgspec.Struct, tag_field="type", tag="label", kw_only=True, **_STRUCT_OPTIONS
):
    """Sets the target's label; an absent or empty label clears it."""

    target_id: str
    label: str | None = None


class SessionInfoEntryInput(
    msgspec.Struct, tag_field="type", tag="session_info", kw_only=True, **_STRUCT_OPTIONS
):
    name: str | None = None


class ContextEditEntryInput(
    msgspec.Struct, tag_field="type", tag="context_edit", kw_only=True, **_STRUCT_OPTIONS
):
    """pi 1.6: edit what the model sees of an earlier entry on the current branch (a
    user, assistant or tool-result message, or a custom message). ``replacement: null``
    omits it from the context; ``{content}`` replaces its content (a string becomes one
    text block for an answer or a tool result). The latest edit of a target wins."""

    target_id: str
    replacement: ContextReplacement | None


class UsageEntryInput(
    msgspec.Struct, tag_field="type", tag="usage", kw_only=True, **_STRUCT_OPTIONS
):
    """pi 1.6: model usage that is not an answer (``kind`` e.g. ``cache_warm``); it adds
    nothing to the context."""

    kind: str
    provider: str
    model: str
    usage: TokenUsage
    note: str | None = None


class ServiceTierChangeEntryInput(
    msgspec.Struct, tag_field="type", tag="service_tier_change", kw_only=True, **_STRUCT_OPTIONS
):
    service_tier: str | dict[str, str | None] | None = None


class TtsrInjectionEntryInput(
    msgspec.Struct, tag_field="type", tag="ttsr_injection", kw_only=True, **_STRUCT_OPTIONS
):
    injected_rules: list[str]


class McpToolSelectionEntryInput(
    msgspec.Struct, tag_field="type", tag="mcp_tool_selection", kw_only=True, **_STRUCT_OPTIONS
):
    selected_tool_names: list[str]


class SessionInitEntryInput(
    msgspec.Struct, tag_field="type", tag="session_init", kw_only=True, **_STRUCT_OPTIONS
):
    system_prompt: str
    task: str
    tools: list[str]
    output_schema: Any = None


class ModeChangeEntryInput(
    msgspec.Struct, tag_field="type", tag="mode_change", kw_only=True, **_STRUCT_OPTIONS
):
    mode: str
    data: Any = None


class ResetBoundaryEntryInput(
    msgspec.Struct, tag_field="type", tag="reset_boundary", kw_only=True, **_STRUCT_OPTIONS
):
    """oh-my-pi's /clear (its files only)."""


class TitleChangeEntryInput(
    msgspec.Struct, tag_field="type", tag="title_change", kw_only=True, **_STRUCT_OPTIONS
):
    """oh-my-pi's rename record: written by ``session/setName``, never appended directly."""

    title: str
    source: str
    previous_title: str | None = None
    trigger: str | None = None


class ModelUsageEntryInput(
    msgspec.Struct, tag_field="type", tag="model_usage", kw_only=True, **_STRUCT_OPTIONS
):
    """oh-my-pi's usage of a model call outside the conversation (its files only)."""

    purpose: str
    api: str
    provider: str
    model: str
    usage: TokenUsage
    stop_reason: str
    role: str | None = None
    error_message: str | None = None


class CredentialPinEntryInput(
    msgspec.Struct, tag_field="type", tag="credential_pin", kw_only=True, **_STRUCT_OPTIONS
):
    """oh-my-pi's record of the account that served a provider (its files only)."""

    provider: str
    hash: str


EntryInput: TypeAlias = (
    MessageEntryInput
    | ThinkingLevelChangeEntryInput
    | ModelChangeEntryInput
    | CompactionEntryInput
    | BranchSummaryEntryInput
    | CustomEntryInput
    | CustomMessageEntryInput
    | LabelEntryInput
    | SessionInfoEntryInput
    | ContextEditEntryInput
    | UsageEntryInput
    | ServiceTierChangeEntryInput
    | TtsrInjectionEntryInput
    | McpToolSelectionEntryInput
    | SessionInitEntryInput
    | ModeChangeEntryInput
    | ResetBoundaryEntryInput
    | TitleChangeEntryInput
    | ModelUsageEntryInput
    | CredentialPinEntryInput
)

# Named unions in the schema's $defs (msgspec inlines unions; the raw fields refer to
# these by name): name -> (type, description, more schema keywords).
SCHEMA_UNIONS: dict[str, tuple[Any, str, dict[str, Any]]] = {
    "Entry": (
        KnownEntry,
        "A stored entry (a line of the session file after the header), tagged by `type`. "
        "Reads return it as stored: unknown fields are kept, and an entry of a type not "
        "listed here (from a newer pi, or another tool) is passed through as it is.",
        {},
    ),
    "AgentMessage": (
        AgentMessage,
        "A message as pi's agent holds it, tagged by `role`: what `message` entries store "
        "and what `context/build` returns in the `agent` format (the summary roles are "
        "built from compaction and branch_summary entries).",
        {},
    ),
    "LlmMessage": (
        LlmMessage,
        "A message as a provider receives it: the roles `context/build` returns in the `llm` "
        "format (the field is typed as AgentMessage, of which these are a part).",
        {},
    ),
    "UserContentBlock": (
        UserContentBlock,
        "A content block of a user-side message (user, developer, tool result, custom): "
        "text or an image, tagged by `type`.",
        {},
    ),
    "AssistantContentBlock": (
        AssistantContentBlock,
        "A content block of an assistant message, tagged by `type`.",
        {},
    ),
    "EntryInput": (
        EntryInput,
        "An entry to append (`session/append`): a stored entry without `id`, `parentId` "
        "and `timestamp`, which sessiond assigns (an entry that has one is refused). "
        "`reset_boundary`, `model_usage` and `credential_pin` are appended to oh-my-pi's "
        "files only; `session_info` to pi's only; `title_change` is written by "
        "`session/setName`, never appended.",
        {"not": {"anyOf": [{"required": [name]} for name in ("id", "parentId", "timestamp")]}},
    ),
    "MessageInput": (
        MessageInput,
        "A message to append in a `message` entry: any role but the summaries; "
        "`timestamp` may be left out (sessiond stamps it).",
        {},
    ),
}


# Raw JSON fields, each with the schema of what it holds.
StoredEntryJson = Annotated[msgspec.Raw, msgspec.Meta(extra_json_schema={"$ref": "#/$defs/Entry"})]
StoredMessageJson = Annotated[
    msgspec.Raw, msgspec.Meta(extra_json_schema={"$ref": "#/$defs/AgentMessage"})
]
CompactionEntryJson = Annotated[
    msgspec.Raw, msgspec.Meta(extra_json_schema={"$ref": "#/$defs/CompactionEntry"})
]
BranchSummaryEntryJson = Annotated[
    msgspec.Raw, msgspec.Meta(extra_json_schema={"$ref": "#/$defs/BranchSummaryEntry"})
]
# One array type (the llm form's roles are among the agent form's): a union of two
# array types is something generated decoders (msgspec's among them) cannot read.
ContextMessagesJson = Annotated[
    msgspec.Raw,
    msgspec.Meta(
        extra_json_schema={
            "type": "array",
            "items": {"$ref": "#/$defs/AgentMessage"},
            "description": "The messages in the format asked: pi's AgentMessages (`agent`), "
            "or provider messages (`llm`: only the roles of LlmMessage).",
        }
    ),
]
# What session/append takes, kept as a plain object: the store validates it (with a
# precise error per entry) and writes its unknown fields through.
EntryInputObject = Annotated[
    dict[str, Any], msgspec.Meta(extra_json_schema={"$ref": "#/$defs/EntryInput"})
]
