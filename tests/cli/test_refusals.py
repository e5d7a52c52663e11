"""Refusals on the command line: a message, never a traceback, and a documented exit status.

2: the command line is wrong, or ``sessiond serve`` cannot start as asked (an address it
must not or cannot use, a token it cannot read, a log file it cannot open, limits that
contradict each other); 1: the command ran and failed.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.isolation import FAST, TRACEBACK, isolated_env


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = isolated_env(tmp_path, FAST)
    return subprocess.run(
        [sys.executable, "-m", "sessiond", *args],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        yield taken.getsockname()[1]


SERVE_REFUSALS = [
    pytest.param(["--tcp", "0.0.0.0:0"], "refusing to listen on non-loopback", id="remote"),
    pytest.param(["--tcp", "127.0.0.1:99999"], "invalid TCP port", id="bad-port"),
    pytest.param(["--tcp", "0", "--token-file", "{tmp}/none"], "cannot read token", id="token"),
    pytest.param(["--log-file", "{tmp}/no/dir/d.log"], "cannot open log file", id="log-file"),
    pytest.param(
        ["--max-connections", "8", "--max-unauthenticated", "8"],
        "--max-unauthenticated",
        id="limits",
    ),
    pytest.param(["--socket", "{tmp}/plain-file"], "is not a socket", id="not-a-socket"),
    pytest.param(["--tcp", "127.0.0.1:{busy}"], "cannot listen on 127.0.0.1", id="port-in-use"),
]


@pytest.mark.parametrize(("args", "says"), SERVE_REFUSALS)
def test_serve_refusals_are_one_line_and_exit_2(
    tmp_path: Path, busy_port: int, args: list[str], says: str
) -> None:
    (tmp_path / "plain-file").write_text("not a socket")
    argv = [arg.format(tmp=tmp_path, busy=busy_port) for arg in args]
    done = run(tmp_path, "serve", *argv)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sessiond: error: "), done.stderr
    assert says in lines[0] and not TRACEBACK.search(done.stderr)


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["serve", "--max-message-bytes", "0"], id="serve-size"),
        pytest.param(["serve", "--max-connections", "many"], id="serve-count"),
        pytest.param(["serve", "--stdio", "--tcp", "1"], id="serve-two-transports"),
        pytest.param(["tree"], id="tree-without-file"),
        pytest.param(["nonsense"], id="unknown-command"),
    ],
)
def test_argument_errors_exit_2_without_a_traceback(tmp_path: Path, args: list[str]) -> None:
    done = run(tmp_path, *args)
    assert done.returncode == 2, done.stderr
    assert "error:" in done.stderr.strip().splitlines()[-1]
    assert not TRACEBACK.search(done.stderr)


def test_a_file_that_cannot_be_written_is_one_line_and_exit_1(tmp_path: Path) -> None:
    done = run(tmp_path, "schema", "--output", str(tmp_path / "no" / "dir" / "schema.json"))
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sessiond: error: "), done.stderr
    assert "No such file or directory" in lines[0] and not TRACEBACK.search(done.stderr)
