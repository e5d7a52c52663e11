"""A daemon process and a raw JSON-RPC channel to it, framed by hand.

Deliberately independent of ``sessiond.jsonrpc``: the protocol tests check the wire
as a client in another language would see it, so they parse ``Content-Length``
frames themselves. A reader thread turns the incoming byte stream into decoded
messages on a queue; the test thread takes them with a timeout.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

LISTENING = re.compile(r"listening on (tcp|unix) (\S+)")
_HEADER_END = b"\r\n\r\n"
# What the reader thread puts on the queue when the stream ends.
EOF = object()


def encode_frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def encode_message(message: Any) -> bytes:
    """Compact UTF-8 JSON, as any client would send it."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()


class FrameReader:
    """Splits a byte stream into frame bodies. Strict: the daemon must frame correctly."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[bytes]:
        self._buffer += data
        bodies: list[bytes] = []
        while True:
            end = self._buffer.find(_HEADER_END)
            if end == -1:
                return bodies
            length: int | None = None
            for line in self._buffer[:end].split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            if length is None:
                raise AssertionError(f"frame without Content-Length: {self._buffer[:end]!r}")
            start = end + len(_HEADER_END)
            if len(self._buffer) < start + length:
                return bodies
            bodies.append(self._buffer[start : start + length])
            self._buffer = self._buffer[start + length :]


class Channel:
    """Messages to and from the daemon over one byte stream (a pipe pair or a socket)."""

    def __init__(self, write: Callable[[bytes], None], close_input: Callable[[], None]) -> None:
        self._write = write
        self._close_input = close_input
        self._queue: queue.Queue[Any] = queue.Queue()
        self.ended = False

    def pump(self, read: Callable[[], bytes]) -> None:
        """Start the reader thread on ``read`` (returns b"" at the end of the stream)."""

        def run() -> None:
            reader = FrameReader()
            try:
                while True:
                    data = read()
                    if not data:
                        break
                    for body in reader.feed(data):
                        self._queue.put(json.loads(body))
            except (OSError, ValueError, AssertionError) as exc:
                self._queue.put(AssertionError(f"reading from the daemon failed: {exc!r}"))
            finally:
                self._queue.put(EOF)

        threading.Thread(target=run, daemon=True).start()

    def send(self, message: Any) -> None:
        self.send_raw(encode_frame(encode_message(message)))

    def send_raw(self, data: bytes) -> None:
        self._write(data)

    def close_input(self) -> None:
        self._close_input()

    def receive(self, timeout: float) -> Any:
        """The next message, ``EOF`` once the stream has ended, or None after ``timeout``."""
        if self.ended:
            return EOF
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            return None
        if isinstance(item, AssertionError):
            raise item
        if item is EOF:
            self.ended = True
        return item


def daemon_environment(home: Path) -> dict[str, str]:
    """An environment whose HOME and XDG directories all live under ``home``."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("XDG_", "SESSIOND_", "OPENAI_", "ANTHROPIC_"))
    }
    runtime = home / "run"
    for directory in (home / ".config", home / ".local/share", home / ".cache", runtime):
        directory.mkdir(parents=True, exist_ok=True)
    runtime.chmod(0o700)
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local/share"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_STATE_HOME=str(home / ".local/state"),
        XDG_RUNTIME_DIR=str(runtime),
        PYTHONUNBUFFERED="1",
    )
    return env


class Daemon:
    """``python -m sessiond serve ...`` in a private environment, stderr kept in a file."""

    def __init__(
        self,
        home: Path,
        args: list[str],
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        log_path: Path | None = None,
    ) -> None:
        self.log_path = log_path or home / "daemon.log"
        environment = daemon_environment(home)
        environment.update(env or {})
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in close()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "sessiond", "serve", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=environment,
            cwd=cwd or home,
        )

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def stdio_channel(self) -> Channel:
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None

        def write(data: bytes) -> None:
            stdin.write(data)
            stdin.flush()

        channel = Channel(write, stdin.close)
        channel.pump(lambda: stdout.read1(1 << 16))
        return channel

    def wait_listening(self, timeout: float = 30.0) -> tuple[str, str]:
        """Wait for the ``listening on tcp|unix ADDRESS`` line on stderr."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = LISTENING.search(self.log())
            if match:
                return match.group(1), match.group(2)
            if self.process.poll() is not None:
                break
            time.sleep(0.02)
        raise AssertionError(f"the daemon did not start listening:\n{self.log()}")

    def wait(self, timeout: float = 30.0) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the daemon did not exit:\n{self.log()}") from None

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._log.close()


def socket_channel(family: str, address: str) -> Channel:
    """Connect to ``tcp HOST:PORT`` or ``unix PATH``."""
    if family == "tcp":
        host, _, port = address.rpartition(":")
        sock = socket.create_connection((host.strip("[]"), int(port)), timeout=10)
    else:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(address)
    sock.settimeout(None)

    def close_input() -> None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)

    channel = Channel(sock.sendall, close_input)

    def read() -> bytes:
        try:
            return sock.recv(1 << 16)
        except OSError:
            return b""

    channel.pump(read)
    return channel
