"""The messages of oh-my-pi's context: what each entry gives, the summary message, the
context notes, and an answer stripped of its unanswered tool calls."""

from __future__ import annotations

from typing import Any

import msgspec

from .context import iso_to_ms, message_of_entry
from .entries import (
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    Entry,
)
from .messages import (
    AnyMessage,
    AssistantMessage,
    CompactionSummaryMessage,
    CustomMessage,
    RedactedThinkingContent,
    ThinkingContent,
    ToolCall,
)
from .omp_turns import CONTEXT_NOTES_TYPE, DEFAULT_CUSTOM_TYPE, OmpPath, notes_text
from .templates import render


def message_of(entry: Entry) -> AnyMessage | None:
    """The message an entry gives in oh-my-pi's context, before the rules that look at
    the whole context: pi's, but a custom message is normalized as oh-my-pi reads one
    (an empty type is "custom-message"; an attribution other than "user" is "agent")."""
    if isinstance(entry, CustomMessageEntry):
        if entry.content is None:
            return None  # oh-my-pi gives no message for a custom message without content
        return CustomMessage(
            custom_type=entry.custom_type or DEFAULT_CUSTOM_TYPE,
            content=entry.content,
            display=entry.display,
            details=entry.details,
            attribution=None
            if entry.attribution is None
            else ("user" if entry.attribution == "user" else "agent"),
            timestamp=iso_to_ms(entry.timestamp),
        )
    return message_of_entry(entry)


def strip_calls(message: AnyMessage, removed: frozenset[str]) -> tuple[AnyMessage, tuple[int, ...]]:
    """An answer without the tool calls in ``removed`` and without redacted thinking, its
    thinking signatures cleared; and the positions of the blocks it keeps."""
    assert isinstance(message, AssistantMessage)
    kept: list[int] = []
    content: list[Any] = []
    for position, block in enumerate(message.content):
        if isinstance(block, RedactedThinkingContent):
            continue
        if isinstance(block, ToolCall) and block.id in removed:
            continue
        kept.append(position)
        if isinstance(block, ThinkingContent) and block.thinking_signature:
            content.append(msgspec.structs.replace(block, thinking_signature=None))
        else:
            content.append(block)
    return msgspec.structs.replace(message, content=content), tuple(kept)


def summary_message(
    compaction: CompactionEntry, path: OmpPath, at: int
) -> CompactionSummaryMessage:
    """oh-my-pi's summary message: pi's, with the compaction's display fields and replay
    payload (``at`` is the compaction's index in ``path``)."""
    payload: Any = openai_replay_payload(compaction.preserve_data)
    rewrite_at: int | None = None
    if payload is None:
        payload = anthropic_replay_payload(compaction.preserve_data)
        if payload is not None:
            rewrite_at = _history_rewrite_at(compaction, path, at)
    return CompactionSummaryMessage(
        summary=compaction.summary,
        tokens_before=compaction.tokens_before,
        timestamp=iso_to_ms(compaction.timestamp),
        short_summary=compaction.short_summary,
        provider_payload=payload,
        tokens_after=compaction.tokens_after,
        method=compaction.method,
        warning=compaction.warning,
        history_rewrite_at=rewrite_at,
    )


def first_index(path: OmpPath, entry_id: str | None, end: int) -> int:
    """The first index before ``end`` of an entry with that id, or -1."""
    if entry_id is None:
        return -1
    for index in range(end):
        if path.id_at(index) == entry_id:
            return index
    return -1


def _history_rewrite_at(compaction: CompactionEntry, path: OmpPath, at: int) -> int | None:
    """Just before the first entry the summary keeps (an Anthropic native replay must not
    make the kept answers' signed thinking look older than the summary)."""
    size = len(path)
    first_kept = first_index(path, compaction.first_kept_entry_id, size)
    retained = -1
    if 0 <= first_kept < at:
        retained = first_kept
    elif compaction.first_kept_entry_id == "" and compaction.provider_replay_through_entry_id:
        snapshot = first_index(path, compaction.provider_replay_through_entry_id, size)
        if 0 <= snapshot < at - 1:
            retained = snapshot + 1
    if retained < 0:
        retained = at + 1
    if retained >= size:
        return None
    ms = iso_to_ms(path.entry_at(retained).timestamp)
    return ms - 1 if ms is not None else None


def openai_replay_payload(preserve: dict[str, Any] | None) -> dict[str, Any] | None:
    """OpenAI's remote-compaction replacement history, as the summary message carries it."""
    candidate = (preserve or {}).get("openaiRemoteCompaction")
    if not isinstance(candidate, dict):
        return None
    provider, items = candidate.get("provider"), candidate.get("replacementHistory")
    if not isinstance(provider, str) or not provider:
        return None
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        return None
    return {"type": "openaiResponsesHistory", "provider": provider, "items": items}


def anthropic_replay_payload(preserve: dict[str, Any] | None) -> dict[str, Any] | None:
    """Anthropic's native compaction, as the summary message carries it."""
    candidate = (preserve or {}).get("anthropicCompaction")
    if not isinstance(candidate, dict):
        return None
    provider, content = candidate.get("provider"), candidate.get("content")
    if not isinstance(provider, str) or not provider or not isinstance(content, str) or not content:
        return None
    payload: dict[str, Any] = {
        "type": "anthropicCompaction",
        "provider": provider,
        "content": content,
    }
    for key in ("encryptedContent", "filesText"):
        value = candidate.get(key)
        if isinstance(value, str) and value:
            payload[key] = value
    return payload


def notes_message(entry: CustomEntry) -> CustomMessage:
    """The context notes, rendered for the model (sessiond's wording of the wrapper)."""
    text = notes_text(entry.data) or ""
    return CustomMessage(
        custom_type=CONTEXT_NOTES_TYPE,
        content=render("context/context-notes", notes=text).strip(),
        display=False,
        timestamp=iso_to_ms(entry.timestamp),
    )
