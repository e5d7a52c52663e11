"""Notifications reach callbacks and streams, typed, in order; opting out works."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgspec

from sessiond_client import Notification, SessiondClient
from sessiond_client import types as t
from sessiond_client.notifications import decode_notification

from .conftest import Connect
from .helpers import COMPACTABLE, conversation, message, user


async def test_callbacks_streams_and_unsubscribe(client: SessiondClient, project: str) -> None:
    seen: list[Notification] = []
    async_seen: list[str] = []

    async def slow_callback(notification: Notification) -> None:
        await asyncio.sleep(0)
        async_seen.append(notification.method)

    unsubscribe = client.subscribe(seen.append, ["session/changed"])
    client.subscribe(slow_callback)
    everything = client.notifications()
    sid = (await client.new_session(cwd=project)).session_id
    first = await client.append(sid, [message(user("one"))])
    unsubscribe()
    second = await client.append(sid, [message(user("two"))])
    await asyncio.sleep(0.05)

    assert [n.params.appended_ids for n in seen] == [first.ids]  # nothing after unsubscribe
    assert isinstance(seen[0].params, t.SessionChanged) and seen[0].params.entry_count == 1
    assert async_seen == ["session/changed", "session/changed"]
    streamed = everything.pending()
    assert [n.params.leaf_id for n in streamed] == [first.leaf_id, second.leaf_id]
    assert everything.pending() == []
    everything.close()
    assert [n async for n in everything] == []


async def test_compaction_notifications_and_opt_out(connect: Connect, project: str) -> None:
    client = await connect()
    await client.initialize(settings=COMPACTABLE, opt_out_notifications=["session/changed"])
    async with client.notifications() as stream:
        sid = (await client.new_session(cwd=project)).session_id
        await conversation(client, sid)
        done = await client.compact(sid)
        methods = [n.method for n in stream.pending()]
    assert "session/changed" not in methods
    assert methods == ["compaction/started", "compaction/ended"]
    stream_started = client.notifications("compaction/started", "compaction/ended")
    await client.append(sid, [message(user("after"))])
    await conversation(client, sid, turns=3)
    await client.compact(sid)
    started, ended = stream_started.pending()
    assert isinstance(started.params, t.CompactionStartedNotification)
    assert started.params.reason == "manual" and not started.params.will_retry
    assert isinstance(ended.params, t.CompactionEndedNotification)
    assert not ended.params.aborted and ended.params.entry_id is not None
    assert ended.params.entry_id != done.entry["id"]
    assert ended.params.tokens_before is not None and ended.params.tokens_after is not None


async def test_session_recovered_on_open(client: SessiondClient, project: str) -> None:
    created = await client.new_session(cwd=project, write_now=True)
    await client.append(created.session_id, [message(user("kept"))])
    await client.close_session(created.session_id)
    with Path(created.path).open("ab") as file:
        file.write(b'{"type":"message","id":"torn","parentId":nu')  # a crash mid-write
    recovered = client.notifications("session/recovered")
    opened = await client.open_session(created.path)
    assert opened.recovery is not None and opened.recovery.torn_tail is not None
    note = await recovered.wait_for(lambda n: True, timeout=5)
    assert isinstance(note.params, t.SessionRecovered)
    assert note.params.session_id == created.session_id
    assert note.params.recovery == opened.recovery
    assert opened.entry_count == 1


def test_decoding_of_standard_unknown_and_unexpected_params() -> None:
    log = decode_notification("window/logMessage", msgspec.Raw(b'{"type":2,"message":"careful"}'))
    assert log.params == t.LogMessageParams(type=2, message="careful")
    progress = decode_notification(
        "$/progress", msgspec.Raw(b'{"token":"x","value":{"kind":"report","message":"half"}}')
    )
    assert progress.params == t.ProgressParams(token="x", value=t.WorkDoneReport(message="half"))
    other = decode_notification("custom/thing", msgspec.Raw(b'{"a":[1]}'))
    assert other == Notification("custom/thing", {"a": [1]})
    # A newer daemon's shape is passed on as JSON rather than lost.
    odd = decode_notification("session/changed", msgspec.Raw(b'{"sessionId":1}'))
    assert odd.params == {"sessionId": 1}
    empty = decode_notification("custom/empty", msgspec.Raw())
    assert empty.params is None
