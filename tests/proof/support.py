"""What the proof tests share: counts for CI and long runs, isolated daemons, a strict peer.

Every daemon is a real ``sessiond serve`` process whose HOME and XDG directories are
temporary and whose stderr goes to a file (never an undrained pipe). ``Peer`` is a
JSON-RPC peer at the byte level on its own reader thread: it checks every frame the
daemon writes (a header with CRLF and a Content-Length, a JSON body) and records what
it could not accept in ``violations``, so a test can assert the stream stayed clean.
The isolation helpers of ``tests.isolation`` are re-exported from here.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from tests.checks import assert_no_traceback as assert_no_traceback  # noqa: PLC0414
from tests.checks import reopen as reopen  # noqa: PLC0414
from tests.isolation import FAST as FAST  # noqa: PLC0414
from tests.isolation import isolated_env
from tests.isolation import merged as merged  # noqa: PLC0414
from tests.isolation import write_settings as write_settings  # noqa: PLC0414

ROOT = Path(__file__).resolve().parents[2]
LONG = os.environ.get("SESSIOND_LONG", "") not in ("", "0")
SERVE = [sys.executable, "-m", "sessiond", "serve"]
ANSWER_TIMEOUT = 15.0


# A compaction small enough to run on a few turns: one summary request, no short summary,
# no pruning rewrite, so a provider test sees exactly the requests it scripts.
SMALL_COMPACTION = {
    "compaction": {
        "keepRecentTokens": 300,
        "reserveTokens": 2000,
        "shortSummary": False,
        "pruneToolOutputs": False,
    }
}


def count(ci: int, long: int) -> int:
    """How many cases, kills or clients a test runs: ``ci`` normally, ``long`` with SESSIOND_LONG=1."""
    return long if LONG else ci


def timeout_for(ci: float, long: float) -> float:
    return long if LONG else ci


# -- a strict JSON-RPC peer ---------------------------------------------------------------------


class RpcError(Exception):
    def __init__(self, response: dict[str, Any]) -> None:
        error = response["error"]
        super().__init__(f"{error.get('code')} {error.get('message')}")
        self.response = response
        self.code: int = error.get("code")
        self.message: str = error.get("message", "")
        self.data: dict[str, Any] = error.get("data") or {}
        self.kind: str | None = self.data.get("kind")


def frame(body: bytes | dict[str, Any]) -> bytes:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return b"Content-Length: %d\r\n\r\n%b" % (len(data), data)


class Peer:
    """One JSON-RPC connection driven from tests (thread-safe sends, a reader thread).

    ``answers[method]`` answers the daemon's own requests (hooks, llm/complete); by
    default they get ``{}``.
    """

    def __init__(
        self,
        read: Callable[[int], bytes],
        write: Callable[[bytes], None],
        name: str = "peer",
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self.name = name
        self._read = read
        self._write = write
        self._on_close = on_close
        self._send_lock = threading.Lock()
        self._cond = threading.Condition()
        self._ids = itertools.count(1)
        self.responses: dict[Any, dict[str, Any]] = {}
        self.notifications: list[tuple[str, Any, float]] = []
        self.server_requests: list[dict[str, Any]] = []
        self.bodies: list[bytes] = []
        self.violations: list[str] = []
        self.answers: dict[str, Callable[[Any], Any]] = {}
        self.eof = False
        self.eof_at: float | None = None
        self.received_at: dict[Any, float] = {}
        self._thread = threading.Thread(target=self._run, name=f"peer-{name}", daemon=True)
        self._thread.start()

    # -- reading

    def _run(self) -> None:
        buffer = bytearray()
        try:
            while True:
                end = buffer.find(b"\r\n\r\n")
                while end < 0:
                    chunk = self._read(1 << 16)
                    if not chunk:
                        if buffer:
                            self.violations.append(
                                f"stream ended inside a frame: {bytes(buffer[:200])!r}"
                            )
                        return
                    buffer += chunk
                    end = buffer.find(b"\r\n\r\n")
                header = bytes(buffer[:end])
                del buffer[: end + 4]
                length = None
                for line in header.split(b"\r\n"):
                    name, sep, value = line.partition(b":")
                    if not sep or b"\n" in line:
                        self.violations.append(f"not a header line: {line[:200]!r}")
                        continue
                    if name.strip().lower() == b"content-length":
                        if not value.strip().isdigit():
                            self.violations.append(f"bad Content-Length: {value!r}")
                        else:
                            length = int(value.strip())
                if length is None:
                    self.violations.append(f"header without Content-Length: {header[:200]!r}")
                    return
                while len(buffer) < length:
                    chunk = self._read(max(1 << 16, length - len(buffer)))
                    if not chunk:
                        self.violations.append("stream ended inside a body")
                        return
                    buffer += chunk
                body = bytes(buffer[:length])
                del buffer[:length]
                self._deliver(body)
        except OSError:
            return
        finally:
            with self._cond:
                self.eof = True
                self.eof_at = time.monotonic()
                self._cond.notify_all()

    def _deliver(self, body: bytes) -> None:
        now = time.monotonic()
        self.bodies.append(body)
        try:
            message = json.loads(body)
        except ValueError:
            self.violations.append(f"body is not JSON: {body[:200]!r}")
            return
        items = message if isinstance(message, list) else [message]
        for item in items:
            if not isinstance(item, dict) or item.get("jsonrpc") != "2.0":
                self.violations.append(f"not JSON-RPC 2.0: {body[:200]!r}")
                continue
            if "method" in item and "id" in item:
                self.server_requests.append(item)
                self._answer_server_request(item)
            elif "method" in item:
                with self._cond:
                    self.notifications.append((item["method"], item.get("params"), now))
                    self._cond.notify_all()
            else:
                with self._cond:
                    self.responses[_key(item.get("id"))] = item
                    self.received_at[_key(item.get("id"))] = now
                    self._cond.notify_all()

    def _answer_server_request(self, item: dict[str, Any]) -> None:
        handler = self.answers.get(item["method"])

        def reply() -> None:
            result = handler(item.get("params")) if handler is not None else {}
            with _suppress_os():
                self.send({"jsonrpc": "2.0", "id": item["id"], "result": result})

        # Answered off the reader thread, so a slow handler does not stall reading.
        threading.Thread(target=reply, daemon=True).start()

    # -- writing

    def send_raw(self, data: bytes) -> None:
        with self._send_lock:
            self._write(data)

    def send(self, message: dict[str, Any]) -> None:
        self.send_raw(frame(message))

    def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def start(self, method: str, params: Any = None, request_id: Any = None) -> Any:
        """Send a request without waiting; returns its id."""
        request_id = f"{self.name}-{next(self._ids)}" if request_id is None else request_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return request_id

    def wait(self, request_id: Any, timeout: float = ANSWER_TIMEOUT) -> dict[str, Any]:
        key = _key(request_id)
        deadline = time.monotonic() + timeout
        with self._cond:
            while key not in self.responses:
                left = deadline - time.monotonic()
                if self.eof:
                    raise AssertionError(
                        f"{self.name}: the daemon closed before answering {request_id}"
                    )
                if left <= 0:
                    raise AssertionError(
                        f"{self.name}: no answer to {request_id} within {timeout} s"
                    )
                self._cond.wait(min(left, 0.5))
            return self.responses.pop(key)

    def request(
        self, method: str, params: Any = None, timeout: float = ANSWER_TIMEOUT
    ) -> dict[str, Any]:
        return self.wait(self.start(method, params), timeout)

    def call(self, method: str, params: Any = None, timeout: float = ANSWER_TIMEOUT) -> Any:
        response = self.request(method, params, timeout)
        if "error" in response:
            raise RpcError(response)
        return response["result"]

    def initialize(self, **extra: Any) -> dict[str, Any]:
        params: dict[str, Any] = {
            "clientInfo": {"name": self.name, "version": "1"},
            "protocolVersion": "1",
            "capabilities": {"hooks": [], "llm": False},
            **extra,
        }
        result = self.call("initialize", params)
        self.notify("initialized", {})
        return result  # type: ignore[no-any-return]

    # -- notifications and the end of the stream

    def received(self, method: str, session_id: str | None = None) -> list[Any]:
        with self._cond:
            return [
                params
                for name, params, _ in self.notifications
                if name == method
                and (session_id is None or (params or {}).get("sessionId") == session_id)
            ]

    def wait_notification(
        self,
        method: str,
        predicate: Callable[[Any], bool] = lambda params: True,
        timeout: float = ANSWER_TIMEOUT,
        start: int = 0,
    ) -> Any:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for name, params, _ in self.notifications[start:]:
                    if name == method and predicate(params):
                        return params
                left = deadline - time.monotonic()
                if left <= 0 or self.eof:
                    seen = [name for name, _, _ in self.notifications]
                    raise AssertionError(f"{self.name}: no {method} within {timeout} s; saw {seen}")
                self._cond.wait(min(left, 0.2))

    def wait_eof(self, timeout: float = ANSWER_TIMEOUT) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self.eof:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.2))
        return True

    def close(self) -> None:
        if self._on_close is not None:
            self._on_close()


def _key(request_id: Any) -> str:
    return json.dumps(request_id)


class _suppress_os:
    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, value: Any, tb: Any) -> bool:
        return kind is not None and issubclass(kind, OSError)


# -- daemon processes ----------------------------------------------------------------------------


@dataclass
class DaemonProcess:
    """A running ``sessiond serve``; its stderr is in ``stderr_path``."""

    process: subprocess.Popen[bytes]
    root: Path
    env: dict[str, str]
    stderr_path: Path
    log_path: Path | None = None
    address: str = ""
    peers: list[Peer] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.process.pid

    def stderr_text(self) -> str:
        return self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""

    def log_text(self) -> str:
        if self.log_path is not None and self.log_path.exists():
            return self.log_path.read_text(errors="replace")
        return ""

    def all_logs(self) -> str:
        return self.stderr_text() + self.log_text()

    def stop(self, timeout: float = 10) -> int:
        for peer in self.peers:
            peer.close()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait(timeout)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)

    def unix_peer(self, name: str = "unix") -> Peer:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(self.address)
        return self._socket_peer(sock, name)

    def tcp_peer(self, name: str = "tcp") -> Peer:
        host, _, port = self.address.rpartition(":")
        sock = socket.create_connection((host.strip("[]"), int(port)), timeout=10)
        sock.settimeout(None)
        return self._socket_peer(sock, name)

    def _socket_peer(self, sock: socket.socket, name: str) -> Peer:
        def close() -> None:
            with _suppress_os():
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

        peer = Peer(sock.recv, sock.sendall, name, on_close=close)
        self.peers.append(peer)
        return peer


def _spawn(
    root: Path, env: dict[str, str], args: list[str], *, stdio: bool, log_file: bool
) -> DaemonProcess:
    root.mkdir(parents=True, exist_ok=True)
    stderr_path = root / f"stderr-{time.monotonic_ns()}.log"
    log_path = root / f"daemon-{time.monotonic_ns()}.log" if log_file else None
    command = [*SERVE, *args]
    if log_path is not None:
        command += ["--log-file", str(log_path)]
    with open(stderr_path, "wb") as stderr:
        process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE if stdio else subprocess.DEVNULL,
            stdout=subprocess.PIPE if stdio else subprocess.DEVNULL,
            stderr=stderr,
            env=env,
            cwd=root,
        )
    return DaemonProcess(process, root, env, stderr_path, log_path)


def stdio_daemon(
    root: Path,
    settings: dict[str, Any] | None = None,
    *,
    env: dict[str, str] | None = None,
    args: Iterable[str] = (),
    log_file: bool = False,
    name: str = "stdio",
) -> tuple[DaemonProcess, Peer]:
    """``sessiond serve --stdio`` with a Peer on its stdin and stdout."""
    env = env if env is not None else isolated_env(root, FAST if settings is None else settings)
    daemon = _spawn(root, env, ["--stdio", *args], stdio=True, log_file=log_file)
    process = daemon.process
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout

    def write(data: bytes) -> None:
        stdin.write(data)
        stdin.flush()

    def close() -> None:
        with _suppress_os():
            stdin.close()

    peer = Peer(stdout.read1, write, name, on_close=close)
    daemon.peers.append(peer)
    return daemon, peer


def listening_daemon(
    root: Path,
    args: list[str],
    settings: dict[str, Any] | None = None,
    *,
    env: dict[str, str] | None = None,
    log_file: bool = True,
    timeout: float = 15,
) -> DaemonProcess:
    """``sessiond serve --socket PATH`` or ``--tcp PORT``, once it says where it listens."""
    env = env if env is not None else isolated_env(root, FAST if settings is None else settings)
    daemon = _spawn(root, env, args, stdio=False, log_file=log_file)
    deadline = time.monotonic() + timeout
    while True:
        match = re.search(r"listening on (?:unix|tcp) (\S+)", daemon.stderr_text())
        if match:
            daemon.address = match.group(1)
            return daemon
        if daemon.process.poll() is not None:
            raise AssertionError(f"daemon exited before listening: {daemon.stderr_text()}")
        if time.monotonic() > deadline:
            daemon.kill()
            raise AssertionError(f"daemon did not listen in time: {daemon.stderr_text()}")
        time.sleep(0.02)


# -- session files -------------------------------------------------------------------------------


def file_entries(path: Path) -> list[dict[str, Any]]:
    """Every line of a session file after the header, decoded (each must be JSON)."""
    lines = Path(path).read_bytes().split(b"\n")
    assert lines[-1] == b"", "a session file ends with a newline"
    return [msgspec.json.decode(line) for line in lines[1:-1]]


def assert_single_chain(entries: list[dict[str, Any]]) -> None:
    """Each entry is the child of the line before it: one branch, no forks, no orphans."""
    previous: str | None = None
    for index, entry in enumerate(entries):
        assert entry["parentId"] == previous, (
            f"line {index + 2}: parent {entry['parentId']} after {previous}"
        )
        previous = entry["id"]


def tmp_files(directory: Path) -> list[Path]:
    return sorted(
        p for p in directory.iterdir() if p.name.startswith(".") and p.name.endswith(".tmp")
    )


def now_ms() -> int:
    return int(time.time() * 1000)
