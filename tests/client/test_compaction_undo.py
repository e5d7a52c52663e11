"""Taking a compaction back, and asking what a summary stands for."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessiond_client import (
    ConflictError,
    InvalidParamsError,
    NotFoundError,
    NothingToUndoError,
    SessiondClient,
)

from .conftest import Connect, Spawn
from .helpers import COMPACTABLE, conversation, message, tool_result, user
from .helpers import assistant as answer


async def compacted_session(
    client: SessiondClient, project: str
) -> tuple[str, str, list[str], Path]:
    """A session compacted once, with a turn and a label after the compaction: its id,
    the compaction's, the ids of the messages after it, and its file."""
    await client.initialize(settings=COMPACTABLE)
    created = await client.new_session(cwd=project, write_now=True)
    sid = created.session_id
    await conversation(client, sid)
    compaction = (await client.compact(sid)).entry["id"]
    later = await client.append(
        sid,
        [
            message(user("after the compaction")),
            message(answer("reading", tool_call="call_9")),
            message(tool_result("call_9", "print('hello')")),
            message(answer("done")),
        ],
    )
    await client.label(sid, later.ids[1], "the read")
    return sid, compaction, later.ids, Path(created.path)


async def test_undo_restores_the_context_and_keeps_what_came_after(
    connect: Connect, project: str
) -> None:
    client = await connect()
    sid, compaction, later, file = await compacted_session(client, project)
    label = (await client.tree(sid)).leaf_id
    before = file.read_bytes()
    changes = client.notifications("session/changed")

    undone = await client.undo_compaction(sid, entry_id=compaction)

    # Appended, never rewritten: the file as it was is a prefix of the file now.
    assert file.read_bytes().startswith(before)
    assert undone.undone_entry_id == compaction
    # The label names an entry that is copied: it stays on the old branch only.
    assert undone.copied_from == later and undone.skipped_ids == [label]
    assert undone.leaf_id == undone.copied_ids[-1]
    (changed,) = changes.pending()
    assert changed.params.reason == "undo"
    assert changed.params.appended_ids == [undone.marker_id, *undone.copied_ids]
    built = (await client.build_context(sid)).messages
    roles = [m["role"] for m in built]
    assert "compactionSummary" not in roles
    texts = [m["content"] for m in built if m["role"] == "user"]
    assert texts[0].startswith("question 0") and texts[-1] == "after the compaction"
    # The copies' answers carry no usage: it measured the compacted context.
    answers = [m for m in built if m["role"] == "assistant"]
    assert answers[-1]["usage"]["totalTokens"] == 0
    assert answers[0]["usage"]["totalTokens"] == 150
    # The compaction and the entries after it are still in the tree, on the old branch.
    assert (await client.entry(sid, compaction)).entry["type"] == "compaction"
    marker = (await client.entry(sid, undone.marker_id)).entry
    assert marker["type"] == "custom" and marker["customType"] == "sessiond.compactionUndone"
    assert marker["data"]["compactionId"] == compaction
    with pytest.raises(NothingToUndoError) as nothing:
        await client.undo_compaction(sid)
    assert nothing.value.code == -32023 and nothing.value.data["kind"] == "nothingToUndo"


async def test_the_undone_context_is_what_a_reopened_session_has(
    spawn: Spawn, project: str
) -> None:
    client = await spawn()
    sid, _, _, file = await compacted_session(client, project)
    undone = await client.undo_compaction(sid)
    await client.close()
    again = await spawn()
    await again.initialize()
    opened = await again.open_session(file)
    assert (await again.tree(opened.session_id)).leaf_id == undone.leaf_id
    roles = [m["role"] for m in (await again.build_context(opened.session_id)).messages]
    assert "compactionSummary" not in roles
    await again.close()


async def test_undo_refuses_a_compaction_that_is_not_the_newest(
    connect: Connect, project: str
) -> None:
    client = await connect()
    sid, compaction, _, _ = await compacted_session(client, project)
    leaf = (await client.tree(sid)).leaf_id
    with pytest.raises(ConflictError):
        await client.undo_compaction(sid, entry_id="not-it")
    assert (await client.tree(sid)).leaf_id == leaf
    await client.undo_compaction(sid, entry_id=compaction)


async def test_covered_names_the_entries_a_summary_stands_for(
    connect: Connect, project: str
) -> None:
    client = await connect()
    await client.initialize(settings=COMPACTABLE)
    sid = (await client.new_session(cwd=project)).session_id
    await conversation(client, sid)
    plan = await client.prepare_compaction(sid)
    first = (await client.compact(sid)).entry["id"]
    covered = await client.covered(sid, first)
    assert covered.entry_ids == plan.summarize_entry_ids and covered.total == len(
        plan.summarize_entry_ids
    )
    assert covered.previous_compaction_id is None and covered.next_offset is None
    read = await client.entries(sid, ids=covered.entry_ids)
    assert [e["id"] for e in read.entries] == covered.entry_ids
    page = await client.covered(sid, first, offset=1, limit=2)
    assert page.entry_ids == covered.entry_ids[1:3] and page.next_offset == 3

    await conversation(client, sid, turns=3)
    second = (await client.compact(sid)).entry["id"]
    again = await client.covered(sid, second)
    assert again.previous_compaction_id == first
    # The second summary stands for what the first kept and what came after it.
    assert again.entry_ids[0] == covered.first_kept_entry_id
    assert first not in again.entry_ids and not set(again.entry_ids) & set(covered.entry_ids)

    with pytest.raises(InvalidParamsError):
        await client.covered(sid, again.entry_ids[0])  # not a compaction
    with pytest.raises(NotFoundError):
        await client.covered(sid, "nope")
    with pytest.raises(InvalidParamsError):
        await client.covered(sid, first, limit=0)
