"""Appending pi 1.6's entries: context edits (with pi's checks), usage entries, system
messages, and a compaction's system checkpoint stamped with the entry's time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sessiond.core.context import iso_to_ms
from sessiond.core.entries import ContextEditEntry, UsageEntry
from sessiond.core.messages import AssistantMessage, TextContent
from sessiond.errors import InvalidEntryError, NotFoundError
from sessiond.store.session import SessionStore

from .helpers import assistant, user


def _system(text: str) -> dict[str, object]:
    return {"type": "message", "message": {"role": "system", "content": text}}


def test_context_edits_follow_pi16s_rules(tmp_path: Path) -> None:
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        u1, a1 = store.append_entries([user("first"), assistant("long answer")])
        sys_entry = store.append(_system("prompt"))
        with pytest.raises(NotFoundError):
            store.append({"type": "context_edit", "targetId": "nope", "replacement": None})
        with pytest.raises(InvalidEntryError, match="editable model content"):
            store.append({"type": "context_edit", "targetId": sys_entry.id, "replacement": None})
        with pytest.raises(InvalidEntryError, match="replacement"):
            store.append({"type": "context_edit", "targetId": u1.id})
        edit = store.append(
            {"type": "context_edit", "targetId": a1.id, "replacement": {"content": "short"}}
        )
        assert isinstance(edit, ContextEditEntry) and edit.replacement is not None
        # pi wraps a string replacing an answer's content in one text block
        assert edit.replacement.content == [TextContent(text="short")]
        store.append({"type": "context_edit", "targetId": u1.id, "replacement": None})
        context = store.build_context()
        assert context.entry_ids == [a1.id, sys_entry.id]
        answer = context.messages[0]
        assert isinstance(answer, AssistantMessage) and answer.content == [
            TextContent(text="short")
        ]
        # a target on another branch is refused
        store.branch(u1.id)
        with pytest.raises(InvalidEntryError, match="not on the active branch"):
            store.append({"type": "context_edit", "targetId": a1.id, "replacement": None})


def test_usage_entries_and_system_messages_add_what_pi16_adds(tmp_path: Path) -> None:
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        store.append_entries([user("go"), assistant("ok", input=900)])
        tokens = {"input": 0, "output": 0, "cacheRead": 5000, "cacheWrite": 0, "totalTokens": 5000}
        warm = store.append(
            {"type": "usage", "kind": "cache_warm", "provider": "p", "model": "m", "usage": tokens}
        )
        assert isinstance(warm, UsageEntry)
        store.append(_system("be brief"))
        context = store.build_context()
        assert [type(m).__name__ for m in context.messages] == [
            "UserMessage",
            "AssistantMessage",
            "SystemMessage",
        ]
        with pytest.raises(InvalidEntryError):
            store.append({"type": "usage", "kind": "x"})


def test_a_compaction_checkpoint_gets_the_entrys_time(tmp_path: Path) -> None:
    with SessionStore.create("/p", session_dir=tmp_path) as store:
        u1, _ = store.append_entries([user("go"), assistant("ok")])
        compaction = store.append(
            {
                "type": "compaction",
                "summary": "S",
                "firstKeptEntryId": u1.id,
                "tokensBefore": 10,
                "systemMessage": {"role": "system", "content": "prompt"},
            }
        )
        store.write_now()
        line = json.loads(store.path.read_text().splitlines()[-1])
        assert line["systemMessage"] == {
            "role": "system",
            "content": "prompt",
            "timestamp": iso_to_ms(compaction.timestamp),
        }
