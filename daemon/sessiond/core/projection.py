"""pi 1.6's session projection: which entries of a path make the context, and what each gives.

The latest compaction on the path comes first (its system checkpoint, if it has one,
then its summary), then the entries it kept (from ``firstKeptEntryId`` up to it,
system messages left out: the checkpoint replaces them), then everything after it.
An older compaction that lies in the kept range stays in the list but gives nothing.
Then every ``context_edit`` among those entries applies to its target, the latest
one per target winning: ``replacement: null`` omits the target, a replacement
changes its content only.

Context building, token estimates, cut points and compaction preparation all work
on this projection (pi 1.6's ``buildSessionProjection``), so an edit applies before
a cut point is chosen and before anything is summarized.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Final

import msgspec

from .entries import (
    BranchSummaryEntry,
    CompactionEntry,
    ContextEditEntry,
    ContextReplacement,
    CustomMessageEntry,
    Entry,
    MessageEntry,
    UnknownEntry,
)
from .messages import (
    AnyMessage,
    AssistantMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    SystemMessage,
    TextContent,
    ToolResultMessage,
    UnknownMessage,
    UserMessage,
)

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS: Final = timedelta(milliseconds=1)
# Roles whose content an edit replaces; other messages of an edited entry stay as they are.
EDITABLE_ROLES: Final = frozenset({"user", "assistant", "toolResult", "custom"})


@lru_cache(maxsize=4096)
def iso_to_ms(timestamp: str) -> int | None:
    """``new Date(iso).getTime()``; ``None`` where JavaScript would give NaN."""
    try:
        moment = datetime.fromisoformat(timestamp)
    except ValueError:
        return None
    if moment.tzinfo is None:
        # JavaScript reads a date-time without an offset as local time; sessions
        # always carry "Z", so this only matters for hand-written files.
        moment = moment.astimezone()
    return (moment - _EPOCH) // _ONE_MS


def compaction_summary_message(entry: CompactionEntry) -> CompactionSummaryMessage:
    return CompactionSummaryMessage(
        summary=entry.summary,
        tokens_before=entry.tokens_before,
        timestamp=iso_to_ms(entry.timestamp),
    )


def message_of_entry(entry: Entry) -> AnyMessage | None:
    """The one message a non-compaction entry contributes, if any (pi's "append" rule)."""
    if isinstance(entry, MessageEntry):
        return entry.message
    if isinstance(entry, CustomMessageEntry):
        return CustomMessage(
            custom_type=entry.custom_type,
            content=entry.content if entry.content is not None else [],
            display=entry.display,
            details=entry.details,
            attribution=entry.attribution,
            timestamp=iso_to_ms(entry.timestamp),
        )
    if isinstance(entry, BranchSummaryEntry):
        if not entry.summary:
            return None
        return BranchSummaryMessage(
            summary=entry.summary, from_id=entry.from_id, timestamp=iso_to_ms(entry.timestamp)
        )
    if isinstance(entry, UnknownEntry) and entry.type == "message":
        # A message sessiond cannot read as its role still goes to the agent as it is.
        message = entry.data.get("message")
        if isinstance(message, dict):
            role = message.get("role")
            return UnknownMessage(role if isinstance(role, str) else "", message)
    return None


def entry_messages(entry: Entry) -> list[AnyMessage]:
    """pi 1.6's ``sessionEntryToContextMessages``: what an entry adds to a context.

    A compaction gives its system checkpoint (when it has one) and its summary."""
    if isinstance(entry, CompactionEntry):
        summary = compaction_summary_message(entry)
        return [entry.system_message, summary] if entry.system_message else [summary]
    message = message_of_entry(entry)
    return [message] if message is not None else []


def replaced_content(message: AnyMessage, replacement: ContextReplacement) -> AnyMessage:
    """``message`` with its content replaced, when its role is one an edit changes.

    A string replacement becomes one text block for answers and tool results."""
    if not isinstance(message, (UserMessage, AssistantMessage, ToolResultMessage, CustomMessage)):
        return message
    content = replacement.content
    if isinstance(content, str) and isinstance(message, (AssistantMessage, ToolResultMessage)):
        return msgspec.structs.replace(message, content=[TextContent(text=content)])
    return msgspec.structs.replace(message, content=content)


def project_entry(entry: Entry, edit: ContextEditEntry | None) -> list[AnyMessage]:
    """pi 1.6's ``projectContextEntry``: an entry's messages under its latest edit."""
    messages = entry_messages(entry)
    if edit is None:
        return messages
    if edit.replacement is None:
        return []
    return [replaced_content(message, edit.replacement) for message in messages]


def is_system_message_entry(entry: Entry) -> bool:
    if isinstance(entry, MessageEntry):
        return isinstance(entry.message, SystemMessage)
    if isinstance(entry, UnknownEntry) and entry.type == "message":
        message = entry.data.get("message")
        return isinstance(message, dict) and message.get("role") == "system"
    return False


def context_positions(path: Sequence[Entry]) -> list[int]:
    """pi 1.6's ``buildContextEntries``, as positions in ``path``: the latest compaction,
    the entries it kept (system messages left out), then everything after it."""
    compaction_index = -1
    for index in range(len(path) - 1, -1, -1):
        if isinstance(path[index], CompactionEntry):
            compaction_index = index
            break
    if compaction_index < 0:
        return list(range(len(path)))
    compaction = path[compaction_index]
    assert isinstance(compaction, CompactionEntry)
    positions = [compaction_index]
    kept = False
    for index in range(compaction_index):
        entry = path[index]
        if entry.id == compaction.first_kept_entry_id:
            kept = True
        if kept and not is_system_message_entry(entry):
            positions.append(index)
    positions.extend(range(compaction_index + 1, len(path)))
    return positions


def latest_edits(entries: Iterable[Entry]) -> dict[str, ContextEditEntry]:
    """The latest ``context_edit`` per target among ``entries`` (in path order)."""
    edits: dict[str, ContextEditEntry] = {}
    for entry in entries:
        if isinstance(entry, ContextEditEntry):
            edits[entry.target_id] = entry
    return edits


@dataclass(frozen=True)
class ProjectedEntry:
    """One entry of the projection: its position on the path and the messages it gives."""

    position: int
    entry: Entry
    messages: list[AnyMessage]
    edited: bool


def project_path(path: Sequence[Entry]) -> list[ProjectedEntry]:
    """pi 1.6's ``buildSessionProjection`` over a root-first path."""
    positions = context_positions(path)
    edits = latest_edits(path[p] for p in positions)
    projected: list[ProjectedEntry] = []
    for order, position in enumerate(positions):
        entry = path[position]
        edit = edits.get(entry.id)
        if isinstance(entry, CompactionEntry) and order > 0:
            messages: list[AnyMessage] = []
        else:
            messages = project_entry(entry, edit)
        projected.append(ProjectedEntry(position, entry, messages, edit is not None))
    return projected
