"""The session file's header and entry types (format v3), pi's and oh-my-pi's.

Every line after the header is one entry: ``{type, id, parentId, timestamp,
...}``. The tagged union ``Entry`` decodes the known types; a line of a type
sessiond does not know becomes an ``UnknownEntry`` (built by the store, never
decoded from this union) and is carried through unchanged.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import msgspec

from .messages import (
    STRUCT_OPTIONS,
    AgentMessage,
    ContentBlock,
    SystemMessage,
    TokenUsage,
    UserContentBlock,
)

CURRENT_SESSION_VERSION = 3


class SessionHeader(
    msgspec.Struct, tag_field="type", tag="session", kw_only=True, **STRUCT_OPTIONS
):
    version: int | None = None
    id: str
    timestamp: str
    cwd: str = ""
    parent_session: str | None = None
    title: str | None = None
    title_source: str | None = None
    # oh-my-pi: a multi-root workspace, where the file was before it moved, and the
    # provider's prompt-cache key carried over by a fork.
    additional_directories: list[str] | None = None
    previous_session_files: list[str] | None = None
    provider_prompt_cache_key: str | None = None


class _EntryBase(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    # Positional (not kw_only) so that these come first on every line, in pi's
    # order; subclasses are kw_only. parentId is written even when null: pi's
    # readers tell a root (null) from a v1 entry (absent).
    id: str
    parent_id: str | None
    timestamp: str


class MessageEntry(_EntryBase, tag_field="type", tag="message", kw_only=True):
    message: AgentMessage


class ThinkingLevelChangeEntry(
    _EntryBase, tag_field="type", tag="thinking_level_change", kw_only=True
):
    # pi writes a string; oh-my-pi writes null when the level is cleared, and the
    # selector the user configured ("auto" or a level) in ``configured``.
    thinking_level: str | None
    configured: str | None = None


class ModelChangeEntry(_EntryBase, tag_field="type", tag="model_change", kw_only=True):
    # pi: provider + modelId. oh-my-pi: model = "provider/modelId" and a role.
    provider: str | None = None
    model_id: str | None = None
    model: str | None = None
    role: str | None = None
    resolved_model_is_fallback: bool | None = None


class CompactionEntry(_EntryBase, tag_field="type", tag="compaction", kw_only=True):
    summary: str
    first_kept_entry_id: str
    tokens_before: int
    details: Any = None
    from_hook: bool | None = None
    from_extension: bool | None = None
    short_summary: str | None = None
    preserve_data: dict[str, Any] | None = None
    # pi 1.6: what summarizing cost, and the replayed system prompt and tools at the
    # boundary (the compacted context starts with it).
    usage: TokenUsage | None = None
    system_message: SystemMessage | None = None
    # oh-my-pi: the estimated context after the rewrite, how the summary was made
    # ("remote", "snapcompact", "handoff", "soft", "shake"), the last entry a
    # provider-native replay covers, and the progress guard's warning.
    tokens_after: int | None = None
    method: str | None = None
    provider_replay_through_entry_id: str | None = None
    warning: str | None = None

    @property
    def made_by_extension(self) -> bool:
        """pi writes ``fromHook``, oh-my-pi ``fromExtension``; either means a hook made it."""
        return bool(self.from_hook or self.from_extension)

    @property
    def retains_nothing(self) -> bool:
        """pi 1.6's retain-none compaction: ``firstKeptEntryId`` is its own id."""
        return self.first_kept_entry_id == self.id


class BranchSummaryEntry(_EntryBase, tag_field="type", tag="branch_summary", kw_only=True):
    from_id: str
    summary: str
    details: Any = None
    from_hook: bool | None = None
    from_extension: bool | None = None
    usage: TokenUsage | None = None

    @property
    def made_by_extension(self) -> bool:
        return bool(self.from_hook or self.from_extension)


class CustomEntry(_EntryBase, tag_field="type", tag="custom", kw_only=True):
    custom_type: str
    data: Any = None


class CustomMessageEntry(_EntryBase, tag_field="type", tag="custom_message", kw_only=True):
    custom_type: str
    # pi 1.6 reads a missing content as [] (0.73.1 passed it through).
    content: str | list[UserContentBlock] | None = None
    display: bool
    details: Any = None
    attribution: str | None = None


class LabelEntry(_EntryBase, tag_field="type", tag="label", kw_only=True):
    target_id: str
    label: str | None = None


class SessionInfoEntry(_EntryBase, tag_field="type", tag="session_info", kw_only=True):
    name: str | None = None


class ContextReplacement(msgspec.Struct, kw_only=True, **STRUCT_OPTIONS):
    content: str | list[ContentBlock]


class ContextEditEntry(_EntryBase, tag_field="type", tag="context_edit", kw_only=True):
    """pi 1.6: a branch-local edit of an earlier entry's model-visible content.

    ``replacement`` null omits the target from the context; otherwise its content
    is replaced (role and metadata stay). The latest edit of a target on the path wins.
    """

    target_id: str
    replacement: ContextReplacement | None


class UsageEntry(_EntryBase, tag_field="type", tag="usage", kw_only=True):
    """pi 1.6: model usage that is not an answer (cache warming, ...); no context."""

    kind: str
    provider: str
    model: str
    usage: TokenUsage
    note: str | None = None


class ServiceTierChangeEntry(_EntryBase, tag_field="type", tag="service_tier_change", kw_only=True):
    # A tier per model family (oh-my-pi 18), a single tier (older), or null.
    service_tier: str | dict[str, str | None] | None = None


class TtsrInjectionEntry(_EntryBase, tag_field="type", tag="ttsr_injection", kw_only=True):
    injected_rules: list[str]


class McpToolSelectionEntry(_EntryBase, tag_field="type", tag="mcp_tool_selection", kw_only=True):
    selected_tool_names: list[str]


class SessionInitEntry(_EntryBase, tag_field="type", tag="session_init", kw_only=True):
    system_prompt: str
    task: str
    tools: list[str]
    output_schema: Any = None


class ModeChangeEntry(_EntryBase, tag_field="type", tag="mode_change", kw_only=True):
    mode: str
    data: Any = None


class ResetBoundaryEntry(_EntryBase, tag_field="type", tag="reset_boundary", kw_only=True):
    """oh-my-pi's ``/clear``: on its files, the context starts after the latest one that
    comes after the latest compaction."""


class TitleChangeEntry(_EntryBase, tag_field="type", tag="title_change", kw_only=True):
    """oh-my-pi's record of a rename; the name itself is in the file's title line."""

    title: str
    source: str
    previous_title: str | None = None
    trigger: str | None = None


class ModelUsageEntry(_EntryBase, tag_field="type", tag="model_usage", kw_only=True):
    """oh-my-pi: a model call outside the conversation (a title, a summary), for accounting."""

    purpose: str
    api: str
    provider: str
    model: str
    usage: TokenUsage
    stop_reason: str
    role: str | None = None
    error_message: str | None = None


class CredentialPinEntry(_EntryBase, tag_field="type", tag="credential_pin", kw_only=True):
    """oh-my-pi: which account (a sha-256 of it) served a provider's requests."""

    provider: str
    hash: str


KnownEntry: TypeAlias = (
    MessageEntry
    | ThinkingLevelChangeEntry
    | ModelChangeEntry
    | CompactionEntry
    | BranchSummaryEntry
    | CustomEntry
    | CustomMessageEntry
    | LabelEntry
    | SessionInfoEntry
    | ContextEditEntry
    | UsageEntry
    | ServiceTierChangeEntry
    | TtsrInjectionEntry
    | McpToolSelectionEntry
    | SessionInitEntry
    | ModeChangeEntry
    | ResetBoundaryEntry
    | TitleChangeEntry
    | ModelUsageEntry
    | CredentialPinEntry
)


class UnknownEntry(msgspec.Struct, kw_only=True, **STRUCT_OPTIONS):
    """An entry of a type sessiond does not know, or one it could not read as its type.

    It keeps its place in the tree (id, parentId) and contributes nothing to
    the context. ``data`` is the whole decoded line.
    """

    type: str
    id: str
    parent_id: str | None
    timestamp: str
    data: dict[str, Any]


Entry: TypeAlias = KnownEntry | UnknownEntry

ENTRY_TYPES: frozenset[str] = frozenset(
    {
        "message",
        "thinking_level_change",
        "model_change",
        "compaction",
        "branch_summary",
        "custom",
        "custom_message",
        "label",
        "session_info",
        "context_edit",
        "usage",
        "service_tier_change",
        "ttsr_injection",
        "mcp_tool_selection",
        "session_init",
        "mode_change",
        "reset_boundary",
        "title_change",
        "model_usage",
        "credential_pin",
    }
)
# Types only oh-my-pi writes: a client may append them to oh-my-pi's files only.
OMP_ONLY_TYPES: frozenset[str] = frozenset(
    {"reset_boundary", "title_change", "model_usage", "credential_pin"}
)
# Types oh-my-pi neither writes nor reads: appended to pi's files only.
PI_ONLY_TYPES: frozenset[str] = frozenset({"session_info", "context_edit", "usage"})


def entry_type(entry: Entry) -> str:
    """The ``type`` tag of an entry, for known and unknown entries alike."""
    if isinstance(entry, UnknownEntry):
        return entry.type
    tag = type(entry).__struct_config__.tag
    assert isinstance(tag, str)
    return tag
