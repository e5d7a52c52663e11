"""``--tcp [HOST:]PORT``: loopback TCP, where every client must show the token."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from pathlib import Path

from sessiond.jsonrpc.startup_errors import TransportError
from sessiond.jsonrpc.transports.endpoint import ConnectionHost, Listening, announce
from sessiond.jsonrpc.transports.runtime_dir import default_runtime_dir
from sessiond.jsonrpc.transports.sockets import (
    LISTEN_BACKLOG,
    SocketProtocol,
    accept_connections,
)
from sessiond.jsonrpc.transports.tcp_token import generate_token, write_token_file
from sessiond.redaction import remember


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
        acceptor = accept_connections(sock, lambda: SocketProtocol(host, "tcp", token))
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
        return socket.create_server(address[:2], family=family, backlog=LISTEN_BACKLOG)
    except OSError as exc:
        raise TransportError(f"cannot listen on {host}:{port}: {exc}") from exc


def is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
