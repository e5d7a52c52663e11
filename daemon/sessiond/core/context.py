"""pi 1.6's buildSessionContext: what the model sees at a leaf.

Walk from the leaf to the root and project the path (``core.projection``): the
latest compaction's system checkpoint and summary, the entries it kept, everything
after it, each under its latest ``context_edit``. Thinking level and model are the
last ones set on the path (a later assistant message's model overrides a model_change).

This module is the reference: simple, over typed entries. The store keeps the
same result up to date incrementally for the current leaf (``store.leaf_view``)
and the tests check the two agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final, Protocol, TypeVar

import msgspec

from .entries import (
    Entry,
    MessageEntry,
    ModelChangeEntry,
    ThinkingLevelChangeEntry,
)
from .messages import AnyMessage, AssistantMessage
from .projection import (
    compaction_summary_message,
    iso_to_ms,
    message_of_entry,
    project_path,
)

__all__ = [
    "DEFAULT_THINKING_LEVEL",
    "ModelRef",
    "SessionContext",
    "build_session_context",
    "compaction_summary_message",
    "context_from_path",
    "empty_context",
    "iso_to_ms",
    "message_of_entry",
    "model_of_change",
    "path_to",
]


class ModelRef(msgspec.Struct, rename="camel", frozen=True):
    provider: str
    model_id: str


class SessionContext(msgspec.Struct, rename="camel"):
    """``{messages, thinkingLevel, model}``; ``entry_ids[i]`` produced ``messages[i]``;
    ``edited`` holds the indices of messages whose content a ``context_edit`` replaced.

    ``kept_blocks[i]``, when present, says that ``messages[i]`` is its entry's message
    with only the content blocks at those positions (oh-my-pi's files: an answer whose
    unanswered tool calls were removed, see ``core.omp_context``)."""

    messages: list[AnyMessage]
    thinking_level: str
    model: ModelRef | None
    entry_ids: list[str] = msgspec.field(default_factory=list)
    edited: set[int] = msgspec.field(default_factory=set)
    kept_blocks: dict[int, tuple[int, ...]] = msgspec.field(default_factory=dict)


class Unset:
    __slots__ = ()


UNSET: Final = Unset()
DEFAULT_THINKING_LEVEL: Final = "off"


def empty_context() -> SessionContext:
    return SessionContext(messages=[], thinking_level=DEFAULT_THINKING_LEVEL, model=None)


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
    leaf_id: str | Unset | None = UNSET,
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
    for entry in path:
        if isinstance(entry, ThinkingLevelChangeEntry):
            thinking_level = entry.thinking_level or DEFAULT_THINKING_LEVEL
        elif isinstance(entry, ModelChangeEntry):
            model = model_of_change(entry) or model
        elif isinstance(entry, MessageEntry) and isinstance(entry.message, AssistantMessage):
            model = ModelRef(entry.message.provider, entry.message.model)

    context = SessionContext(messages=[], thinking_level=thinking_level, model=model)
    for projected in project_path(path):
        for message in projected.messages:
            if projected.edited:
                context.edited.add(len(context.messages))
            context.messages.append(message)
            context.entry_ids.append(projected.entry.id)
    return context


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
