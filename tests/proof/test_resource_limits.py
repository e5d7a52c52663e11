"""Resource limits: what one client, or a crowd of strangers, can make the daemon hold.

- A client that pipelines many big requests and never reads the answers holds the
  daemon to its output bound (the daemon stops reading until the client drains), over a
  Unix socket, TCP and stdio; when the client finally reads, every answer arrives.
- On TCP, connections that never present the token hold little memory, cannot take the
  file descriptors the daemon needs, and do not keep the token holder out: the caps
  (``--max-connections``, ``--max-unauthenticated``, and the process's file limit) hold.
- A flood of junk frames before the token does not grow the log beyond a bound.
- Refusals of ``sessiond serve`` are one line on stderr and exit status 2.

Every daemon is a real ``sessiond serve`` process; its memory is read from
``/proc/<pid>/status``.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests.isolation import TRACEBACK
from tests.proof.support import (
    FAST,
    SERVE,
    DaemonProcess,
    frame,
    isolated_env,
    listening_daemon,
    timeout_for,
)

pytestmark = [
    pytest.mark.timeout(timeout_for(120, 300)),
    pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc"),
]

TOKEN = "limits-" + secrets.token_hex(16)
MIB = 1024 * 1024


# -- the daemon's process, seen from /proc ---------------------------------------------------------


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def open_sockets(pid: int) -> int:
    count = 0
    for entry in Path(f"/proc/{pid}/fd").iterdir():
        with suppress(OSError):
            count += os.readlink(entry).startswith("socket:")
    return count


class PeakMemory:
    """Samples a process's RSS on a thread until stopped; ``peak`` is the highest seen."""

    def __init__(self, pid: int, interval: float = 0.01) -> None:
        self.pid = pid
        self.peak = rss_bytes(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(interval,), daemon=True)
        self._thread.start()

    def _run(self, interval: float) -> None:
        while not self._stop.wait(interval):
            with suppress(OSError):
                self.peak = max(self.peak, rss_bytes(self.pid))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(5)
        return self.peak


def wait_until_idle(pid: int, *, quiet: float = 0.6, timeout: float = 60) -> None:
    """Until the process has used no CPU for ``quiet`` seconds (it is blocked, waiting)."""
    deadline = time.monotonic() + timeout
    last, since = cpu_ticks(pid), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = cpu_ticks(pid)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
    raise AssertionError(f"process {pid} never went idle")


def wait_for_log(daemon: DaemonProcess, text: str, give_up: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 60
    while text not in daemon.all_logs():
        if give_up():
            return
        assert time.monotonic() < deadline, f"never logged {text!r}"
        time.sleep(0.02)


# -- a bare JSON-RPC link that reads only when told to ---------------------------------------------


class Answer(msgspec.Struct):
    id: Any = None
    result: Any = msgspec.field(default_factory=dict)
    error: Any = None


class EntriesAnswer(msgspec.Struct):
    class Result(msgspec.Struct):
        total: int
        entries: list[msgspec.Raw]

    id: Any
    result: Result


@dataclass
class RawLink:
    """Writes frames, and reads frames only when asked (the client that does not read)."""

    write: Callable[[bytes], None]
    read: Callable[[int], bytes]
    buffer: bytearray = field(default_factory=bytearray)

    def next_body(self) -> bytes:
        while (end := self.buffer.find(b"\r\n\r\n")) < 0:
            self._fill()
        header = bytes(self.buffer[:end]).decode()
        length = int(header.partition(":")[2])
        del self.buffer[: end + 4]
        while len(self.buffer) < length:
            self._fill()
        body = bytes(self.buffer[:length])
        del self.buffer[:length]
        return body

    def _fill(self) -> None:
        chunk = self.read(1 << 20)
        if not chunk:
            raise AssertionError("the daemon closed the connection")
        self.buffer += chunk

    def call(self, request_id: int, method: str, params: Any) -> Any:
        self.write(frame({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))
        while True:
            body = self.next_body()
            answer = msgspec.json.decode(body, type=Answer)
            if answer.id == request_id and b'"method"' not in body[:40]:
                assert answer.error is None, answer.error
                return answer.result


def entries_request(request_id: int, session_id: str) -> bytes:
    params = {"sessionId": session_id}
    return frame(
        {"jsonrpc": "2.0", "id": request_id, "method": "session/entries", "params": params}
    )


def fill_a_session(link: RawLink, session_dir: Path, megabytes: int) -> str:
    """A session of about ``megabytes`` MB: big user messages appended through the protocol."""
    link.call(1, "initialize", {"protocolVersion": "1", "authToken": TOKEN})
    created = link.call(2, "session/new", {"cwd": "/p", "sessionDir": str(session_dir)})
    session_id: str = created["sessionId"]
    text = "x" * (512 * 1024)
    for request_id in range(3, 3 + 2 * megabytes):
        entry = {"type": "message", "message": {"role": "user", "content": text}}
        link.call(request_id, "session/append", {"sessionId": session_id, "entries": [entry]})
    return session_id


@contextmanager
def connected(daemon: DaemonProcess, transport: str) -> Iterator[RawLink]:
    if transport == "unix":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(daemon.address)
    else:
        host, _, port = daemon.address.rpartition(":")
        sock = socket.create_connection((host, int(port)))
    try:
        yield RawLink(sock.sendall, sock.recv)
    finally:
        sock.close()


@contextmanager
def daemon_and_link(root: Path, transport: str) -> Iterator[tuple[DaemonProcess, RawLink]]:
    env = isolated_env(root, FAST, SESSIOND_TOKEN=TOKEN)
    log = ["--log-level", "DEBUG"]
    if transport == "stdio":
        log_path = root / "daemon.log"
        stderr_path = root / "stderr.log"
        with open(stderr_path, "wb") as stderr:
            process = subprocess.Popen(
                [*SERVE, "--stdio", *log, "--log-file", str(log_path)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=env,
                cwd=root,
            )
        daemon = DaemonProcess(process, root, env, stderr_path, log_path)
        assert process.stdin is not None and process.stdout is not None
        stdin, stdout = process.stdin, process.stdout

        def write(data: bytes) -> None:
            stdin.write(data)
            stdin.flush()

        try:
            yield daemon, RawLink(write, stdout.read1)
        finally:
            daemon.kill()
        return
    args = ["--socket", str(root / "d.sock")] if transport == "unix" else ["--tcp", "127.0.0.1:0"]
    daemon = listening_daemon(root, [*args, *log], env=env)
    try:
        with connected(daemon, transport) as link:
            yield daemon, link
    finally:
        daemon.kill()


# -- a client that does not read -----------------------------------------------------------------


@pytest.mark.parametrize("transport", ["unix", "tcp", "stdio"])
def test_a_client_that_does_not_read_holds_the_daemon_to_its_output_bound(
    tmp_path: Path, transport: str
) -> None:
    requests, megabytes = 120, 3
    with daemon_and_link(tmp_path, transport) as (daemon, link):
        session_id = fill_a_session(link, tmp_path / "sessions", megabytes)
        link.write(entries_request(100, session_id))
        first = msgspec.json.decode(link.next_body(), type=EntriesAnswer)
        assert len(first.result.entries) == 2 * megabytes
        answer_bytes = sum(len(raw) for raw in first.result.entries)
        baseline = rss_bytes(daemon.pid)
        # Unbounded, the daemon would hold every answer: 120 x 3 MB. The bound is its
        # output buffer plus the answer being produced, with room for the allocator.
        bound = baseline + 16 * answer_bytes
        assert requests * answer_bytes > 4 * (bound - baseline)
        peak = PeakMemory(daemon.pid)
        try:
            link.write(b"".join(entries_request(1000 + i, session_id) for i in range(requests)))
            wait_for_log(daemon, "reading paused", give_up=lambda: peak.peak > bound)
            assert peak.peak <= bound, f"{(peak.peak - baseline) / MIB:.0f} MB more held"
            wait_until_idle(daemon.pid)
            held = rss_bytes(daemon.pid)
            assert held <= bound, f"{(held - baseline) / MIB:.0f} MB more held while not read"
            # Now read: every answer arrives, whole, in order.
            for i in range(requests):
                answer = msgspec.json.decode(link.next_body(), type=EntriesAnswer)
                assert answer.id == 1000 + i and len(answer.result.entries) == 2 * megabytes
        finally:
            top = peak.stop()
        print(
            f"\n{transport}: {requests} unread answers of {answer_bytes / MIB:.1f} MB;"
            f" the daemon held at most {(top - baseline) / MIB:.1f} MB more"
            f" (bound {(bound - baseline) / MIB:.0f} MB, unbounded {requests * answer_bytes / MIB:.0f})"
        )
        assert top <= bound, f"{(top - baseline) / MIB:.0f} MB more held at the peak"


# -- strangers on TCP ---------------------------------------------------------------------------------


def spawn_tcp(root: Path, *args: str, file_limit: int | None = None) -> DaemonProcess:
    """``sessiond serve --tcp 127.0.0.1:0`` with the token; optionally under a lower
    ``RLIMIT_NOFILE`` (set in the child only)."""
    env = isolated_env(root, FAST, SESSIOND_TOKEN=TOKEN)
    if file_limit is None:
        return listening_daemon(root, ["--tcp", "127.0.0.1:0", *args], env=env)
    # The limit is lowered in a process that then becomes the daemon (exec keeps it).
    lowered = (
        "import os, resource, sys;"
        f"resource.setrlimit(resource.RLIMIT_NOFILE, ({file_limit}, {file_limit}));"
        "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"
    )
    log_path = root / "daemon.log"
    stderr_path = root / "stderr.log"
    command = [
        SERVE[0],
        "-c",
        lowered,
        *SERVE[1:],
        *["--tcp", "127.0.0.1:0", *args, "--log-file", str(log_path)],
    ]
    with open(stderr_path, "wb") as stderr:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=env,
            cwd=root,
        )
    daemon = DaemonProcess(process, root, env, stderr_path, log_path)
    deadline = time.monotonic() + 15
    while "listening on tcp" not in daemon.stderr_text():
        assert process.poll() is None, daemon.stderr_text()
        assert time.monotonic() < deadline, daemon.stderr_text()
        time.sleep(0.02)
    daemon.address = daemon.stderr_text().split("listening on tcp ")[1].split()[0]
    return daemon


def knock(daemon: DaemonProcess, data: bytes = b"") -> socket.socket:
    """A stranger's connection that sends ``data`` (or nothing) and then just stays."""
    host, _, port = daemon.address.rpartition(":")
    sock = socket.create_connection((host, int(port)), timeout=5)
    if data:
        with suppress(OSError):  # the daemon may hang up before it has all of it
            sock.sendall(data)
    return sock


def still_open(sock: socket.socket) -> bool:
    """Whether the daemon has not closed this connection (it never writes to strangers)."""
    timeout = sock.gettimeout()
    sock.setblocking(False)
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        sock.settimeout(timeout)


def owner_creates_a_session(daemon: DaemonProcess, session_dir: Path) -> float:
    """The token holder connects, initializes and creates a session; returns the seconds taken."""
    started = time.monotonic()
    peer = daemon.tcp_peer("owner")
    try:
        peer.initialize(authToken=TOKEN)
        created = peer.call(
            "session/new", {"cwd": "/p", "sessionDir": str(session_dir), "writeNow": True}
        )
        assert Path(created["path"]).exists()
        return time.monotonic() - started
    finally:
        peer.close()


def test_strangers_with_partial_frames_cost_little_and_do_not_keep_the_owner_out(
    tmp_path: Path,
) -> None:
    daemon = spawn_tcp(tmp_path, "--max-connections", "12", "--max-unauthenticated", "6")
    strangers: list[socket.socket] = []
    try:
        owner_creates_a_session(daemon, tmp_path / "warm-up")
        baseline = rss_bytes(daemon.pid)
        big = b"Content-Length: 900000\r\n\r\n" + b'{"jsonrpc":"2.0","params":"' + b"x" * 600_000
        small = b"Content-Length: 4000\r\n\r\n" + b'{"jsonrpc":"2.0","params":"' + b"x" * 2_000
        for index in range(100):
            strangers.append(knock(daemon, big if index % 2 else small))
        wait_until_idle(daemon.pid)
        held = rss_bytes(daemon.pid) - baseline
        sockets = open_sockets(daemon.pid)
        # Fresh strangers fill every unauthenticated slot again, so none of them reaches its
        # deadline while the owner logs in: the owner can only get in by making one go.
        fresh = [knock(daemon, small) for _ in range(6)]
        strangers.extend(fresh)
        wait_until_idle(daemon.pid)
        assert all(still_open(sock) for sock in fresh)
        took = owner_creates_a_session(daemon, tmp_path / "sessions")
        still_waiting = sum(still_open(sock) for sock in fresh)
        print(
            f"\n100 strangers with partial frames (50 of 600 KB): +{held / MIB:.1f} MB,"
            f" {sockets} sockets open in the daemon; the owner got in in {took:.2f} s"
        )
        # Unbounded, 50 partial frames of 600 KB alone are 30 MB.
        assert held < 12 * MIB, f"{held / MIB:.1f} MB held for strangers"
        assert sockets <= 12 + 1, f"{sockets} sockets open (cap 12, plus the listener)"
        # The owner was let in by dropping the oldest stranger, not kept out until deadlines
        # closed them: the other five still hold their slots.
        assert still_waiting == 5, f"{still_waiting} of 6 fresh strangers still connected"
    finally:
        for sock in strangers:
            sock.close()
        daemon.stop()
    assert not TRACEBACK.search(daemon.all_logs())


def test_idle_strangers_cannot_take_the_file_descriptors_the_owner_needs(tmp_path: Path) -> None:
    # 96 descriptors: unbounded, ~85 idle strangers exhaust them and the owner's
    # connection waits in the kernel's backlog until the strangers' deadline (10 s).
    daemon = spawn_tcp(tmp_path, file_limit=96)
    strangers: list[socket.socket] = []
    try:
        for _ in range(150):
            strangers.append(knock(daemon))
        wait_until_idle(daemon.pid)
        # The newest strangers hold every slot left to strangers, far from their deadline.
        waiting = [sock for sock in strangers if still_open(sock)]
        took = owner_creates_a_session(daemon, tmp_path / "sessions")
        still_waiting = sum(still_open(sock) for sock in waiting)
        print(
            f"\n150 idle strangers under a limit of 96 files: {len(waiting)} held slots;"
            f" the owner got in in {took:.2f} s"
        )
        # The owner was let in by dropping the oldest of them, not kept in the kernel's
        # backlog until deadlines closed them: the others still hold their slots.
        assert waiting, "no stranger was holding a slot"
        assert still_waiting == len(waiting) - 1, (
            f"{still_waiting} of {len(waiting)} strangers still connected"
        )
    finally:
        for sock in strangers:
            sock.close()
        daemon.stop()
    logs = daemon.all_logs()
    assert "Too many open files" not in logs and "out of system resource" not in logs
    assert "open-file limit (96)" in logs  # the caps were fitted to it


def test_a_junk_flood_before_the_token_does_not_grow_the_log(tmp_path: Path) -> None:
    daemon = spawn_tcp(tmp_path)
    junk = [
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        frame(b"not json at all"),
        frame({"jsonrpc": "2.0", "id": 1, "method": "session/list", "params": {"cwd": "/"}}),
        b"Content-Length: x\r\n\r\n{}",
        frame({"jsonrpc": "2.0", "method": "exit?"}),
    ] * 4
    try:
        size_before = daemon.log_path.stat().st_size if daemon.log_path else 0
        strangers = 400
        for _ in range(strangers):
            with knock(daemon, b"".join(junk)) as sock, suppress(OSError):
                sock.shutdown(socket.SHUT_WR)
                while sock.recv(1 << 16):  # until the daemon hangs up
                    pass
        wait_until_idle(daemon.pid)
        grown = (daemon.log_path.stat().st_size if daemon.log_path else 0) - size_before
        owner_creates_a_session(daemon, tmp_path / "sessions")
    finally:
        daemon.stop()
    print(f"\n{strangers} strangers x {len(junk)} junk frames: the log grew {grown / 1024:.0f} KB")
    # Unbounded, every junk frame is a warning line: about 800 KB here.
    assert grown < 64 * 1024, f"the log grew {grown} bytes"
    assert "similar messages are suppressed" in daemon.all_logs()


def test_before_the_token_a_client_may_send_a_few_small_messages(tmp_path: Path) -> None:
    daemon = spawn_tcp(tmp_path)
    try:
        chatty = daemon.tcp_peer("chatty")
        for _ in range(8):
            assert chatty.request("session/list", {"cwd": "/"})["error"]["code"] == -32002
        chatty.start("session/list", {"cwd": "/"})
        assert chatty.wait_eof(5), "a ninth message before the token was served"
        # 16 KiB at most before the token, even for an initialize that carries it
        padded = daemon.tcp_peer("padded")
        padded.start("initialize", {"authToken": TOKEN, "clientInfo": {"name": "x" * 20_000}})
        assert padded.wait_eof(5), "a 20 KB message before the token was read"
        owner_creates_a_session(daemon, tmp_path / "sessions")
    finally:
        daemon.stop()
