"""oh-my-pi 18's buildSessionContext: what its model sees at a leaf of one of its files.

pi's walk with oh-my-pi's rules on top (``/clear`` boundaries, the summary message's
fields, failed turns dropped, context notes first, unanswered tool calls stripped):
protocol/behaviour.md, "oh-my-pi's files". The thinking level and the model are
``core.omp_settings``'s. The rules are planned over an ``OmpPath`` (types, ids and a
``Turn`` per entry, no message bodies), in two steps: ``select`` picks the entries that
give messages (the store extends a selection as entries are appended, and selects again
only after a compaction, a ``/clear`` or a move of the leaf), ``finish`` applies the
rules that look at the whole context. The messages come from ``core.omp_messages``.
``omp_context_from_path`` is the reference over typed entries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from .context import SessionContext
from .entries import CompactionEntry, CustomEntry, Entry
from .omp_messages import (
    anthropic_replay_payload,
    first_index,
    message_of,
    notes_message,
    openai_replay_payload,
    strip_calls,
    summary_message,
)
from .omp_settings import OmpSettings, settings_of
from .omp_turns import CONTEXT_NOTES_TYPE, INTERRUPTED_THINKING, EntryOmpPath, OmpPath, notes_text

ROLLOVER_KIND: Final = "experimental-context-rollover"


@dataclass
class Selection:
    """The entries of a path that give the context's messages, before the rules that
    look at the whole context."""

    notes: int = -1  # path index of the context-notes entry put first, or -1
    summary: int = -1  # path index of the compaction whose summary leads, or -1
    kept_before: int = -1  # selected entries before this index predate the compaction
    entries: list[int] = field(default_factory=list)  # path indices, in message order


@dataclass
class OmpPlan:
    """Which entries make the context, in order; the messages come from them."""

    notes: int = -1
    summary: int = -1
    kept_before: int = -1
    emitted: list[int] = field(default_factory=list)
    # path index -> the tool calls removed from that answer
    stripped: dict[int, frozenset[str]] = field(default_factory=dict)
    # the call ids the selected tool results answer
    answered: set[str] = field(default_factory=set)


# ---------------------------------------------------------------- selecting


def select(path: OmpPath) -> Selection:
    """Which entries of ``path`` give messages (see the module's docstring)."""
    size = len(path)
    reset = compaction_at = -1
    for index in range(size):
        kind = path.type_at(index)
        if kind == "reset_boundary":
            reset = index
        elif kind == "compaction":
            compaction_at = index
    selection = Selection()
    compaction = path.entry_at(compaction_at) if compaction_at >= 0 else None
    if reset > compaction_at:
        _take(path, selection, range(reset + 1, size))
    elif isinstance(compaction, CompactionEntry):
        selection.summary = compaction_at
        selection.kept_before = compaction_at
        _take_compacted(path, selection, compaction, compaction_at, reset)
    else:
        _take(path, selection, range(size))
    selection.notes = _notes_index(path)
    return selection


def extend(path: OmpPath, selection: Selection, index: int) -> None:
    """``path[index]``, just appended at the end, joins the selection. (A compaction or a
    ``reset_boundary`` changes what the context starts with: select again.)"""
    if path.type_at(index) == "custom":
        entry = path.entry_at(index)
        if isinstance(entry, CustomEntry) and entry.custom_type == CONTEXT_NOTES_TYPE:
            text = notes_text(entry.data)
            if text is not None:
                selection.notes = index if text else -1
    elif path.turn_at(index) is not None:
        selection.entries.append(index)


def _take(path: OmpPath, selection: Selection, indices: range) -> None:
    for index in indices:
        if path.turn_at(index) is not None:
            selection.entries.append(index)


def _take_compacted(
    path: OmpPath, selection: Selection, compaction: CompactionEntry, at: int, reset: int
) -> None:
    size = len(path)
    first_kept = first_index(path, compaction.first_kept_entry_id, size)
    if isinstance(compaction.details, dict) and compaction.details.get("kind") == ROLLOVER_KIND:
        for index in range(at - 1, reset, -1):
            turn = path.turn_at(index)
            if turn is None or not turn.user_request:
                continue
            if index < first_kept:
                selection.entries.append(index)
            break
    replay_through = compaction.provider_replay_through_entry_id
    if openai_replay_payload(compaction.preserve_data) is None:
        kept_from = first_kept if 0 <= first_kept < at else -1
        native_snapshot = (
            replay_through
            and compaction.first_kept_entry_id == ""
            and anthropic_replay_payload(compaction.preserve_data) is not None
        )
        if kept_from < 0 and native_snapshot:
            snapshot = first_index(path, replay_through, size)
            kept_from = snapshot + 1 if snapshot >= 0 else -1
        if 0 <= kept_from < at:
            _take(path, selection, range(kept_from, at))
    elif replay_through:
        replayed = first_index(path, replay_through, size)
        if 0 <= replayed < at:
            _take(path, selection, range(replayed + 1, at))
    _take(path, selection, range(at + 1, size))


def _notes_index(path: OmpPath) -> int:
    """The latest valid notes entry with text, unless a reset comes after it."""
    for index in range(len(path) - 1, -1, -1):
        kind = path.type_at(index)
        if kind == "reset_boundary":
            return -1
        if kind != "custom":
            continue
        entry = path.entry_at(index)
        if isinstance(entry, CustomEntry) and entry.custom_type == CONTEXT_NOTES_TYPE:
            text = notes_text(entry.data)
            if text is not None:
                return index if text else -1
    return -1


# ---------------------------------------------------------------- the whole-context rules


def finish(path: OmpPath, selection: Selection) -> OmpPlan:
    """The plan: the selection with unanswered tool calls stripped and failed answers
    dropped (oh-my-pi's last two passes over its context)."""
    plan = OmpPlan(
        notes=selection.notes,
        summary=selection.summary,
        kept_before=selection.kept_before,
        emitted=list(selection.entries),
    )
    _strip_dangling_calls(path, plan)
    _drop_failed_turns(path, plan)
    return plan


def plan_context(path: OmpPath) -> OmpPlan:
    return finish(path, select(path))


def append_to_plan(path: OmpPath, plan: OmpPlan, index: int) -> bool:
    """Add ``path[index]``, just appended and selected, to a finished plan without running
    the whole-context rules again, when it changes nothing before it: a message that is
    not a tool result (which may answer an earlier call), not an interrupted-thinking
    note (which may keep the failed answer before it), and not a failed answer (the last
    message, which goes anyway). Returns False when the plan must be finished again."""
    turn = path.turn_at(index)
    if turn is None:
        return True
    if turn.role == "toolResult" or turn.custom_type == INTERRUPTED_THINKING:
        return False
    if turn.role == "assistant" and turn.failed:
        return True
    missing = frozenset(call for call in turn.call_ids if call not in plan.answered)
    if turn.role == "assistant" and missing:
        removed = sum(call in missing for call in turn.call_ids)
        if turn.blocks - removed - turn.redacted == 0:
            return True
        plan.stripped[index] = missing
    plan.emitted.append(index)
    return True


def _strip_dangling_calls(path: OmpPath, plan: OmpPlan) -> None:
    turns = [path.turn_at(index) for index in plan.emitted]
    answered = plan.answered = {
        turn.result_id
        for turn in turns
        if turn is not None and turn.role == "toolResult" and turn.result_id is not None
    }
    kept: list[int] = []
    for index, turn in zip(plan.emitted, turns, strict=True):
        assert turn is not None
        if turn.call_ids:
            missing = frozenset(call for call in turn.call_ids if call not in answered)
            if turn.role == "assistant" and missing:
                removed = sum(call in missing for call in turn.call_ids)
                if turn.blocks - removed - turn.redacted == 0:
                    continue
                plan.stripped[index] = missing
        kept.append(index)
    plan.emitted = kept


def _drop_failed_turns(path: OmpPath, plan: OmpPlan) -> None:
    emitted = plan.emitted
    position = len(emitted) - 1
    while position >= 0:
        turn = path.turn_at(emitted[position])
        assert turn is not None
        if turn.role != "assistant" or not turn.failed:
            position -= 1
            continue
        following = path.turn_at(emitted[position + 1]) if position + 1 < len(emitted) else None
        if (
            following is not None
            and following.role == "custom"
            and following.custom_type == INTERRUPTED_THINKING
        ):
            position -= 1
            continue
        gone = set(turn.call_ids) - plan.stripped.get(emitted[position], frozenset())
        del emitted[position]
        if gone:
            for later in range(len(emitted) - 1, position - 1, -1):
                result = path.turn_at(emitted[later])
                if result is not None and result.role == "toolResult" and result.result_id in gone:
                    del emitted[later]
        position -= 1


# ---------------------------------------------------------------- messages


def omp_context_from_path(path: Sequence[Entry]) -> SessionContext:
    """The reference: oh-my-pi's context for a root-first path of typed entries."""
    view = EntryOmpPath(path)
    return materialize(view, plan_context(view), settings_of(view))


def materialize(path: OmpPath, plan: OmpPlan, settings: OmpSettings) -> SessionContext:
    """The context a plan describes, with the thinking level and model of ``settings``."""
    context = SessionContext(
        messages=[], thinking_level=settings.thinking_level, model=settings.model
    )
    if plan.notes >= 0:
        notes = path.entry_at(plan.notes)
        assert isinstance(notes, CustomEntry)
        context.messages.append(notes_message(notes))
        context.entry_ids.append(notes.id)
    if plan.summary >= 0:
        compaction = path.entry_at(plan.summary)
        assert isinstance(compaction, CompactionEntry)
        context.messages.append(summary_message(compaction, path, plan.summary))
        context.entry_ids.append(compaction.id)
    for index in plan.emitted:
        message = message_of(path.entry_at(index))
        assert message is not None
        removed = plan.stripped.get(index)
        if removed is not None:
            message, kept = strip_calls(message, removed)
            context.kept_blocks[len(context.messages)] = kept
        context.messages.append(message)
        context.entry_ids.append(path.id_at(index))
    return context
