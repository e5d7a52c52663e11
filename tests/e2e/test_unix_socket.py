"""The daemon on a Unix socket: the essentials, and several clients sharing a session."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.e2e.conftest import private_root
from tests.e2e.support import (
    FAST_SETTINGS,
    AgentClient,
    Daemon,
    Wire,
    assistant,
    conversation,
    file_lines,
    isolated_env,
    reopen,
    start_listening_daemon,
    user,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")
ROOT = private_root("unix")
SOCKET = ROOT / "run" / "sessiond.sock"

Connect = Callable[..., Awaitable[AgentClient]]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def daemon() -> AsyncIterator[Daemon]:
    SOCKET.parent.mkdir(mode=0o700)
    running = await start_listening_daemon(
        ROOT, ["--socket", str(SOCKET)], isolated_env(ROOT, FAST_SETTINGS)
    )
    yield running
    assert await running.stop() == 0, running.log_text()
    assert not SOCKET.exists(), "the daemon removes its socket when it stops"


@pytest_asyncio.fixture(loop_scope="module")
async def connect(daemon: Daemon) -> AsyncIterator[Connect]:
    """Open initialized clients on the daemon's socket; drops them after the test."""
    opened: list[AgentClient] = []

    async def open_client(name: str, **initialize: Any) -> AgentClient:
        client = AgentClient(name)
        await client.start_unix(daemon.address)
        opened.append(client)
        await client.initialize(**initialize)
        return client

    yield open_client
    for client in opened:
        if not client.stopped:
            await client.disconnect()


async def test_essentials_over_the_socket(daemon: Daemon, connect: Connect) -> None:
    assert daemon.address == str(SOCKET)
    assert stat.S_IMODE(os.stat(SOCKET).st_mode) == 0o600
    client = await connect("editor")
    created = await client.call("session/new", {"cwd": str(ROOT / "project"), "writeNow": True})
    sid, path = created["sessionId"], Path(created["path"])
    assert created["persisted"] is True and path.exists()
    appended = await client.call(
        "session/append", {"sessionId": sid, "entries": conversation(2, words=10)}
    )
    assert len(appended["ids"]) == 4
    context = await client.call("context/build", {"sessionId": sid, "format": "llm"})
    assert [m["role"] for m in context["messages"]] == ["user", "assistant"] * 2
    entries = await client.call("session/entries", {"sessionId": sid})
    assert [e["id"] for e in entries["entries"]] == appended["ids"]
    assert entries["total"] == 4
    listed = await client.call("session/list", {"cwd": str(ROOT / "project")})
    assert [s["sessionId"] for s in listed["sessions"]] == [sid]
    assert await client.call("session/close", {"sessionId": sid}) == {"closed": True}

    # exit ends this connection only; the daemon goes on serving new ones.
    await client.close()
    assert daemon.process.returncode is None
    again = await connect("editor-again")
    reopened = await again.call("session/open", {"path": str(path)})
    assert reopened["sessionId"] == sid and reopened["entryCount"] == 4
    assert reopened["leafId"] == appended["ids"][-1]
    assert "recovery" not in reopened


async def test_each_connection_initializes_for_itself(daemon: Daemon, connect: Connect) -> None:
    await connect("first")
    reader, writer = await asyncio.open_unix_connection(daemon.address)
    raw = Wire(reader, writer)
    try:
        refused = await raw.request("session/list", {"cwd": "/"})
        assert refused["error"]["code"] == -32002
        init = await raw.result(
            "initialize",
            {
                "clientInfo": {"name": "raw"},
                "protocolVersion": "9",
                "settings": {"compaction": {"keepRecentTokenz": 5, "reserveTokens": -1}},
            },
        )
        assert init["serverInfo"]["name"] == "sessiond"
        # A client's bad settings are its own warnings, and the rest still applies.
        warnings = "\n".join(init["warnings"])
        assert "compaction.keepRecentTokenz: unknown setting" in warnings
        assert "compaction.reserveTokens" in warnings
        assert "protocol 9" in warnings
        listed = await raw.result("session/list", {"cwd": str(ROOT / "nowhere")})
        assert listed == {"sessions": []}
        again = await raw.request("initialize", {"clientInfo": {"name": "raw"}})
        assert again["error"]["code"] == -32600
    finally:
        writer.close()


async def test_two_clients_share_a_session(daemon: Daemon, connect: Connect) -> None:
    # Each connection brings its own capabilities and settings.
    editor = await connect(
        "editor",
        hooks=["session_compact"],
        settings={"compaction": {"keepRecentTokens": 111}},
    )
    agent = await connect("agent", settings={"compaction": {"keepRecentTokens": 222}})
    created = await agent.call("session/new", {"cwd": str(ROOT / "shared"), "writeNow": True})
    sid, path = created["sessionId"], created["path"]
    opened = await editor.call("session/open", {"path": path})
    assert opened["sessionId"] == sid

    appended = await agent.call(
        "session/append", {"sessionId": sid, "entries": conversation(3, words=30)}
    )
    for client in (agent, editor):
        seen = await client.wait_for(
            "session/changed", lambda p: p["sessionId"] == sid and p["reason"] == "append"
        )
        assert seen["appendedIds"] == appended["ids"]
        assert seen["leafId"] == appended["ids"][-1] and seen["entryCount"] == 6

    mine = await editor.call("settings/get", {})
    theirs = await agent.call("settings/get", {})
    assert mine["settings"]["compaction"]["keepRecentTokens"] == 111
    assert theirs["settings"]["compaction"]["keepRecentTokens"] == 222

    # The agent compacts with a reviewed summary: both hear of it, only the editor,
    # which declared session_compact, gets the hook notification.
    run = await agent.call(
        "compaction/run",
        {
            "sessionId": sid,
            "summary": "Reviewed summary.",
            "settings": {"compaction": {"keepRecentTokens": 50}},
        },
    )
    assert run["entry"]["type"] == "compaction"
    for client in (agent, editor):
        ended = await client.wait_for("compaction/ended", lambda p: p["sessionId"] == sid)
        assert ended["entryId"] == run["entry"]["id"]
    hook = await editor.wait_for("hooks/session_compact")
    assert hook["compactionEntry"]["id"] == run["entry"]["id"]
    assert agent.received("hooks/session_compact") == []

    # The agent goes away without a word; the session stays open for the editor.
    await agent.disconnect()
    more = await editor.call(
        "session/append", {"sessionId": sid, "entries": [user("still here?"), assistant("yes")]}
    )
    assert more["leafId"] == more["ids"][-1]
    path_entries = await editor.call("session/path", {"sessionId": sid})
    assert [e["id"] for e in path_entries["entries"]][-2:] == more["ids"]
    later = await editor.wait_for(
        "session/changed", lambda p: p["sessionId"] == sid and p.get("appendedIds") == more["ids"]
    )
    assert later["entryCount"] == 9
    assert [line.get("id") for line in file_lines(path)][-2:] == more["ids"]
    assert await editor.call("session/close", {"sessionId": sid}) == {"closed": True}
    store = reopen(path)
    assert store.entry_count == 9
    store.close()


async def test_overflow_compacts_and_asks_for_a_retry_once(connect: Connect) -> None:
    agent = await connect("overflowing", settings={"compaction": {"keepRecentTokens": 100}})
    created = await agent.call("session/new", {"cwd": str(ROOT / "overflow")})
    sid = created["sessionId"]
    await agent.call("session/append", {"sessionId": sid, "entries": conversation(4, words=30)})
    too_long = assistant("", stop_reason="error")
    too_long["message"]["errorMessage"] = "prompt is too long: 212000 tokens > 200000 maximum"
    await agent.call("session/append", {"sessionId": sid, "entries": [too_long]})
    model = {"provider": "fake", "modelId": "agent-model"}
    first = await agent.call(
        "agent/turnEnded", {"sessionId": sid, "contextWindow": 200000, "model": model}
    )
    assert first["action"] == "retry"
    assert first["compaction"]["reason"] == "overflow"
    started = await agent.wait_for("compaction/started", lambda p: p["sessionId"] == sid)
    assert started["reason"] == "overflow" and started["willRetry"] is True
    ended = await agent.wait_for("compaction/ended", lambda p: p["sessionId"] == sid)
    assert ended["willRetry"] is True and ended["entryId"] == first["compaction"]["entryId"]

    # The retry overflows again: pi gives up after one compact-and-retry.
    again = assistant("", stop_reason="error")
    again["message"]["errorMessage"] = "prompt is too long: 205000 tokens > 200000 maximum"
    await agent.call("session/append", {"sessionId": sid, "entries": [again]})
    second = await agent.call(
        "agent/turnEnded", {"sessionId": sid, "contextWindow": 200000, "model": model}
    )
    assert second["action"] == "none" and "compaction" not in second
    assert second["errorMessage"].startswith(
        "Context overflow recovery failed after one compact-and-retry attempt."
    )
    gave_up = await agent.wait_for(
        "compaction/ended", lambda p: p["sessionId"] == sid and "errorMessage" in p
    )
    assert gave_up["errorMessage"] == second["errorMessage"]
    assert gave_up["aborted"] is False and gave_up["willRetry"] is False


async def test_notifications_follow_subscriptions_and_opt_outs(connect: Connect) -> None:
    owner = await connect("owner")
    quiet = await connect("quiet", opt_out=["session/changed"])
    leaver = await connect("leaver")
    created = await owner.call("session/new", {"cwd": str(ROOT / "subs"), "writeNow": True})
    sid, path = created["sessionId"], created["path"]
    for other in (quiet, leaver):
        assert (await other.call("session/open", {"path": path}))["sessionId"] == sid
    assert await leaver.call("session/close", {"sessionId": sid}) == {"closed": False}

    appended = await owner.call(
        "session/append", {"sessionId": sid, "entries": conversation(3, words=20)}
    )
    await owner.wait_for("session/changed", lambda p: p.get("appendedIds") == appended["ids"])
    run = await owner.call(
        "compaction/run",
        {
            "sessionId": sid,
            "summary": "Short.",
            "settings": {"compaction": {"keepRecentTokens": 20}},
        },
    )
    ended = await quiet.wait_for("compaction/ended", lambda p: p["sessionId"] == sid)
    assert ended["entryId"] == run["entry"]["id"]
    await owner.wait_for("compaction/ended", lambda p: p["sessionId"] == sid)
    assert quiet.received("session/changed") == [], "quiet opted out of session/changed"
    assert leaver.received("session/changed", sid) == [], "leaver closed the session"
    assert leaver.received("compaction/ended", sid) == []
