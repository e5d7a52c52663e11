"""``--socket [PATH]``: a Unix socket (0600) in a private directory, for several local clients."""

from __future__ import annotations

import logging
import os
import socket
import stat
from dataclasses import dataclass
from pathlib import Path

from sessiond.jsonrpc.startup_errors import TransportError
from sessiond.jsonrpc.transports.endpoint import ConnectionHost, Listening, announce
from sessiond.jsonrpc.transports.runtime_dir import default_runtime_dir, ensure_private_dir
from sessiond.jsonrpc.transports.sockets import (
    LISTEN_BACKLOG,
    SocketProtocol,
    accept_connections,
)

log = logging.getLogger("sessiond.jsonrpc")

SOCKET_NAME = "sessiond.sock"
# sun_path is 108 bytes on Linux (104 on macOS), including the terminating NUL.
_MAX_SOCKET_PATH_BYTES = 103


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
        sock.listen(LISTEN_BACKLOG)
        acceptor = accept_connections(sock, lambda: SocketProtocol(host, "unix", None))
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
