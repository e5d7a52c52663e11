"""Command-line options of the server (transport, token, limits, loop, logging) for the CLI.

Usage::

    parser = argparse.ArgumentParser()
    add_server_arguments(parser)
    args = parser.parse_args()
    # Each of these may raise TransportError: print it on one line, exit 2.
    configure_logging(args.log_level, args.log_file)
    endpoint = endpoint_from_args(args)
    limits = limits_from_args(args)
    server = RpcServer(router, max_frame_bytes=args.max_message_bytes, limits=limits)
    sys.exit(server.run(endpoint, loop_factory=loop_factory_from_args(args)))
"""

from __future__ import annotations

import argparse
import importlib
import os
from collections.abc import Callable, MutableMapping
from pathlib import Path
from typing import Any

from sessiond.jsonrpc.connection_limits import (
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_UNAUTHENTICATED,
    ConnectionLimits,
)
from sessiond.jsonrpc.header_framing import DEFAULT_MAX_FRAME_BYTES
from sessiond.jsonrpc.startup_errors import OptionError, TransportError
from sessiond.jsonrpc.transports import (
    Endpoint,
    StdioEndpoint,
    TcpEndpoint,
    UnixSocketEndpoint,
)
from sessiond.jsonrpc.transports.tcp_token import read_token_file, token_from_environment

DEFAULT_TCP_HOST = "127.0.0.1"


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    transport = parser.add_mutually_exclusive_group()
    transport.add_argument(
        "--stdio", action="store_true", help="serve one client on stdin/stdout (the default)"
    )
    transport.add_argument(
        "--socket",
        nargs="?",
        const="",
        metavar="PATH",
        help="serve on a Unix socket (default: sessiond.sock in the user runtime directory)",
    )
    transport.add_argument(
        "--tcp",
        metavar="[HOST:]PORT",
        help=f"serve on TCP (host {DEFAULT_TCP_HOST} unless given); clients need the token",
    )
    parser.add_argument(
        "--token-file",
        type=Path,
        metavar="PATH",
        help="TCP: read the token from this file (else $SESSIOND_TOKEN, else a generated one)",
    )
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help="TCP: allow a host that is not loopback (the token is still required)",
    )
    parser.add_argument(
        "--max-message-bytes",
        type=_positive_int,
        default=DEFAULT_MAX_FRAME_BYTES,
        metavar="N",
        help="reject messages larger than this (default: 64 MiB)",
    )
    parser.add_argument(
        "--max-connections",
        type=_positive_int,
        default=DEFAULT_MAX_CONNECTIONS,
        metavar="N",
        help=f"serve at most N clients at once (default: {DEFAULT_MAX_CONNECTIONS};"
        " lowered to fit the open-file limit)",
    )
    parser.add_argument(
        "--max-unauthenticated",
        type=_positive_int,
        default=DEFAULT_MAX_UNAUTHENTICATED,
        metavar="N",
        help="TCP: of those, at most N that have not shown the token yet; the oldest is"
        f" dropped to make room (default: {DEFAULT_MAX_UNAUTHENTICATED})",
    )
    parser.add_argument(
        "--loop",
        choices=["asyncio", "uvloop"],
        default="asyncio",
        help="event loop (uvloop is optional: pip install uvloop; about half the CPU per request)",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        type=str.upper,
        help="log level (default: INFO)",
    )
    parser.add_argument(
        "--log-file", type=Path, metavar="PATH", help="log to this file instead of stderr"
    )


def endpoint_from_args(
    args: argparse.Namespace, environ: MutableMapping[str, str] | None = None
) -> Endpoint:
    """The endpoint the options ask for.

    Raises ``TransportError`` for a bad address (``SecurityError``, a subclass, for a token
    that cannot be used).
    """
    if args.socket is not None:
        return UnixSocketEndpoint(Path(args.socket) if args.socket else None)
    if args.tcp is not None:
        host, port = parse_tcp_address(args.tcp)
        env = os.environ if environ is None else environ
        token = token_from_environment(env)
        if token is None and args.token_file is not None:
            token = read_token_file(args.token_file)
        return TcpEndpoint(host, port, token=token, allow_remote=args.allow_remote)
    return StdioEndpoint()


def limits_from_args(args: argparse.Namespace) -> ConnectionLimits:
    """The connection caps the options ask for; ``OptionError`` when they contradict."""
    connections, unauthenticated = args.max_connections, args.max_unauthenticated
    if connections < 2 or unauthenticated >= connections:
        raise OptionError(
            f"--max-connections ({connections}) must be at least 2 and above"
            f" --max-unauthenticated ({unauthenticated}), to keep room for clients with the token"
        )
    return ConnectionLimits(connections, unauthenticated)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def loop_factory_from_args(args: argparse.Namespace) -> Callable[[], Any] | None:
    """The ``loop_factory`` for ``RpcServer.run``: None for asyncio's own loop."""
    if getattr(args, "loop", "asyncio") != "uvloop":
        return None
    try:
        # Imported by name: uvloop is an optional extra, not a dependency.
        uvloop = importlib.import_module("uvloop")
    except ImportError as exc:
        raise TransportError("--loop uvloop needs the uvloop package (pip install uvloop)") from exc
    factory: Callable[[], Any] = uvloop.new_event_loop
    return factory


def parse_tcp_address(text: str) -> tuple[str, int]:
    """``PORT``, ``HOST:PORT`` or ``[IPv6]:PORT``."""
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = DEFAULT_TCP_HOST, text
    host = host.strip("[]") or DEFAULT_TCP_HOST
    if not port_text.isdigit() or int(port_text) > 65535:
        raise TransportError(f"invalid TCP port in {text!r}")
    return host, int(port_text)
