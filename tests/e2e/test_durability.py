"""What reaches the disk: flushing on shutdown and on SIGTERM, one writer per file.

Each test runs its own ``sessiond serve --stdio`` process, because each one ends it."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from pygls.exceptions import JsonRpcException

from sessiond.store.session import SessionStore
from tests.e2e.support import (
    SERVE,
    AgentClient,
    conversation,
    error_data,
    file_lines,
    isolated_env,
    reopen,
)

Start = Callable[..., Awaitable[AgentClient]]


@pytest.fixture
async def start(tmp_path: Path) -> AsyncIterator[Start]:
    """Start stdio daemons (each with its own directories) and initialize a client on each."""
    started: list[AgentClient] = []

    async def start_daemon(
        name: str = "durable", settings: dict[str, Any] | None = None
    ) -> AgentClient:
        root = tmp_path / name
        env = isolated_env(root, {"compaction": {"tokenEstimator": "chars"}, **(settings or {})})
        client = AgentClient(name)
        await client.start_io(*SERVE, "--stdio", "--log-file", str(root / "daemon.log"), env=env)
        started.append(client)
        await client.initialize()
        return client

    yield start_daemon
    for client in started:
        server = client._server
        if server is not None and server.returncode is None:
            server.kill()
            await server.wait()
        await client.stop()


# -- flushing --------------------------------------------------------------------------------------


async def test_appends_are_on_disk_after_shutdown(start: Start, tmp_path: Path) -> None:
    # A batch interval far longer than the test: only the shutdown can have flushed.
    client = await start(settings={"storage": {"fsync": "batch", "fsyncIntervalMs": 600000}})
    created = await client.call("session/new", {"cwd": str(tmp_path / "project")})
    sid, path = created["sessionId"], Path(created["path"])
    ids: list[str] = []
    for n in range(5):
        appended = await client.call(
            "session/append", {"sessionId": sid, "entries": conversation(1, words=8, tag=f"b{n}")}
        )
        ids += appended["ids"]
    assert await client.call("shutdown") is None
    assert [line.get("id") for line in file_lines(path)[1:]] == ids
    client.notify("exit")
    server = client._server
    assert server is not None
    assert await asyncio.wait_for(server.wait(), 10) == 0
    store = SessionStore.open(path)  # writable: the daemon let go of its lock
    assert [record.id for record in store.records()] == ids
    store.close()


async def test_sigterm_flushes_and_exits_cleanly(start: Start, tmp_path: Path) -> None:
    client = await start("terminated")
    created = await client.call("session/new", {"cwd": str(tmp_path / "project")})
    sid, path = created["sessionId"], Path(created["path"])
    appended = await client.call(
        "session/append", {"sessionId": sid, "entries": conversation(3, words=8)}
    )
    label = await client.call(
        "session/label", {"sessionId": sid, "targetId": appended["ids"][0], "label": "first"}
    )

    # A second daemon cannot take the file while the first holds it.
    other = await start("intruder")
    with pytest.raises(JsonRpcException) as locked:
        await other.call("session/open", {"path": str(path)})
    assert error_data(locked.value)["kind"] == "sessionLocked"
    owner = error_data(locked.value)["owner"]
    server = client._server
    assert server is not None
    assert owner["pid"] == server.pid
    assert f"pid {server.pid}" in locked.value.message

    server.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(server.wait(), 10) == 0
    assert [line.get("id") for line in file_lines(path)[1:]] == [*appended["ids"], label["entryId"]]
    assert not path.with_name(path.name + ".lock").exists()
    # Now the file is free for the other daemon.
    opened = await other.call("session/open", {"path": str(path)})
    assert opened["entryCount"] == 7 and "recovery" not in opened
    tree = await other.call("session/tree", {"sessionId": opened["sessionId"]})
    labels = {node["id"]: node.get("label") for node in tree["nodes"]}
    assert labels[appended["ids"][0]] == "first"


async def test_exit_without_shutdown_exits_with_1(start: Start, tmp_path: Path) -> None:
    client = await start("abrupt")
    created = await client.call("session/new", {"cwd": str(tmp_path / "p"), "writeNow": True})
    await client.call(
        "session/append",
        {"sessionId": created["sessionId"], "entries": conversation(1, words=3)},
    )
    client.notify("exit")
    server = client._server
    assert server is not None
    # LSP's rule: exit without a shutdown first is an error exit; nothing is lost.
    assert await asyncio.wait_for(server.wait(), 10) == 1
    assert len(file_lines(created["path"])) == 3
    reopen(created["path"]).close()
    assert json.loads(Path(created["path"]).read_text().splitlines()[0])["type"] == "session"
