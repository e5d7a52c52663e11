"""Transports and the end of a connection: socket, TCP, process exit, crash, kill."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sessiond_client import (
    ConnectionClosedError,
    InvalidRequestError,
    SessiondClient,
    UnauthorizedError,
)
from sessiond_client import types as t
from tests.fake_provider import Answer, FakeProvider

from .conftest import Spawn
from .helpers import conversation, message, user, with_candidates


class Server:
    def __init__(self, process: asyncio.subprocess.Process, address: str) -> None:
        self.process = process
        self.address = address


async def _serve(env: dict[str, str], *args: str) -> Server:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sessiond", "serve", *args,
        env=env, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stderr is not None
    async with asyncio.timeout(10):
        while True:
            line = (await process.stderr.readline()).decode()
            assert line, "the server exited before listening"
            if "listening on" in line:
                return Server(process, line.rsplit(" ", 1)[-1].strip())


async def _stop(server: Server) -> int:
    if server.process.returncode is None:
        server.process.send_signal(signal.SIGTERM)
    code = await asyncio.wait_for(server.process.wait(), 10)
    return code


@pytest.fixture
async def socket_server(daemon_env: dict[str, str]) -> AsyncIterator[Server]:
    # A short directory: socket paths are limited to about 100 bytes.
    directory = tempfile.mkdtemp(prefix="sdc-")
    server = await _serve(daemon_env, "--socket", os.path.join(directory, "d.sock"))
    yield server
    assert await _stop(server) == 0
    assert not Path(server.address).exists()  # the daemon removed its socket
    os.rmdir(directory)


async def test_unix_socket_with_two_clients(socket_server: Server, project: str) -> None:
    async with (
        SessiondClient.connect_socket(socket_server.address) as writer,
        SessiondClient.connect_socket(socket_server.address) as reader,
    ):
        await writer.initialize(client_name="writer")
        await reader.initialize(client_name="reader")
        created = await writer.new_session(cwd=project, write_now=True)
        opened = await reader.open_session(created.path)
        assert opened.session_id == created.session_id
        changes = reader.notifications("session/changed")
        appended = await writer.append(created.session_id, [message(user("hello"))])
        note = await changes.wait_for(lambda n: True, timeout=5)
        assert note.params == t.SessionChanged(
            session_id=created.session_id,
            reason="append",
            leaf_id=appended.leaf_id,
            entry_count=1,
            appended_ids=appended.ids,
        )
        assert writer.transport.description == f"unix {socket_server.address}"
    assert not writer.is_open and not reader.is_open
    assert socket_server.process.returncode is None  # a socket daemon outlives its clients


async def test_tcp_needs_the_token(daemon_env: dict[str, str], project: str) -> None:
    server = await _serve({**daemon_env, "SESSIOND_TOKEN": "s3cret"}, "--tcp", "127.0.0.1:0")
    try:
        port = int(server.address.rsplit(":", 1)[1])
        async with SessiondClient.connect_tcp(port, token="s3cret") as client:
            result = await client.initialize()
            assert result.server_info.name == "sessiond"
            assert (await client.new_session(cwd=project)).session_id
        stranger = await SessiondClient.connect_tcp(port, token="wrong")
        with pytest.raises(UnauthorizedError) as refused:
            await stranger.initialize()
        assert refused.value.code == -32001
        # The daemon hangs up on a wrong token.
        with pytest.raises(ConnectionClosedError):
            await asyncio.wait_for(stranger.get_settings(), 5)
        await stranger.close()
    finally:
        assert await _stop(server) == 0


async def test_close_is_clean_and_leaves_no_process(spawn: Spawn, tmp_path: Path) -> None:
    log = tmp_path / "daemon.log"
    client = await spawn(stderr=log)
    await client.initialize()
    process = client.transport.process  # type: ignore[attr-defined]
    stream = client.notifications()
    await client.shutdown()
    with pytest.raises(InvalidRequestError, match="shutting down"):
        await client.get_settings()
    await client.close()  # only exit is left to send
    await client.close()  # idempotent
    assert process.returncode == 0  # shutdown then exit: LSP's clean exit
    with pytest.raises(ChildProcessError):
        os.waitpid(process.pid, os.WNOHANG)  # already reaped: not a zombie
    assert [n async for n in stream] == []  # streams end with the client
    with pytest.raises(ConnectionClosedError):
        await client.get_settings()
    assert "serving on stdio" in log.read_text(encoding="utf-8")


async def test_async_with_spawn_and_exit_without_initialize(daemon_env: dict[str, str]) -> None:
    async with SessiondClient.spawn(env=daemon_env) as client:
        process = client.transport.process  # type: ignore[attr-defined]
        assert client.is_open
    # No initialize, so no shutdown: the daemon exits with LSP's 1 after a bare exit.
    assert process.returncode == 1


async def test_a_daemon_that_does_not_exit_is_killed(spawn: Spawn) -> None:
    client = await spawn()
    await client.initialize()
    process = client.transport.process  # type: ignore[attr-defined]
    os.kill(process.pid, signal.SIGSTOP)  # frozen: it answers nothing, ignores SIGTERM
    # Only killing it ends the close: a frozen daemon never exits by itself.
    await asyncio.wait_for(client.close(timeout=0.3), 30)
    assert process.returncode == -signal.SIGKILL


async def test_a_crash_fails_waiting_requests_and_says_why(
    daemon_env: dict[str, str], project: str, provider: FakeProvider
) -> None:
    provider.responder = lambda body: Answer(hold=True)
    # No log file: stderr is drained by the client and its tail explains the exit.
    client = await SessiondClient.spawn(env=daemon_env)
    try:
        await client.initialize(settings=with_candidates(provider.candidate()))
        sid = (await client.new_session(cwd=project)).session_id
        await conversation(client, sid)
        ended = client.notifications()
        pending = asyncio.create_task(client.compact(sid))
        assert await asyncio.to_thread(provider.arrived.wait, 5)
        process = client.transport.process  # type: ignore[attr-defined]
        process.kill()
        with pytest.raises(ConnectionClosedError) as lost:
            await asyncio.wait_for(pending, 5)
        text = lost.value.message
        assert f"daemon (pid {process.pid}) exited with code -9" in text
        assert "serving on stdio" in text  # the stderr tail
        assert not client.is_open and client.failure is lost.value
        with pytest.raises(ConnectionClosedError) as after:
            await client.get_settings()
        assert after.value is lost.value
        # Streams end when the connection does, not only at close().
        assert [n.method async for n in ended] == ["compaction/started"]
    finally:
        await client.close()


async def test_close_cancels_what_is_still_running(
    spawn: Spawn, project: str, provider: FakeProvider
) -> None:
    provider.responder = lambda body: Answer(hold=True)
    client = await spawn()
    await client.initialize(settings=with_candidates(provider.candidate()))
    sid = (await client.new_session(cwd=project)).session_id
    await conversation(client, sid)
    running = asyncio.create_task(client.compact(sid))
    assert await asyncio.to_thread(provider.arrived.wait, 5)
    started = asyncio.get_running_loop().time()
    await client.close()
    # Not the daemon's 10 s wait for earlier requests before it answers shutdown (a bound
    # that tells the two apart, not a speed target: the close takes a fraction of a second).
    assert asyncio.get_running_loop().time() - started < 8
    with pytest.raises(ConnectionClosedError, match="closing"):
        await running
    assert client.transport.process.returncode == 0  # type: ignore[attr-defined]
