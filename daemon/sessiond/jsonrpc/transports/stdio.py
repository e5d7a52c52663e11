"""``--stdio``: one client, the parent process, on stdin and stdout."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import selectors
import sys
from collections.abc import Callable
from dataclasses import dataclass

from sessiond.jsonrpc.connection import Connection
from sessiond.jsonrpc.connection_limits import OUTPUT_HIGH_WATER, OUTPUT_LOW_WATER
from sessiond.jsonrpc.transports.endpoint import ConnectionHost, Listening

log = logging.getLogger("sessiond.jsonrpc")

_PARENT_AT_IMPORT = os.getppid()


class _StdinProtocol(asyncio.Protocol):
    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    def data_received(self, data: bytes) -> None:
        self._connection.feed(data)

    def eof_received(self) -> None:
        self._connection.end_of_input()

    def connection_lost(self, exc: Exception | None) -> None:
        # The read side ends after EOF too; only the end of input matters here.
        self._connection.end_of_input()


class _StdoutProtocol(asyncio.BaseProtocol):
    def __init__(self) -> None:
        self.connection: Connection | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        # Closed by us once everything was written, or by the client: either way, done.
        if not self.closed.done():
            self.closed.set_result(None)
        if self.connection is not None:
            self.connection.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.connection is not None:
            self.connection.pause_writing()

    def resume_writing(self) -> None:
        if self.connection is not None:
            self.connection.resume_writing()


class _StdioSink:
    """Writes to stdout; pauses and closes stdin's reader too."""

    def __init__(
        self,
        write: Callable[[bytes], None],
        close_writer: Callable[[], None],
        abort_writer: Callable[[], None],
    ) -> None:
        self._write = write
        self._close_writer = close_writer
        self._abort_writer = abort_writer
        self.reader: asyncio.ReadTransport | None = None
        # For a stdin the loop cannot poll (read on a thread): set while reading may go on.
        self.reading_allowed = asyncio.Event()
        self.reading_allowed.set()

    def write(self, data: bytes) -> None:
        self._write(data)

    def close(self) -> None:
        self._close_writer()
        self._close_reader()

    def abort(self) -> None:
        self._abort_writer()
        self._close_reader()

    def _close_reader(self) -> None:
        if self.reader is not None:
            self.reader.close()

    def pause_reading(self) -> None:
        self.reading_allowed.clear()
        if self.reader is not None and self.reader.is_reading():
            self.reader.pause_reading()

    def resume_reading(self) -> None:
        self.reading_allowed.set()
        if self.reader is not None and not self.reader.is_reading():
            self.reader.resume_reading()


@dataclass
class StdioEndpoint:
    """``--stdio``: one client, the parent process, on stdin/stdout.

    Nothing else may write to stdout, so file descriptor 1 is pointed at stderr (a stray
    ``print`` lands in the log, not in the protocol stream) and fd 0 at /dev/null. The
    server stops when stdin ends, when the client sends ``exit``, or when the parent
    process dies (checked every ``parent_poll_seconds``).
    """

    parent_poll_seconds: float = 1.0
    # The parent to watch; by default the one this module saw at import (as early as can be,
    # so a parent that dies while the daemon is still starting is not missed).
    parent_pid: int | None = None

    async def open(self, host: ConnectionHost) -> Listening:
        loop = asyncio.get_running_loop()
        in_fd, out_fd = _take_stdio()
        # The transports make these non-blocking, which a terminal shared with the shell
        # must not stay; spare copies let cleanup undo it after the transports closed theirs.
        spares = [os.dup(fd) for fd in (in_fd, out_fd) if os.get_blocking(fd)]
        sink, writer_protocol = await _open_stdout(loop, out_fd)
        connection = host.connect(sink, peer="stdio", auth_token=None)
        assert connection is not None, "the only client is never refused"
        if writer_protocol is not None:
            writer_protocol.connection = connection
        sink.reader = await _open_stdin(loop, in_fd, connection, sink)
        connection.on_close(lambda conn: host.request_shutdown(conn.exit_code))
        parent = self.parent_pid if self.parent_pid is not None else _PARENT_AT_IMPORT
        stop_watching = _watch_parent(loop, host, parent, self.parent_poll_seconds)

        async def cleanup() -> None:
            stop_watching()
            if writer_protocol is not None:
                # Let the last answers drain to the client before the process ends.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(writer_protocol.closed), 5.0)
            for fd in spares:
                with contextlib.suppress(OSError):
                    os.set_blocking(fd, True)
                os.close(fd)

        return Listening("stdio", cleanup=cleanup)


def _take_stdio() -> tuple[int, int]:
    """Private copies of fds 0 and 1; fd 1 then points at stderr and fd 0 at /dev/null."""
    sys.stdout.flush()
    in_fd = os.dup(0)
    out_fd = os.dup(1)
    os.dup2(2, 1)
    null_fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null_fd, 0)
    os.close(null_fd)
    return in_fd, out_fd


def _pollable(fd: int, event: int) -> bool:
    """Whether the event loop can watch ``fd`` (not so for regular files and /dev/null)."""
    with selectors.DefaultSelector() as selector:
        try:
            selector.register(fd, event)
        except (PermissionError, ValueError, OSError):
            return False
    return True


async def _open_stdout(
    loop: asyncio.AbstractEventLoop, fd: int
) -> tuple[_StdioSink, _StdoutProtocol | None]:
    if not _pollable(fd, selectors.EVENT_WRITE):
        # A regular file: plain blocking writes are fine and never stall for long.
        def write_all(data: bytes) -> None:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]

        def close() -> None:
            os.close(fd)

        return _StdioSink(write_all, close, close), None
    pipe = os.fdopen(fd, "wb", buffering=0)
    transport, protocol = await loop.connect_write_pipe(_StdoutProtocol, pipe)
    transport.set_write_buffer_limits(high=OUTPUT_HIGH_WATER, low=OUTPUT_LOW_WATER)
    return _StdioSink(transport.write, transport.close, transport.abort), protocol


async def _open_stdin(
    loop: asyncio.AbstractEventLoop, fd: int, connection: Connection, sink: _StdioSink
) -> asyncio.ReadTransport | None:
    if not _pollable(fd, selectors.EVENT_READ):
        reader = loop.create_task(_read_in_thread(loop, fd, connection, sink))
        connection.on_close(lambda _conn: reader.cancel())
        return None
    pipe = os.fdopen(fd, "rb", buffering=0)
    transport, _ = await loop.connect_read_pipe(lambda: _StdinProtocol(connection), pipe)
    return transport


async def _read_in_thread(
    loop: asyncio.AbstractEventLoop, fd: int, connection: Connection, sink: _StdioSink
) -> None:
    """For a stdin the loop cannot poll (a regular file, /dev/null): blocking reads off-loop."""
    try:
        while True:
            await sink.reading_allowed.wait()
            data = await loop.run_in_executor(None, os.read, fd, 1 << 16)
            if not data:
                break
            connection.feed(data)
    except OSError as exc:
        log.warning("reading stdin failed: %s", exc)
    finally:
        connection.end_of_input()


def _watch_parent(
    loop: asyncio.AbstractEventLoop, host: ConnectionHost, parent: int, interval: float
) -> Callable[[], None]:
    """Poll ``os.getppid()``: when the parent dies we are re-parented and it changes.

    Returns the function that stops watching.
    """
    handle: asyncio.TimerHandle | None = None

    def check() -> None:
        nonlocal handle
        if os.getppid() != parent:
            log.warning("parent process %d exited; shutting down", parent)
            host.request_shutdown(0)
            return
        handle = loop.call_later(interval, check)

    def stop() -> None:
        if handle is not None:
            handle.cancel()

    if parent > 1 and interval > 0:  # 0 or 1: started by init, there is no parent to lose
        check()
    return stop
