"""pi 0.73's buildSessionContext: what the model sees at a leaf.

Walk from the leaf to the root; the latest compaction on that path contributes
its summary, then the kept entries from its ``firstKeptEntryId`` up to it, then
everything after it. Thinking level and model are the last ones set on the
path (pi 0.73: a later assistant message's model overrides a model_change).

This module is the reference: simple, over typed entries. The store keeps the
same result up to date incrementally for the current leaf (``store.leaf_view``)
and the tests check the two agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Final, Protocol, TypeVar

import msgspec

from .entries import (
    BranchSummaryEntry,
    CompactionEntry,
    CustomMessageEntry,
    Entry,
    MessageEntry,
    ModelChangeEntry,
    ThinkingLevelChangeEntry,
    UnknownEntry,
)
from .messages import (
    AnyMessage,
    AssistantMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    UnknownMessage,
)


class ModelRef(msgspec.Struct, rename="camel", frozen=True):
    provider: str
    model_id: str


class SessionContext(msgspec.Struct, rename="camel"):
    """``{messages, thinkingLevel, model}``; ``entry_ids[i]`` produced ``messages[i]``."""

    messages: list[AnyMessage]
    thinking_level: str
    model: ModelRef | None
    entry_ids: list[str] = msgspec.field(default_factory=list)


class _Unset:
    __slots__ = ()


UNSET: Final = _Unset()
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS: Final = timedelta(milliseconds=1)
DEFAULT_THINKING_LEVEL: Final = "off"


def empty_context() -> SessionContext:
    return SessionContext(messages=[], thinking_level=DEFAULT_THINKING_LEVEL, model=None)


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


class _Linked(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def parent_id(self) -> str | None: ...


LinkedT = TypeVar("LinkedT", bound=_Linked)


def path_to(leaf: LinkedT, by_id: Mapping[str, LinkedT]) -> list[LinkedT]:
    """Root-first path ending at ``leaf`` (entries or index records); stops at a
    missing parent or a cycle."""
    path = [leaf]
    seen = {leaf.id}
    parent_id = leaf.parent_id
    while parent_id is not None and parent_id not in seen:
        parent = by_id.get(parent_id)
        if parent is None:
            break
        path.append(parent)
        seen.add(parent_id)
        parent_id = parent.parent_id
    path.reverse()
    return path


def build_session_context(
    entries: Sequence[Entry],
    leaf_id: str | _Unset | None = UNSET,
    by_id: Mapping[str, Entry] | None = None,
) -> SessionContext:
    """pi's ``buildSessionContext(entries, leafId?, byId?)``.

    ``leaf_id=None`` gives the empty context; an unset or unknown leaf falls
    back to the last entry in file order.
    """
    if leaf_id is None:
        return empty_context()
    if by_id is None:
        by_id = {entry.id: entry for entry in entries}
    leaf = by_id.get(leaf_id) if isinstance(leaf_id, str) else None
    if leaf is None:
        if not entries:
            return empty_context()
        leaf = entries[-1]
    return context_from_path(path_to(leaf, by_id))


def context_from_path(path: Sequence[Entry]) -> SessionContext:
    """The context for a root-first path (the part of buildSessionContext after the walk)."""
    thinking_level = DEFAULT_THINKING_LEVEL
    model: ModelRef | None = None
    compaction_index = -1
    for index, entry in enumerate(path):
        if isinstance(entry, ThinkingLevelChangeEntry):
            thinking_level = entry.thinking_level or DEFAULT_THINKING_LEVEL
        elif isinstance(entry, ModelChangeEntry):
            model = model_of_change(entry) or model
        elif isinstance(entry, MessageEntry):
            if isinstance(entry.message, AssistantMessage):
                model = ModelRef(entry.message.provider, entry.message.model)
        elif isinstance(entry, CompactionEntry):
            compaction_index = index

    context = SessionContext(messages=[], thinking_level=thinking_level, model=model)
    if compaction_index < 0:
        for entry in path:
            _emit(context, entry)
        return context
    compaction = path[compaction_index]
    assert isinstance(compaction, CompactionEntry)
    context.messages.append(compaction_summary_message(compaction))
    context.entry_ids.append(compaction.id)
    kept = False
    for entry in path[:compaction_index]:
        if entry.id == compaction.first_kept_entry_id:
            kept = True
        if kept:
            _emit(context, entry)
    for entry in path[compaction_index + 1 :]:
        _emit(context, entry)
    return context


def _emit(context: SessionContext, entry: Entry) -> None:
    message = message_of_entry(entry)
    if message is not None:
        context.messages.append(message)
        context.entry_ids.append(entry.id)


def message_of_entry(entry: Entry) -> AnyMessage | None:
    """The message an entry contributes to the context, if any (pi's "append" rule)."""
    if isinstance(entry, MessageEntry):
        return entry.message
    if isinstance(entry, CustomMessageEntry):
        return CustomMessage(
            custom_type=entry.custom_type,
            content=entry.content,
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


def compaction_summary_message(entry: CompactionEntry) -> CompactionSummaryMessage:
    return CompactionSummaryMessage(
        summary=entry.summary,
        tokens_before=entry.tokens_before,
        timestamp=iso_to_ms(entry.timestamp),
    )


def model_of_change(entry: ModelChangeEntry) -> ModelRef | None:
    """pi writes provider + modelId; oh-my-pi writes "provider/modelId" and a role.

    Only oh-my-pi's default role names the session's model.
    """
    if entry.role not in (None, "default"):
        return None
    if entry.provider is not None and entry.model_id is not None:
        return ModelRef(entry.provider, entry.model_id)
    if entry.model:
        provider, _, model_id = entry.model.partition("/")
        return ModelRef(provider, model_id) if model_id else ModelRef("", provider)
    return None
