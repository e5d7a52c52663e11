"""Unix socket and TCP servers as processes: several clients, permissions, tokens, cleanup."""

from __future__ import annotations

import asyncio
import re
import signal
import socket
import stat
from pathlib import Path

import pytest

from tests.jsonrpc.harness import PlainClient
from tests.jsonrpc.wire_client import (
    LISTENING,
    ServerProcess,
    spawn_server,
    tcp_client,
    unix_client,
)

TOKEN_WRITTEN = re.compile(rb"token written to (\S+)")


async def listen(*args: str, env: dict[str, str] | None = None) -> tuple[ServerProcess, str]:
    server = await spawn_server(*args, env=env)
    match = await server.wait_for_stderr(LISTENING)
    return server, match.group(2).decode()


async def stop(server: ServerProcess) -> int:
    server.process.send_signal(signal.SIGTERM)
    return await server.wait()


# -- Unix socket -------------------------------------------------------------------------------------


async def test_two_clients_on_one_socket_each_with_its_own_session(tmp_path: Path) -> None:
    socket_path = tmp_path / "run" / "s.sock"
    server, address = await listen("--socket", str(socket_path))
    try:
        assert address == str(socket_path)
        first, second = await unix_client(address), await unix_client(address)
        # The second may not skip initialize just because the first did it.
        assert (await second.request("echo", {}))["error"]["code"] == -32002
        first_info = await first.initialize()
        second_info = await second.initialize()
        assert first_info["connectionId"] != second_info["connectionId"]
        # Interleaved in-flight requests are answered on the right connection.
        slow = first.start_request("sleep", {"seconds": 0.2})
        assert await second.result("echo", {"who": "second"}) == {"who": "second"}
        assert await first.result("notifyMe", {"count": 1}) == 1
        assert "result" in await first.answer(slow)
        assert [n["method"] for n in first.notifications] == ["test/event", "window/logMessage"]
        assert second.notifications == []
        first.close()
        await asyncio.sleep(0.1)
        assert await second.result("closedConnections") == [first_info["connectionId"]]
        assert await stop(server) == 0
    finally:
        await server.stop()
    assert not socket_path.exists(), "socket file left behind"


async def test_socket_and_its_directory_are_private(tmp_path: Path) -> None:
    socket_path = tmp_path / "new-dir" / "s.sock"
    server, _ = await listen("--socket", str(socket_path))
    try:
        assert stat.S_IMODE(socket_path.stat().st_mode) == 0o600
        assert stat.S_IMODE(socket_path.parent.stat().st_mode) == 0o700
    finally:
        await stop(server)


async def test_default_socket_is_in_the_runtime_directory(tmp_path: Path) -> None:
    server, address = await listen("--socket", env={"XDG_RUNTIME_DIR": str(tmp_path)})
    try:
        assert address == str(tmp_path / "sessiond" / "sessiond.sock")
        assert stat.S_IMODE((tmp_path / "sessiond").stat().st_mode) == 0o700
        client = await unix_client(address)
        await client.initialize()
    finally:
        await stop(server)


async def test_a_live_socket_is_not_clobbered_and_a_stale_one_is_replaced(tmp_path: Path) -> None:
    socket_path = tmp_path / "s.sock"
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(socket_path))
    stale.close()  # bound, never listening: stale
    server, _ = await listen("--socket", str(socket_path))
    try:
        rival = await spawn_server("--socket", str(socket_path))
        assert await rival.wait() == 2
        assert b"another server is listening" in rival.stderr
        client = await unix_client(str(socket_path))
        await client.initialize()  # the first server is untouched
    finally:
        await stop(server)


async def test_a_regular_file_is_never_replaced(tmp_path: Path) -> None:
    path = tmp_path / "not-a-socket"
    path.write_text("keep me")
    server = await spawn_server("--socket", str(path))
    assert await server.wait() == 2
    assert b"is not a socket" in server.stderr
    assert path.read_text() == "keep me"


# -- TCP -------------------------------------------------------------------------------------------


def host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


async def test_tcp_requires_the_token_from_the_environment() -> None:
    server, address = await listen("--tcp", "127.0.0.1:0", env={"SESSIOND_TOKEN": "t0k3n-abc"})
    try:
        for params in ({}, {"authToken": "wrong"}):
            intruder = await tcp_client(*host_port(address))
            answer = await intruder.request("initialize", params)
            assert answer["error"]["code"] == -32001
            assert answer["error"]["data"]["kind"] == "unauthorized"
            await asyncio.wait_for(intruder.closed, 2)
        client = await tcp_client(*host_port(address))
        assert (await client.request("echo", {}))["error"]["code"] == -32002
        await client.initialize(authToken="t0k3n-abc")
        assert await client.result("echo", {"ok": 1}) == {"ok": 1}
        assert await stop(server) == 0
    finally:
        await server.stop()
    assert b"t0k3n-abc" not in server.stderr


async def test_tcp_generates_a_private_token_file(tmp_path: Path) -> None:
    server, address = await listen("--tcp", "0", env={"XDG_RUNTIME_DIR": str(tmp_path)})
    try:
        token_path = Path((await server.wait_for_stderr(TOKEN_WRITTEN)).group(1).decode())
        assert token_path.parent == tmp_path / "sessiond"
        assert stat.S_IMODE(token_path.stat().st_mode) == 0o600
        token = token_path.read_text().strip()
        assert len(token) >= 32
        client = await tcp_client(*host_port(address))
        await client.initialize(authToken=token)
        assert await stop(server) == 0
    finally:
        await server.stop()
    assert token.encode() not in server.stderr
    assert not token_path.exists(), "token file left behind"


async def test_tcp_token_file_option(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("from-a-file\n")
    server, address = await listen("--tcp", "0", "--token-file", str(token_file))
    try:
        client = await tcp_client(*host_port(address))
        await client.initialize(authToken="from-a-file")
    finally:
        await stop(server)


async def test_tcp_refuses_a_non_loopback_host_unless_allowed() -> None:
    server = await spawn_server("--tcp", "0.0.0.0:0", env={"SESSIOND_TOKEN": "x"})
    assert await server.wait() == 2
    assert b"--allow-remote" in server.stderr


async def test_pygls_client_over_tcp() -> None:
    server, address = await listen("--tcp", "127.0.0.1:0", env={"SESSIOND_TOKEN": "pygls-tok"})
    client = PlainClient()
    try:
        await client.start_tcp(*host_port(address))
        send = client.protocol.send_request_async
        result = await asyncio.wait_for(send("initialize", {"authToken": "pygls-tok"}), 5)
        assert result["serverInfo"]["name"] == "example"
        assert await asyncio.wait_for(send("echo", {"via": "pygls"}), 5) == {"via": "pygls"}
        assert await asyncio.wait_for(send("shutdown"), 5) is None
        client.protocol.notify("exit")
        await asyncio.sleep(0.1)
    finally:
        await client.stop()
        await stop(server)


@pytest.mark.parametrize("text", ["nope", "1:2:x", "70000"])
def test_bad_tcp_addresses(text: str) -> None:
    from sessiond.jsonrpc import TransportError
    from sessiond.jsonrpc.options import parse_tcp_address

    with pytest.raises(TransportError):
        parse_tcp_address(text)


def test_tcp_address_forms() -> None:
    from sessiond.jsonrpc.options import parse_tcp_address

    assert parse_tcp_address("8123") == ("127.0.0.1", 8123)
    assert parse_tcp_address("localhost:9") == ("localhost", 9)
    assert parse_tcp_address("[::1]:10") == ("::1", 10)


def test_environment_token_is_removed_once_read() -> None:
    from sessiond.jsonrpc.transports.tcp_token import token_from_environment

    env = {"SESSIOND_TOKEN": " secret \n", "OTHER": "1"}
    assert token_from_environment(env) == "secret"
    assert env == {"OTHER": "1"}
