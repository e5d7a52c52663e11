"""What every transport shares: the server it serves, the open endpoint, ``Endpoint``."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from sessiond.jsonrpc.connection import ByteSink, Connection


class ConnectionHost(Protocol):
    """What a transport needs from the server: new connections, and a way to stop it."""

    def connect(self, sink: ByteSink, *, peer: str, auth_token: str | None) -> Connection | None:
        """A connection for a new client, or None when the server refuses it."""
        ...

    def request_shutdown(self, exit_code: int = 0) -> None: ...


@dataclass
class Listening:
    """An open endpoint. ``stop_accepting`` then ``cleanup`` when the server shuts down."""

    description: str
    stop_accepting: Callable[[], None] = lambda: None
    cleanup: Callable[[], Awaitable[None] | None] = lambda: None


class Endpoint(Protocol):
    async def open(self, host: ConnectionHost) -> Listening: ...


def announce(message: str) -> None:
    """A start-up line for the person or program that started the daemon: always on stderr."""
    print(f"sessiond: {message}", file=sys.stderr, flush=True)
