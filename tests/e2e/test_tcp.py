"""The daemon on loopback TCP: every client must present the token in ``initialize``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.e2e.conftest import private_root
from tests.e2e.support import (
    FAST_SETTINGS,
    AgentClient,
    Daemon,
    Wire,
    conversation,
    isolated_env,
    reopen,
    start_listening_daemon,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")
ROOT = private_root("tcp")
TOKEN = "e2e-token-7f3a9c"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def daemon() -> AsyncIterator[Daemon]:
    env = isolated_env(ROOT, FAST_SETTINGS, SESSIOND_TOKEN=TOKEN)
    running = await start_listening_daemon(ROOT, ["--tcp", "127.0.0.1:0"], env)
    yield running
    assert await running.stop() == 0, running.log_text()
    assert TOKEN not in running.log_text() and TOKEN not in "\n".join(running.stderr_lines)


def host_port(daemon: Daemon) -> tuple[str, int]:
    host, _, port = daemon.address.rpartition(":")
    return host, int(port)


async def raw_connection(daemon: Daemon) -> Wire:
    reader, writer = await asyncio.open_connection(*host_port(daemon))
    return Wire(reader, writer)


@pytest.mark.parametrize(
    "credentials",
    [{}, {"authToken": "not-the-token"}, {"authToken": ""}, {"authToken": TOKEN + "x"}],
    ids=["missing", "wrong", "empty", "longer"],
)
async def test_initialize_without_the_right_token_is_refused(
    daemon: Daemon, credentials: dict[str, str]
) -> None:
    wire = await raw_connection(daemon)
    try:
        answer = await wire.request(
            "initialize", {"clientInfo": {"name": "stranger"}, **credentials}
        )
        assert answer["error"]["code"] == -32001
        assert answer["error"]["data"]["kind"] == "unauthorized"
        assert TOKEN not in str(answer)
        # ... and the daemon hangs up.
        assert await wire.read_frame(timeout=5) is None
    finally:
        wire.writer.close()


async def test_nothing_is_served_before_the_token(daemon: Daemon) -> None:
    wire = await raw_connection(daemon)
    try:
        answer = await wire.request("session/list", {"cwd": "/"})
        assert answer["error"]["code"] == -32002
        init = await wire.result("initialize", {"clientInfo": {"name": "late"}, "authToken": TOKEN})
        assert init["protocolVersion"] == "1"
    finally:
        wire.writer.close()


async def test_essentials_with_the_token(daemon: Daemon) -> None:
    client = AgentClient("tcp-editor")
    await client.start_tcp(*host_port(daemon))  # pygls' own TCP client
    await client.initialize(authToken=TOKEN)
    created = await client.call("session/new", {"cwd": str(ROOT / "project")})
    sid, path = created["sessionId"], Path(created["path"])
    appended = await client.call(
        "session/append", {"sessionId": sid, "entries": conversation(2, words=10)}
    )
    changed = await client.wait_for("session/changed", lambda p: p["sessionId"] == sid)
    assert changed["appendedIds"] == appended["ids"]
    context = await client.call("context/build", {"sessionId": sid, "format": "agent"})
    assert context["entryIds"] == appended["ids"]
    usage = await client.call("context/usage", {"sessionId": sid, "contextWindow": 1000})
    assert usage["estimator"] == "chars" and usage["contextWindow"] == 1000
    await client.close()
    assert daemon.process.returncode is None
    store = reopen(path)
    assert [record.id for record in store.records()] == appended["ids"]
    store.close()


async def test_token_from_a_file() -> None:
    root = ROOT / "token-file"
    root.mkdir()
    token_file = root / "token"
    token_file.write_text("file-token-42\n")
    token_file.chmod(0o600)
    running = await start_listening_daemon(
        root,
        ["--tcp", "127.0.0.1:0", "--token-file", str(token_file)],
        isolated_env(root, FAST_SETTINGS),
    )
    try:
        wire = await raw_connection(running)
        refused = await wire.request("initialize", {"authToken": TOKEN})
        assert refused["error"]["code"] == -32001
        wire.writer.close()
        client = AgentClient("with-file-token")
        await client.start_tcp(*host_port(running))
        init = await client.initialize(authToken="file-token-42")
        assert init["serverInfo"]["name"] == "sessiond"
        await client.close()
    finally:
        assert await running.stop() == 0
