"""Test helpers: an in-process connection wired to a test client, and a plain pygls client."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lsprotocol.types import CancelNotification
from pygls.client import JsonRPCClient
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCProtocol,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    default_converter,
)

from sessiond.jsonrpc.connection import Connection
from sessiond.jsonrpc.router import Router
from tests.jsonrpc.example_server import router
from tests.jsonrpc.wire_client import WireClient


class MemorySink:
    """The server's side of an in-memory link: bytes go to the client on the next loop turn."""

    def __init__(self, deliver: Callable[[bytes], None], lost: Callable[[Exception | None], None]):
        self._deliver = deliver
        self._lost = lost
        self.written = bytearray()
        self.writes = 0
        self.closed = False
        self.aborted = False
        self.reading_paused = False

    def write(self, data: bytes) -> None:
        assert not self.closed, "write after close"
        self.written += data
        self.writes += 1
        asyncio.get_running_loop().call_soon(self._deliver, bytes(data))

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            asyncio.get_running_loop().call_soon(self._lost, None)

    def abort(self) -> None:
        self.aborted = True
        self.close()

    def pause_reading(self) -> None:
        self.reading_paused = True

    def resume_reading(self) -> None:
        self.reading_paused = False


@dataclass
class Link:
    connection: Connection
    client: WireClient
    sink: MemorySink


def make_link(rpc_router: Router = router, **connection_options: object) -> Link:
    loop = asyncio.get_running_loop()
    client = WireClient()
    sink = MemorySink(client.data_received, client.connection_lost)
    connection = Connection(rpc_router, sink, loop=loop, **connection_options)  # type: ignore[arg-type]

    def client_write(data: bytes) -> None:
        loop.call_soon(connection.feed, data)

    def client_close() -> None:
        loop.call_soon(connection.connection_lost, None)

    client.attach(client_write, client_close)
    return Link(connection, client, sink)


# -- a plain pygls client (for pytest-lsp) ----------------------------------------------------------


def plain_converter() -> Any:
    """pygls' converter, but params and results stay plain dicts (not namedtuples)."""
    converter = default_converter()
    for message_type in (JsonRPCRequestMessage, JsonRPCNotification):
        converter.register_structure_hook(message_type, _with_params)
    converter.register_structure_hook(JsonRPCResponseMessage, _keep_fields)
    return converter


def _keep_fields(data: dict[str, Any], message_type: type) -> Any:
    return message_type(**data)


def _with_params(data: dict[str, Any], message_type: type) -> Any:
    # JSON-RPC lets a request or notification omit params; pygls' types require the field.
    return message_type(**{"params": None, **data})


class PlainProtocol(JsonRPCProtocol):
    def get_message_type(self, method: str) -> Any:
        # pygls' own $/cancelRequest handling reads ``params.id``: give it its typed params.
        return CancelNotification if method == "$/cancelRequest" else None


class PlainClient(JsonRPCClient):
    """A generic pygls JSON-RPC client that records what the server sends it."""

    def __init__(self) -> None:
        super().__init__(protocol_cls=PlainProtocol, converter_factory=plain_converter)
        self.notifications: list[tuple[str, Any]] = []
        self.asked: list[Any] = []
