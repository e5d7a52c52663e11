"""The protocol's params and results: every method's, the notifications' and the hooks'.

These types are the schema (``protocol/schema.json`` is generated from them).
Names are camelCase on the wire. Entries and stored messages travel as their
original JSON (``msgspec.Raw``), so fields sessiond does not know reach the
client untouched; ``entry_types`` gives each such field the schema of what it
holds.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from sessiond.core.context import ModelRef
from sessiond.core.dialect import DialectName
from sessiond.core.entries import SessionHeader
from sessiond.wire.context import ContextFormat
from sessiond.wire.listing import SessionSummary
from sessiond.wire.recovery import RecoveryReport
from sessiond.wire.usage import Usage

from .entry_types import (
    BranchSummaryEntryJson,
    CompactionEntryJson,
    ContextMessagesJson,
    EntryInputObject,
    StoredEntryJson,
    StoredMessageJson,
)

PROTOCOL_VERSION = "1"

WIRE_OPTIONS: dict[str, Any] = {"rename": "camel", "omit_defaults": True}

HookName = Literal[
    "session_before_compact",
    "session.compacting",
    "session_compact",
    "session_before_tree",
    "session_tree",
]
# A model's context window in tokens; absent means the configured default.
ContextWindow = Annotated[int, msgspec.Meta(ge=1)]
# LSP's work-done progress token: $/progress notifications carry it.
ProgressToken = int | str


# --------------------------------------------------------------------- sessions


class SessionRef(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str


class NewSessionParams(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    cwd: str
    session_dir: str | None = None
    path: str | None = None
    id: str | None = None
    parent_session: str | None = None
    # Write the file now instead of with the first assistant message (pi's default).
    write_now: bool = False


class NewSessionResult(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str
    path: str
    header: SessionHeader
    persisted: bool


class OpenSessionParams(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    path: str


class OpenSessionResult(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str
    path: str
    header: SessionHeader
    leaf_id: str | None
    entry_count: int
    name: str | None = None
    # Present when opening found something to repair or report.
    recovery: RecoveryReport | None = None
    # Whose rules the file follows (and so its context, compactions and names): "pi",
    # or "oh-my-pi" for a file that starts with oh-my-pi's title line.
    dialect: DialectName = "pi"


class ListSessionsParams(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    cwd: str | None = None
    session_dir: str | None = None


class ListSessionsResult(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    sessions: list[SessionSummary]


# The leaf an append expects; "" stands for "no entry yet" (null is the same as absent).
NO_LEAF = ""
ExpectedLeafId = Annotated[
    str,
    msgspec.Meta(
        description="Append only if the leaf is this entry; the empty string: only if the "
        "session has no entry yet. Leave it out (or null) to append under any leaf."
    ),
]


class AppendParams(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str
    # Entry objects without id, parentId and timestamp, e.g.
    # {"type": "message", "message": {"role": "user", "content": "hi"}}.
    entries: list[EntryInputObject]
    # Refuse (conflict) unless the leaf is still this one; "" means "the session has no
    # entry yet". Absent or null: append under whatever the leaf is.
    expected_leaf_id: ExpectedLeafId | None = None


class AppendResult(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    ids: list[str]
    leaf_id: str | None
    usage: Usage


class EntriesParams(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str
    # Only these entries (in this order); otherwise a page of the file order.
    ids: list[str] | None = None
    offset: int = 0
    limit: int | None = None


class EntriesResult(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    entries: list[StoredEntryJson]
    total: int


class EntryParams(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str
    entry_id: str
    # The entry as it was written, before pruning edited it in place (whatever the
    # file's dialect: an entry pruning never changed is itself).
    original: bool = False


class EntryResult(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    entry: StoredEntryJson
    # With ``original``: whether the entry was read from the session's pruned-output
    # archive (it carries ``prunedAt`` in the file); absent otherwise.
    from_archive: bool | None = None


class PathParams(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str
    from_id: str | None = None


class PathResult(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    entries: list[StoredEntryJson]


class TreeParams(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str
    # Include a one-line text preview per node (decodes every entry: slower).
    previews: bool = True


class TreeNode(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    id: str
    parent_id: str | None
    type: str
    timestamp: str
    children: list[str]
    role: str | None = None
    label: str | None = None
    label_timestamp: str | None = None
    preview: str | None = None
    # On the path from a root to the current leaf.
    active: bool = False


class TreeResult(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    nodes: list[TreeNode]
    root_ids: list[str]
    leaf_id: str | None


class LabelParams(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str
    target_id: str
    # Absent, null or "" clears the label.
    label: str | None = None


class AppendedEntry(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    entry_id: str
    leaf_id: str | None


class SetNameParams(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str
    name: str


class ForkParams(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str
    # A user message: the new session holds the path before it.
    entry_id: str


class ForkResult(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str
    path: str
    selected_text: str


class UserMessagesResult(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    messages: list[dict[str, str]]


# --------------------------------------------------------------------- context


class BuildContextParams(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str
    leaf_id: str | None = None
    format: ContextFormat = "agent"
    context_window: ContextWindow | None = None


class BuildContextResult(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    # pi's AgentMessages ("agent") or provider messages ("llm"); stored messages
    # are their original JSON.
    messages: ContextMessagesJson
    thinking_level: str
    model: ModelRef | None
    # Ids of the entries the messages came from (the summary's is its compaction's).
    entry_ids: list[str]
    usage: Usage | None = None
    # Tool calls without results and results without calls (the agent form is
    # returned as pi builds it; this says what a provider would reject).
    warnings: list[str] = msgspec.field(default_factory=list)


class ContextUsageParams(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str
    context_window: ContextWindow | None = None


class TurnEndedParams(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str
    context_window: ContextWindow | None = None
    work_done_token: ProgressToken | None = None
    # The model the agent is using now (an overflow from another model is ignored).
    model: ModelRef | None = None


class CompactionSummaryInfo(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    entry_id: str
    reason: str
    tokens_before: int
    tokens_after: int
    # The summary was written in the background before the threshold was reached.
    prepared: bool = False


class AutoCompactionReport(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    """What became of the automatic compaction a turn called for (never an error).

    ``compacted``: written (``compaction`` has it). ``failed``: every summarizer
    failed, or an overflow right after an overflow compaction. ``skipped``: nothing
    to compact. ``cancelled``: a ``session_before_compact`` hook said cancel.
    ``aborted``: ``compaction/abort``, or a ``compaction/run`` that took over.
    ``paused``: the last compaction left the context over the threshold, so none is
    tried (``message`` says what to do). Nothing is written unless ``compacted``.
    """

    reason: Literal["threshold", "overflow"]
    outcome: Literal["compacted", "failed", "skipped", "cancelled", "aborted", "paused"]
    # pi's words: the failure, the skip reason, or "Compaction cancelled".
    message: str | None = None


class TurnEndedResult(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    action: Literal["none", "retry", "continue"]
    # With "continue": the message to send as the next user turn.
    prompt: str | None = None
    compaction: CompactionSummaryInfo | None = None
    # Set whenever the checks called for a compaction, whatever became of it.
    auto_compaction: AutoCompactionReport | None = None
    error_message: str | None = None
    pruned_entries: int = 0
    tokens_saved: int = 0
    usage: Usage | None = None


# --------------------------------------------------------------------- compaction


class PrepareCompactionParams(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str
    settings: dict[str, Any] | None = None
    # Include the messages themselves, not only their entry ids.
    include_messages: bool = False


class CompactionPreparationWire(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
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
    # With includeMessages (and in hooks): the messages, stored ones as their original JSON.
    messages_to_summarize: list[StoredMessageJson] | None = None
    turn_prefix_messages: list[StoredMessageJson] | None = None


class RunCompactionParams(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str
    work_done_token: ProgressToken | None = None
    custom_instructions: str | None = None
    # Commit this (reviewed) summary instead of asking a summarizer.
    summary: str | None = None
    # With ``summary``: refuse if the cut moved since ``compaction/prepare``.
    first_kept_entry_id: str | None = None
    settings: dict[str, Any] | None = None


class RunCompactionResult(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    entry: CompactionEntryJson
    tokens_before: int
    tokens_after: int
    from_extension: bool


class UndoCompactionParams(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str
    # The compaction the client means: ``conflict`` unless it is the context's newest.
    entry_id: str | None = None


class UndoCompactionResult(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    undone_entry_id: str
    # The ``custom`` entry appended under the compaction's parent, then the copies.
    marker_id: str
    copied_ids: list[str]
    # The entries copied, in the same order as ``copiedIds``.
    copied_from: list[str]
    # Entries after the compaction that were not copied (they stay on the old branch).
    skipped_ids: list[str]
    leaf_id: str
    usage: Usage


class CoveredParams(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str
    # A compaction entry.
    entry_id: str
    offset: Annotated[int, msgspec.Meta(ge=0)] = 0
    limit: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 1000


class CoveredResult(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    entry_id: str
    first_kept_entry_id: str
    # The compaction whose summary this one merged (its own range is asked separately).
    previous_compaction_id: str | None = None
    # A page of the ids of the entries the summary stands for, oldest first.
    entry_ids: list[str]
    total: int
    # Where the next page starts; absent on the last page.
    next_offset: int | None = None


class CloseResult(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    # False while other clients still have the session open.
    closed: bool


class AbortResult(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    aborted: bool


# --------------------------------------------------------------------- tree


class NavigateParams(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str
    target_id: str
    summarize: bool = False
    custom_instructions: str | None = None
    replace_instructions: bool = False
    label: str | None = None
    context_window: ContextWindow | None = None
    work_done_token: ProgressToken | None = None


class NavigateResult(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    cancelled: bool
    leaf_id: str | None
    aborted: bool = False
    editor_text: str | None = None
    summary_entry: BranchSummaryEntryJson | None = None


# --------------------------------------------------------------------- settings


class GetSettingsParams(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str | None = None


class UpdateSettingsParams(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str | None = None
    settings: dict[str, Any]


class SettingsResult(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    settings: dict[str, Any]
    warnings: list[str] = msgspec.field(default_factory=list)
