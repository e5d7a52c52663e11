"""Accepting socket connections without ever running the process out of file descriptors.

asyncio's own accept loop takes up to ``backlog`` connections per wake-up before anything
looks at them, so a crowd of strangers can exhaust the descriptors in one go (and asyncio
then stops accepting for a second, the token holder included). Here each accepted socket
is looked at straight away: one whose descriptor is near the limit is closed at once (the
kernel hands out the lowest free number, so a high one means the table is nearly full);
the others become transports, whose connection the server may still refuse or make room
for (``Admission``).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from collections.abc import Callable

log = logging.getLogger("sessiond.jsonrpc")

# Accepts per wake-up, so that other work interleaves with a flood of connections.
_BATCH = 16
# After the OS refused to accept (out of descriptors or memory), wait this long.
_RETRY_SECONDS = 0.5
_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class Acceptor:
    def __init__(
        self,
        sock: socket.socket,
        protocol_factory: Callable[[], asyncio.Protocol],
        *,
        fd_ceiling: int,
    ) -> None:
        """``sock`` is bound and listening; descriptors from ``fd_ceiling`` up are refused."""
        self._sock = sock
        self._protocol_factory = protocol_factory
        self._fd_ceiling = fd_ceiling
        self._loop: asyncio.AbstractEventLoop | None = None
        self._retry: asyncio.TimerHandle | None = None
        self._starting: set[asyncio.Task[None]] = set()
        self._closed = False
        sock.setblocking(False)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._retry = None
        if not self._closed:
            loop.add_reader(self._sock.fileno(), self._accept_ready)

    def close(self) -> None:
        """Stop accepting and close the listening socket."""
        if self._closed:
            return
        self._closed = True
        if self._retry is not None:
            self._retry.cancel()
        if self._loop is not None:
            self._loop.remove_reader(self._sock.fileno())
        self._sock.close()

    def _accept_ready(self) -> None:
        loop = self._loop
        assert loop is not None
        for _ in range(_BATCH):
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:
                continue
            except OSError as exc:
                if exc.errno not in _OUT_OF_RESOURCES:
                    log.warning("accepting a connection failed: %s", exc)
                    return
                log.warning("cannot accept connections now (%s); retrying shortly", exc.strerror)
                loop.remove_reader(self._sock.fileno())
                self._retry = loop.call_later(_RETRY_SECONDS, self.start, loop)
                return
            fd = conn.fileno()
            if fd >= self._fd_ceiling:
                log.warning("refused a connection: too many open files (descriptor %d)", fd)
                conn.close()
                continue
            conn.setblocking(False)
            task = loop.create_task(self._serve(loop, conn))
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)

    async def _serve(self, loop: asyncio.AbstractEventLoop, conn: socket.socket) -> None:
        try:
            await loop.connect_accepted_socket(self._protocol_factory, conn)
        except OSError as exc:
            log.info("a connection ended before it was served: %s", exc)
            conn.close()
