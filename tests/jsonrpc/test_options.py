"""The server's command-line options and the endpoints they select."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from sessiond.jsonrpc import add_server_arguments, endpoint_from_args
from sessiond.jsonrpc.header_framing import DEFAULT_MAX_FRAME_BYTES
from sessiond.jsonrpc.startup_errors import SecurityError
from sessiond.jsonrpc.transports import StdioEndpoint, TcpEndpoint, UnixSocketEndpoint


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_server_arguments(parser)
    return parser.parse_args(argv)


def test_stdio_is_the_default() -> None:
    args = parse()
    assert isinstance(endpoint_from_args(args, {}), StdioEndpoint)
    assert args.max_message_bytes == DEFAULT_MAX_FRAME_BYTES
    assert args.log_level == "INFO" and args.log_file is None


def test_socket_with_and_without_a_path() -> None:
    assert endpoint_from_args(parse("--socket"), {}) == UnixSocketEndpoint(None)
    assert endpoint_from_args(parse("--socket", "/x/s.sock"), {}) == UnixSocketEndpoint(
        Path("/x/s.sock")
    )


def test_tcp_token_sources(tmp_path: Path) -> None:
    env = {"SESSIOND_TOKEN": "from-env"}
    endpoint = endpoint_from_args(parse("--tcp", "9000"), env)
    assert isinstance(endpoint, TcpEndpoint)
    assert (endpoint.host, endpoint.port, endpoint.token) == ("127.0.0.1", 9000, "from-env")
    assert "from-env" not in repr(endpoint)
    assert env == {}
    token_file = tmp_path / "t"
    token_file.write_text("from-file\n")
    endpoint = endpoint_from_args(parse("--tcp", "9000", "--token-file", str(token_file)), {})
    assert isinstance(endpoint, TcpEndpoint) and endpoint.token == "from-file"
    generated = endpoint_from_args(parse("--tcp", "::1:9", "--allow-remote"), {})
    assert isinstance(generated, TcpEndpoint)
    assert generated.token is None and generated.allow_remote and generated.host == "::1"


def test_unusable_tokens_are_refused(tmp_path: Path) -> None:
    with pytest.raises(SecurityError):
        endpoint_from_args(parse("--tcp", "1"), {"SESSIOND_TOKEN": "  "})
    with pytest.raises(SecurityError):
        endpoint_from_args(parse("--tcp", "1", "--token-file", str(tmp_path / "missing")), {})


def test_transports_are_mutually_exclusive() -> None:
    with pytest.raises(SystemExit):
        parse("--stdio", "--tcp", "1")


def test_asyncio_is_the_default_loop_and_uvloop_is_optional() -> None:
    from sessiond.jsonrpc import TransportError, loop_factory_from_args

    assert loop_factory_from_args(parse()) is None
    try:
        import uvloop  # noqa: F401
    except ImportError:
        with pytest.raises(TransportError, match="pip install uvloop"):
            loop_factory_from_args(parse("--loop", "uvloop"))
    else:
        assert loop_factory_from_args(parse("--loop", "uvloop")) is not None
