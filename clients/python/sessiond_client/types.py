"""The wire types a client sees: the daemon's own, plus a few client-side forms.

Params and results are ``sessiond.rpc.types`` (the client ships in the same
distribution). Where the daemon sends pre-encoded JSON (``msgspec.Raw``: entries,
context messages), this module has a mirror with the same fields whose JSON is
decoded to plain ``dict``s, because raw bytes are of no use to a caller. A test
checks that each mirror keeps the daemon's field names.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from sessiond.core.context import ModelRef
from sessiond.core.entries import SessionHeader
from sessiond.llm.base import CompletionRequest
from sessiond.rpc.types import (
    PROTOCOL_VERSION,
    AbortResult,
    AppendedEntry,
    AppendResult,
    AutoCompactionReport,
    BeforeCompactHookResult,
    BeforeTreeHookParams,
    BeforeTreeHookResult,
    ClientCapabilities,
    ClientInfo,
    CompactingHookResult,
    CompactionEndedNotification,
    CompactionStartedNotification,
    CompactionSummaryInfo,
    ContextFormat,
    ForkResult,
    HookName,
    InitializeParams,
    InitializeResult,
    ListSessionsResult,
    LlmCompleteResult,
    NewSessionResult,
    OpenSessionResult,
    ServerCapabilities,
    ServerInfo,
    SessionChanged,
    SessionListing,
    SessionRecovered,
    SettingsResult,
    SuppliedBranchSummaryWire,
    SuppliedCompactionWire,
    TreeNode,
    TreeResult,
    TurnEndedResult,
    Usage,
    UserMessagesResult,
)
from sessiond.store.recovery import RecoveryReport

_W: dict[str, Any] = {"rename": "camel", "omit_defaults": True, "kw_only": True}

Entry = dict[str, Any]


# -- mirrors of results that carry raw JSON --------------------------------------------------------


class EntriesResult(msgspec.Struct, **_W):
    """``session/entries``."""

    entries: list[Entry]
    total: int


class EntryResult(msgspec.Struct, **_W):
    """``session/entry``."""

    entry: Entry


class PathResult(msgspec.Struct, **_W):
    """``session/path``: root-to-leaf entries."""

    entries: list[Entry]


class BuildContextResult(msgspec.Struct, **_W):
    """``context/build``: ``entry_ids[i]`` is the entry ``messages[i]`` came from."""

    messages: list[dict[str, Any]]
    thinking_level: str
    model: ModelRef | None
    entry_ids: list[str]
    usage: Usage | None = None
    # Tool calls without results and results without calls (what a provider would reject).
    warnings: list[str] = msgspec.field(default_factory=list)


class RunCompactionResult(msgspec.Struct, **_W):
    """``compaction/run``: the compaction entry written."""

    entry: Entry
    tokens_before: int
    tokens_after: int
    from_extension: bool


class NavigateResult(msgspec.Struct, **_W):
    """``tree/navigate``."""

    cancelled: bool
    leaf_id: str | None
    aborted: bool = False
    editor_text: str | None = None
    summary_entry: Entry | None = None


class CloseResult(msgspec.Struct, **_W):
    """``session/close``: False when this client did not have the session open."""

    closed: bool


class CompactionPreparationWire(msgspec.Struct, **_W):
    """``compaction/prepare`` and the before-compact hook's ``preparation``."""

    first_kept_entry_id: str
    is_split_turn: bool
    tokens_before: int
    summarize_entry_ids: list[str]
    turn_prefix_entry_ids: list[str]
    recent_entry_ids: list[str]
    read_files: list[str]
    modified_files: list[str]
    keep_recent_tokens: int
    previous_summary: str | None = None
    messages_to_summarize: list[dict[str, Any]] | None = None
    turn_prefix_messages: list[dict[str, Any]] | None = None


class BeforeCompactHookParams(msgspec.Struct, **_W):
    """``hooks/session_before_compact``."""

    session_id: str
    preparation: CompactionPreparationWire
    custom_instructions: str | None = None


class CompactingHookParams(msgspec.Struct, **_W):
    """``hooks/session.compacting``: the messages to be summarized, as stored."""

    session_id: str
    messages: list[dict[str, Any]]


class CompactHookParams(msgspec.Struct, **_W):
    """The ``hooks/session_compact`` notification."""

    session_id: str
    compaction_entry: Entry
    from_extension: bool


class TreeHookParams(msgspec.Struct, **_W):
    """The ``hooks/session_tree`` notification."""

    session_id: str
    new_leaf_id: str | None
    old_leaf_id: str | None
    summary_entry: Entry | None = None
    from_extension: bool | None = None


# -- LSP's standard notifications ------------------------------------------------------------------


class WorkDoneProgress(msgspec.Struct, **_W):
    """One ``$/progress`` value: LSP's begin/report/end, told apart by ``kind``."""

    kind: Literal["begin", "report", "end"]
    title: str | None = None
    message: str | None = None
    percentage: int | None = None
    cancellable: bool | None = None


class ProgressParams(msgspec.Struct, **_W):
    token: int | str
    value: WorkDoneProgress


class LogMessageParams(msgspec.Struct, **_W):
    """``window/logMessage``: ``type`` is LSP's MessageType (1 error ... 4 log)."""

    type: int
    message: str


__all__ = [
    "PROTOCOL_VERSION",
    "AbortResult",
    "AppendResult",
    "AppendedEntry",
    "AutoCompactionReport",
    "BeforeCompactHookParams",
    "BeforeCompactHookResult",
    "BeforeTreeHookParams",
    "BeforeTreeHookResult",
    "BuildContextResult",
    "ClientCapabilities",
    "ClientInfo",
    "CloseResult",
    "CompactHookParams",
    "CompactingHookParams",
    "CompactingHookResult",
    "CompactionEndedNotification",
    "CompactionPreparationWire",
    "CompactionStartedNotification",
    "CompactionSummaryInfo",
    "CompletionRequest",
    "ContextFormat",
    "EntriesResult",
    "Entry",
    "EntryResult",
    "ForkResult",
    "HookName",
    "InitializeParams",
    "InitializeResult",
    "ListSessionsResult",
    "LlmCompleteResult",
    "LogMessageParams",
    "ModelRef",
    "NavigateResult",
    "NewSessionResult",
    "OpenSessionResult",
    "PathResult",
    "ProgressParams",
    "RecoveryReport",
    "RunCompactionResult",
    "ServerCapabilities",
    "ServerInfo",
    "SessionChanged",
    "SessionHeader",
    "SessionListing",
    "SessionRecovered",
    "SettingsResult",
    "SuppliedBranchSummaryWire",
    "SuppliedCompactionWire",
    "TreeHookParams",
    "TreeNode",
    "TreeResult",
    "TurnEndedResult",
    "Usage",
    "UserMessagesResult",
    "WorkDoneProgress",
]
