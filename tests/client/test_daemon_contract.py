"""Daemon behaviour the client's authors found wrong once, pinned down."""

from __future__ import annotations

import asyncio
import json

import pytest

from sessiond_client import InvalidParamsError, SessiondClient
from sessiond_client import types as t

from .conftest import Connect
from .helpers import COMPACTABLE, conversation, message, user


@pytest.mark.parametrize("window", [0, -5])
async def test_a_bad_context_window_is_refused_before_anything_is_written(
    connect: Connect, project: str, window: int
) -> None:
    client = await connect()
    await client.initialize(settings=COMPACTABLE)
    sid = (await client.new_session(cwd=project)).session_id
    await conversation(client, sid)
    before = (await client.entries(sid)).total
    for call in (
        lambda: client.turn_ended(sid, context_window=window),
        lambda: client.context_usage(sid, context_window=window),
        lambda: client.build_context(sid, context_window=window),
    ):
        with pytest.raises(InvalidParamsError, match="contextWindow"):
            await call()
    tree = await client.tree(sid)
    with pytest.raises(InvalidParamsError, match="contextWindow"):
        await client.navigate(sid, tree.root_ids[0], summarize=True, context_window=window)
    assert (await client.entries(sid)).total == before


async def test_progress_respects_the_opt_out(connect: Connect, project: str) -> None:
    client = await connect()
    await client.initialize(settings=COMPACTABLE, opt_out_notifications=["$/progress"])
    sid = (await client.new_session(cwd=project)).session_id
    await conversation(client, sid)
    reports: list[object] = []
    async with client.notifications("$/progress") as stream:
        await client.compact(sid, progress=reports.append)
        await asyncio.sleep(0.05)
        assert stream.pending() == [] and reports == []


async def test_settings_warnings_reach_the_client_log(connect: Connect, project: str) -> None:
    client = await connect()
    async with client.notifications("window/logMessage") as stream:
        await client.initialize(settings={"compaction": {"nonsense": 1}})
        note = await stream.wait_for(lambda n: n.method == "window/logMessage", timeout=5)
    assert isinstance(note.params, t.LogMessageParams)
    assert "compaction.nonsense" in note.params.message and note.params.type == 2


async def test_work_done_token_is_part_of_the_schema() -> None:
    from sessiond.api.schema import build_schema

    schema = build_schema()
    rows = {row["method"]: row for row in schema["messages"]}
    for method in ("compaction/run", "tree/navigate", "agent/turnEnded"):
        assert "workDoneToken" in schema["$defs"][rows[method]["params"]]["properties"]
    build = rows["context/build"]["result"]
    assert schema["$defs"][build]["properties"]["model"] != {}


async def test_close_result_is_typed(client: SessiondClient, project: str) -> None:
    sid = (await client.new_session(cwd=project)).session_id
    await client.append(sid, [message(user("x"))])
    closed = await client.close_session(sid)
    assert getattr(closed, "closed", closed) is True or closed == {"closed": True}


async def test_a_client_cannot_lift_the_allowed_roots(spawn, home, tmp_path) -> None:
    from sessiond_client import NotAllowedError, TrustedSettingError

    allowed = tmp_path / "allowed"
    settings_file = home / ".config" / "sessiond" / "settings.json"
    settings_file.write_text(
        json.dumps(
            {"compaction": {"tokenEstimator": "chars"}, "storage": {"allowedRoots": [str(allowed)]}}
        )
    )
    settings_file.chmod(0o600)
    client = await spawn()
    result = await client.initialize(settings={"storage": {"allowedRoots": None}})
    assert any("allowedRoots can only be set in the settings file" in w for w in result.warnings), (
        result.warnings
    )
    outside = tmp_path / "outside" / "s.jsonl"
    with pytest.raises(NotAllowedError):
        await client.new_session(cwd=str(tmp_path), path=outside)
    with pytest.raises(TrustedSettingError) as refused:
        await client.update_settings({"storage": {"allowedRoots": None}})
    assert refused.value.details["setting"] == "storage.allowedRoots"
    with pytest.raises(NotAllowedError):
        await client.new_session(cwd=str(tmp_path), path=outside)
    inside = await client.new_session(cwd=str(tmp_path), path=allowed / "s.jsonl")
    assert inside.path == str(allowed / "s.jsonl")


async def test_navigation_reports_every_entry_it_wrote(
    client: SessiondClient, project: str
) -> None:
    sid = (await client.new_session(cwd=project)).session_id
    ids = await conversation(client, sid, turns=2)
    async with client.notifications("session/changed") as stream:
        result = await client.navigate(sid, ids[1], summarize=True, label="here")
        note = await stream.wait_for(lambda n: n.method == "session/changed", timeout=5)
    summary_id = result.summary_entry["id"]
    assert note.params.reason == "navigate"
    assert note.params.appended_ids[0] == summary_id and len(note.params.appended_ids) == 2
    assert note.params.appended_ids[1] == result.leaf_id  # the label entry
    async with client.notifications("session/changed") as stream:
        await client.navigate(sid, result.leaf_id)  # already there: nothing changes
        await asyncio.sleep(0.1)
        assert stream.pending() == []


async def test_blank_names_are_refused(client: SessiondClient, project: str) -> None:
    sid = (await client.new_session(cwd=project)).session_id
    with pytest.raises(InvalidParamsError, match="name must not be empty"):
        await client.set_name(sid, "   ")
