"""The JSON-RPC layer against a scripted peer, for what a healthy daemon never sends."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest

from sessiond_client import ProtocolError, SessiondClient
from sessiond_client.framing import encode_frame, read_frame
from sessiond_client.transport import Transport


class Peer:
    """The far end of a socket pair, speaking raw frames."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def send(self, message: dict[str, Any] | bytes) -> None:
        body = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.writer.write(encode_frame(body))

    async def receive(self) -> dict[str, Any]:
        body = await asyncio.wait_for(read_frame(self.reader), 5)
        assert body is not None
        decoded: dict[str, Any] = json.loads(body)
        return decoded


@pytest.fixture
async def pair() -> AsyncIterator[tuple[SessiondClient, Peer]]:
    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=ours)
    peer_reader, peer_writer = await asyncio.open_connection(sock=theirs)
    client = SessiondClient(Transport(reader, writer, "socketpair"))
    yield client, Peer(peer_reader, peer_writer)
    await client.close(timeout=0.5)
    peer_writer.close()


async def test_answers_to_the_peers_requests(pair: tuple[SessiondClient, Peer]) -> None:
    client, peer = pair
    started = asyncio.Event()

    async def echo(params: Any) -> Any:
        return {"echo": params}

    async def broken(params: Any) -> Any:
        raise ValueError("no good")

    async def forever(params: Any) -> Any:
        started.set()
        await asyncio.sleep(60)

    client.handle_request("test/echo", echo)
    client.handle_request("test/broken", broken)
    client.handle_request("test/forever", forever)
    peer.send({"jsonrpc": "2.0", "id": 1, "method": "test/echo", "params": [1, "ü"]})
    assert await peer.receive() == {"jsonrpc": "2.0", "id": 1, "result": {"echo": [1, "ü"]}}
    peer.send({"jsonrpc": "2.0", "id": "b", "method": "test/broken"})
    error = (await peer.receive())["error"]
    assert error["code"] == -32603 and error["message"] == "ValueError: no good"
    peer.send({"jsonrpc": "2.0", "id": 3, "method": "test/unknown"})
    assert (await peer.receive())["error"]["code"] == -32601
    peer.send({"jsonrpc": "2.0", "id": 4, "method": "test/forever"})
    await asyncio.wait_for(started.wait(), 5)
    peer.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 4}})
    assert await peer.receive() == {
        "jsonrpc": "2.0",
        "id": 4,
        "error": {"code": -32800, "message": "Request cancelled"},
    }
    client.handle_request("test/echo", None)
    peer.send({"jsonrpc": "2.0", "id": 5, "method": "test/echo"})
    assert (await peer.receive())["error"]["code"] == -32601


async def test_a_malformed_message_ends_the_connection_clearly(
    pair: tuple[SessiondClient, Peer],
) -> None:
    client, peer = pair
    waiting = asyncio.create_task(client.get_settings())
    request = await peer.receive()
    assert request["method"] == "settings/get" and request["params"] == {}
    peer.send(b"{not json")
    with pytest.raises(ProtocolError, match="malformed message") as broken:
        await asyncio.wait_for(waiting, 5)
    assert "{not json" in broken.value.message
    assert not client.is_open and client.failure is broken.value
    with pytest.raises(ProtocolError):
        await client.get_settings()


async def test_a_result_of_the_wrong_shape_fails_only_that_call(
    pair: tuple[SessiondClient, Peer],
) -> None:
    client, peer = pair
    waiting = asyncio.create_task(client.context_usage("s"))
    request = await peer.receive()
    peer.send({"jsonrpc": "2.0", "id": request["id"], "result": {"tokens": "many"}})
    with pytest.raises(ProtocolError, match="context/usage: unexpected result"):
        await asyncio.wait_for(waiting, 5)
    assert client.is_open
