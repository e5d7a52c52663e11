"""The server process: one endpoint, its connections, signals and an orderly shutdown.

Shutdown (a signal, the end of stdio, the parent's death, ``request_shutdown``) stops
accepting, gives running requests ``shutdown_grace_seconds``, closes every connection,
then awaits the daemon's ``on_shutdown`` before removing the socket or token file.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable
from typing import Any

from sessiond.jsonrpc.admission import Admission
from sessiond.jsonrpc.connection import ByteSink, Connection
from sessiond.jsonrpc.connection_limits import (
    RECEIVE_BUDGET_FRAMES,
    ConnectionLimits,
    open_file_limit,
)
from sessiond.jsonrpc.header_framing import DEFAULT_MAX_FRAME_BYTES
from sessiond.jsonrpc.receive_budget import ReceiveBudget
from sessiond.jsonrpc.router import Router
from sessiond.jsonrpc.transports import Endpoint, Listening

log = logging.getLogger("sessiond.jsonrpc")

_IDLE_POLL_SECONDS = 0.02


class RpcServer:
    def __init__(
        self,
        router: Router,
        *,
        on_shutdown: Callable[[], Awaitable[None]] | None = None,
        on_connection: Callable[[Connection], None] | None = None,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        limits: ConnectionLimits | None = None,
        shutdown_grace_seconds: float = 5.0,
    ) -> None:
        """``on_connection(conn)`` runs for each new client (register ``conn.on_close`` there);
        ``on_shutdown()`` runs once, after every connection has closed."""
        self.router = router
        self._on_shutdown = on_shutdown
        self._on_connection = on_connection
        self._max_frame_bytes = max_frame_bytes
        self._limits = limits or ConnectionLimits()
        self._admission: Admission[Connection] | None = None
        self._receive_budget = ReceiveBudget(RECEIVE_BUDGET_FRAMES * max_frame_bytes)
        self._grace = shutdown_grace_seconds
        self._connections: dict[int, Connection] = {}
        # Closed connections whose close callbacks may still be running.
        self._closed: list[Connection] = []
        self._next_id = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._stop_requested = False
        self._accepting = True
        self._hurry = False
        self._exit_code = 0

    @property
    def connections(self) -> list[Connection]:
        """The clients connected now, oldest first (hooks are asked in this order)."""
        return list(self._connections.values())

    def run(self, endpoint: Endpoint, *, loop_factory: Callable[[], Any] | None = None) -> int:
        """Serve until shut down; return the process exit code.

        ``loop_factory``: e.g. ``uvloop.new_event_loop`` (optional, not a dependency).
        """
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            return runner.run(self.serve(endpoint))

    async def serve(self, endpoint: Endpoint, *, handle_signals: bool = True) -> int:
        """Open ``endpoint`` and serve until shut down (for embedding in a running loop)."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._stop = asyncio.Event()
        if self._stop_requested:
            self._stop.set()
        installed = self._install_signal_handlers(loop) if handle_signals else []
        self._admission = self._admit_within(open_file_limit())
        try:
            listening = await endpoint.open(self)
            log.info("serving on %s", listening.description)
            try:
                await self._stop.wait()
            finally:
                await self._shut_down(listening)
        finally:
            for signum in installed:
                loop.remove_signal_handler(signum)
        return self._exit_code

    def request_shutdown(self, exit_code: int = 0) -> None:
        """Begin the orderly shutdown (the first caller's exit code wins)."""
        if self._stop_requested:
            return
        self._stop_requested = True
        self._exit_code = exit_code
        if self._stop is not None:
            self._stop.set()

    def connect(self, sink: ByteSink, *, peer: str, auth_token: str | None) -> Connection | None:
        """Called by a transport for each new client; None when it is refused."""
        assert self._loop is not None and self._admission is not None
        if not self._accepting:
            return None  # accepted just before the server stopped accepting
        verdict = self._admission.consider(self.connections, needs_token=auth_token is not None)
        if verdict.refusal is not None:
            log.warning("refused a connection (%s): %s", peer, verdict.refusal)
            return None
        if verdict.evict is not None:
            stranger = verdict.evict
            log.warning(
                "connection %d (%s): closed without a token to make room",
                stranger.id,
                stranger.peer,
            )
            stranger.abort()
        self._next_id += 1
        connection = Connection(
            self.router,
            sink,
            loop=self._loop,
            connection_id=self._next_id,
            peer=peer,
            max_frame_bytes=self._max_frame_bytes,
            auth_token=auth_token,
            on_finished=self._forget,
            receive_budget=self._receive_budget,
        )
        self._connections[connection.id] = connection
        log.info("connection %d opened (%s)", connection.id, peer)
        if self._on_connection is not None:
            try:
                self._on_connection(connection)
            except Exception:
                log.exception("on_connection callback failed")
        return connection

    def _admit_within(self, file_limit: int) -> Admission[Connection]:
        fitted = self._limits.fitted_to(file_limit)
        if fitted != self._limits:
            log.warning(
                "the open-file limit (%d) leaves room for %d connections, %d without a token",
                file_limit,
                fitted.max_connections,
                fitted.max_unauthenticated,
            )
        return Admission(fitted)

    def _forget(self, connection: Connection) -> None:
        self._connections.pop(connection.id, None)
        self._closed = [c for c in self._closed if not c.close_finished] + [connection]
        log.info("connection %d closed", connection.id)

    def _install_signal_handlers(self, loop: asyncio.AbstractEventLoop) -> list[int]:
        installed: list[int] = []
        for signum in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(signum, self._on_signal, signum)
            except (NotImplementedError, RuntimeError, ValueError):
                continue  # not the main thread, or no signals on this platform
            installed.append(signum)
        return installed

    def _on_signal(self, signum: int) -> None:
        if self._stop_requested:
            log.warning("%s again: not waiting for running requests", signal.Signals(signum).name)
            self._hurry = True
            return
        log.info("%s: shutting down", signal.Signals(signum).name)
        self.request_shutdown(0)

    async def _shut_down(self, listening: Listening) -> None:
        self._accepting = False
        listening.stop_accepting()
        await self._wait_for_idle_connections()
        for connection in list(self._connections.values()):
            connection.close()
        closing = [*self._closed, *self._connections.values()]
        await asyncio.gather(*(c.wait_closed() for c in closing), return_exceptions=True)
        if self._on_shutdown is not None:
            try:
                await self._on_shutdown()
            except Exception:
                log.exception("on_shutdown hook failed")
        try:
            outcome = listening.cleanup()
            if outcome is not None:
                await outcome
        except Exception:
            log.exception("cleaning up %s failed", listening.description)

    async def _wait_for_idle_connections(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._grace
        while not self._hurry and loop.time() < deadline:
            if not any(connection.busy for connection in self._connections.values()):
                return
            await asyncio.sleep(_IDLE_POLL_SECONDS)
