"""What the Unix socket and TCP transports share: the protocol of a socket, and accepting."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Callable
from typing import cast

from sessiond.jsonrpc.connection import Connection
from sessiond.jsonrpc.connection_limits import (
    OUTPUT_HIGH_WATER,
    OUTPUT_LOW_WATER,
    accept_fd_ceiling,
    open_file_limit,
)
from sessiond.jsonrpc.transports.acceptor import Acceptor
from sessiond.jsonrpc.transports.endpoint import ConnectionHost

# Connections the kernel queues before the daemon accepts them (asyncio's default).
LISTEN_BACKLOG = 100


class SocketProtocol(asyncio.Protocol):
    """One accepted socket: hands what it receives to its ``Connection``."""

    def __init__(self, host: ConnectionHost, kind: str, auth_token: str | None) -> None:
        self._host = host
        self._kind = kind
        self._auth_token = auth_token
        self._connection: Connection | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's are not asyncio.Transport subclasses: no isinstance).
        stream = cast(asyncio.Transport, transport)
        stream.set_write_buffer_limits(high=OUTPUT_HIGH_WATER, low=OUTPUT_LOW_WATER)
        peer = f"{self._kind} {_describe_peer(stream)}"
        self._connection = self._host.connect(stream, peer=peer, auth_token=self._auth_token)
        if self._connection is None:
            stream.abort()

    def data_received(self, data: bytes) -> None:
        if self._connection is not None:
            self._connection.feed(data)

    def eof_received(self) -> bool:
        if self._connection is not None:
            self._connection.end_of_input()
        return True  # keep the writing half open for the answers still due

    def connection_lost(self, exc: Exception | None) -> None:
        if self._connection is not None:
            self._connection.connection_lost(exc)

    def pause_writing(self) -> None:
        if self._connection is not None:
            self._connection.pause_writing()

    def resume_writing(self) -> None:
        if self._connection is not None:
            self._connection.resume_writing()


def _describe_peer(transport: asyncio.Transport) -> str:
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family == socket.AF_UNIX and hasattr(socket, "SO_PEERCRED"):
        with contextlib.suppress(OSError):
            creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            pid, uid, _ = struct.unpack("3i", creds)
            return f"pid {pid} uid {uid}"
    peer = transport.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer or "?")


def accept_connections(
    sock: socket.socket, protocol_factory: Callable[[], asyncio.Protocol]
) -> Acceptor:
    acceptor = Acceptor(sock, protocol_factory, fd_ceiling=accept_fd_ceiling(open_file_limit()))
    acceptor.start(asyncio.get_running_loop())
    return acceptor
