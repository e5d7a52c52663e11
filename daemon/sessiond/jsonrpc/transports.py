"""Where connections come from: stdio, a Unix socket, or loopback TCP.

Every transport is an asyncio ``Protocol`` that hands received bytes straight to its
``Connection`` (no reader coroutine, no thread per read) and gives it a ``ByteSink``
whose write buffer pauses the connection above ``OUTPUT_HIGH_WATER`` (flow control).
An endpoint's ``open`` binds and starts accepting; the returned ``Listening`` stops
accepting and cleans up (socket file, token file) when the server shuts down. A socket
connection the server refuses (``connect`` returns None) is dropped at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import selectors
import socket
import stat
import struct
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, cast

from sessiond.jsonrpc.acceptor import Acceptor
from sessiond.jsonrpc.auth import (
    default_runtime_dir,
    ensure_private_dir,
    generate_token,
    write_token_file,
)
from sessiond.jsonrpc.connection import ByteSink, Connection
from sessiond.jsonrpc.limits import (
    OUTPUT_HIGH_WATER,
    OUTPUT_LOW_WATER,
    accept_fd_ceiling,
    open_file_limit,
)
from sessiond.jsonrpc.startup import TransportError
from sessiond.redaction import remember

__all__ = [
    "ConnectionHost",
    "Endpoint",
    "Listening",
    "StdioEndpoint",
    "TcpEndpoint",
    "TransportError",  # re-exported: it was first defined here
    "UnixSocketEndpoint",
    "announce",
    "is_loopback",
]

log = logging.getLogger("sessiond.jsonrpc")

SOCKET_NAME = "sessiond.sock"
_PARENT_AT_IMPORT = os.getppid()
# sun_path is 108 bytes on Linux (104 on macOS), including the terminating NUL.
_MAX_SOCKET_PATH_BYTES = 103
# Connections the kernel queues before the daemon accepts them (asyncio's default).
_LISTEN_BACKLOG = 100


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


# -- sockets ---------------------------------------------------------------------------------------


class _SocketProtocol(asyncio.Protocol):
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


@dataclass
class UnixSocketEndpoint:
    """``--socket [PATH]``: a Unix socket (0600) for several local clients at once.

    Without a path it is ``sessiond.sock`` in ``platformdirs.user_runtime_path("sessiond")``
    (a 0700 directory). A socket a live server answers on is never replaced; a stale one is.
    """

    path: Path | None = None

    async def open(self, host: ConnectionHost) -> Listening:
        if self.path is None:
            path = default_runtime_dir() / SOCKET_NAME
        else:
            path = self.path.expanduser().absolute()
            if not path.parent.exists():
                ensure_private_dir(path.parent, fix_mode=False)
        if len(os.fsencode(path)) > _MAX_SOCKET_PATH_BYTES:
            raise TransportError(f"socket path is too long for the OS ({path})")
        _remove_stale_socket(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)
        try:
            sock.bind(os.fspath(path))
        except OSError as exc:
            sock.close()
            raise TransportError(f"cannot bind {path}: {exc.strerror}") from exc
        finally:
            os.umask(old_umask)
        identity = _file_identity(path)
        sock.listen(_LISTEN_BACKLOG)
        acceptor = _accept(sock, lambda: _SocketProtocol(host, "unix", None))
        announce(f"listening on unix {path}")

        def cleanup() -> None:
            # Remove the socket only if it is still ours (not one a newer server bound).
            if _file_identity(path) == identity:
                path.unlink(missing_ok=True)

        return Listening(f"unix {path}", stop_accepting=acceptor.close, cleanup=cleanup)


def _remove_stale_socket(path: Path) -> None:
    try:
        info = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        raise TransportError(f"{path} exists and is not a socket; not replacing it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(os.fspath(path))
    except (ConnectionRefusedError, FileNotFoundError):
        log.info("removing stale socket %s", path)
        path.unlink(missing_ok=True)
        return
    except OSError as exc:
        raise TransportError(f"cannot check existing socket {path}: {exc}") from exc
    finally:
        probe.close()
    raise TransportError(f"another server is listening on {path}")


def _file_identity(path: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return info.st_dev, info.st_ino


@dataclass
class TcpEndpoint:
    """``--tcp [HOST:]PORT``: loopback TCP; every client must present the token.

    The token comes from the caller (``SESSIOND_TOKEN`` or ``--token-file``) or is
    generated here and written (0600) to ``token_path`` (default: ``tcp-<port>.token`` in
    the runtime directory), whose path, never the token, is printed on stderr.
    """

    host: str = "127.0.0.1"
    port: int = 0
    token: str | None = field(default=None, repr=False)
    token_path: Path | None = None
    allow_remote: bool = False

    async def open(self, host: ConnectionHost) -> Listening:
        if not self.allow_remote and not is_loopback(self.host):
            raise TransportError(
                f"refusing to listen on non-loopback address {self.host!r}"
                " (allow it explicitly with --allow-remote)"
            )
        token = self.token if self.token is not None else generate_token()
        remember(token)  # never in a log line, an error or a summary
        sock = _tcp_listener(self.host, self.port)
        bound_host, bound_port = sock.getsockname()[:2]
        written: Path | None = None
        try:
            if self.token is None:
                written = self.token_path or default_runtime_dir() / f"tcp-{bound_port}.token"
                write_token_file(written, token)
                announce(f"token written to {written}")
        except BaseException:
            sock.close()
            raise
        acceptor = _accept(sock, lambda: _SocketProtocol(host, "tcp", token))
        announce(f"listening on tcp {bound_host}:{bound_port}")

        def cleanup() -> None:
            if written is not None:
                written.unlink(missing_ok=True)

        return Listening(
            f"tcp {bound_host}:{bound_port}", stop_accepting=acceptor.close, cleanup=cleanup
        )


def _tcp_listener(host: str, port: int) -> socket.socket:
    """A listening socket on the address ``host`` resolves to (IPv4 first: ``localhost``
    is 127.0.0.1, what clients try first)."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        found.sort(key=lambda info: info[0] != socket.AF_INET)
        family, _, _, _, address = found[0]
        return socket.create_server(address[:2], family=family, backlog=_LISTEN_BACKLOG)
    except OSError as exc:
        raise TransportError(f"cannot listen on {host}:{port}: {exc}") from exc


def _accept(sock: socket.socket, protocol_factory: Callable[[], asyncio.Protocol]) -> Acceptor:
    acceptor = Acceptor(sock, protocol_factory, fd_ceiling=accept_fd_ceiling(open_file_limit()))
    acceptor.start(asyncio.get_running_loop())
    return acceptor


def is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


# -- stdio -----------------------------------------------------------------------------------------


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
