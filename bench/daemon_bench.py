"""The daemon side by side with pi's own RPC mode, measured with the same kind of client.

    python -m bench.daemon_bench            # needs node and `npm ci` in tests/parity
    python -m bench.daemon_bench --write    # also update bench/README.md

Both servers are driven over stdio by the same minimal clients (one process, one
pipe each way: asyncio for requests in flight, blocking for sequential ones); only
the framing differs: pi speaks JSON lines, sessiond speaks Content-Length frames.
Measured:

- start to first answer: process spawn to the answer of the first request
  (pi: ``get_state``; sessiond: ``initialize``);
- sequential round trips (each answer awaited, from a blocking client so that the
  client's event loop is not what is timed): pi ``get_state``; sessiond
  ``context/usage`` and ``session/append``;
- 64 requests in flight: the same requests, pipelined;
- ``context/build`` on a 10k-entry session (pi: ``get_messages`` of that session);
- the daemon's RSS idle and with a 100k-entry session open;
- the floor: sequential round trips to a Python asyncio server that does nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.readme import write_section

ROOT = Path(__file__).resolve().parent.parent
PI_CLI = ROOT / "tests/parity/node_modules/@mariozechner/pi-coding-agent/dist/cli.js"
# The whole measurement, not each call: a per-call timer (asyncio.wait_for) costs more
# than a cheap server's answer and would be what a sequential measure measures.
RUN_TIMEOUT = 900.0
SESSIOND_SERVE = [sys.executable, "-m", "sessiond", "serve", "--stdio"]
_HEADER_END = b"\r\n\r\n"


def split_frames(buffer: bytes) -> tuple[list[Any], bytes]:
    messages = []
    while (end := buffer.find(_HEADER_END)) >= 0:
        length = 0
        for line in buffer[:end].split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        start = end + len(_HEADER_END)
        if len(buffer) < start + length:
            break
        messages.append(json.loads(buffer[start : start + length]))
        buffer = buffer[start + length :]
    return messages, buffer


def split_lines(buffer: bytes) -> tuple[list[Any], bytes]:
    *lines, rest = buffer.split(b"\n")
    return [json.loads(line) for line in lines if line.strip()], rest


class Peer:
    """A server on a subprocess's stdio, with request/response matching by id."""

    def __init__(self, process: asyncio.subprocess.Process, framed: bool) -> None:
        self.process = process
        self.framed = framed
        self.pending: dict[str, asyncio.Future[Any]] = {}
        self.counter = 0
        self.reader = asyncio.ensure_future(self._read())

    @classmethod
    async def start(cls, command: list[str], framed: bool, env: dict[str, str]) -> Peer:
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=env,
            limit=1 << 26,
        )
        return cls(process, framed)

    def send(self, message: dict[str, Any]) -> asyncio.Future[Any]:
        self.counter += 1
        ident = str(self.counter)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[ident] = future
        if self.framed:
            body = json.dumps({"jsonrpc": "2.0", "id": ident, **message}).encode()
            data = b"Content-Length: %d\r\n\r\n" % len(body) + body
        else:
            data = json.dumps({"id": ident, **message}).encode() + b"\n"
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        return future

    async def call(self, message: dict[str, Any]) -> Any:
        return await self.send(message)

    async def _read(self) -> None:
        try:
            await self._read_answers()
        finally:
            # A server that exits must fail the measurement, not hang it.
            for future in self.pending.values():
                if not future.done():
                    future.set_exception(RuntimeError(f"server exited: {self.process.returncode}"))

    async def _read_answers(self) -> None:
        # Whole chunks parsed here rather than StreamReader.readline per header line: the
        # client's cost per answer must stay small next to either server's.
        stream = self.process.stdout
        assert stream is not None
        buffer = b""
        while data := await stream.read(1 << 20):
            buffer += data
            messages, buffer = split_frames(buffer) if self.framed else split_lines(buffer)
            for message in messages:
                ident = message.get("id")
                future = self.pending.pop(str(ident), None) if ident is not None else None
                if future is not None and not future.done():
                    future.set_result(message)

    async def close(self) -> None:
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        self.reader.cancel()

    def rss_mb(self) -> float:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        return int(status.split("VmRSS:")[1].split()[0]) / 1024


class BlockingPeer:
    """A server on a subprocess's stdio for sequential round trips: a blocking write, then
    blocking reads until the answer, with no event loop in between, so that what is timed
    is the server's answer and not the client's scheduling."""

    def __init__(self, command: list[str], framed: bool, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            bufsize=0,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.framed = framed
        self.counter = 0
        self.buffer = b""
        self.waiting: list[Any] = []
        self.out = self.process.stdin.fileno()
        self.inp = self.process.stdout.fileno()
        self.poll = select.poll()
        self.poll.register(self.inp, select.POLLIN)

    def call(self, message: dict[str, Any]) -> Any:
        self.counter += 1
        ident = str(self.counter)
        if self.framed:
            body = json.dumps({"jsonrpc": "2.0", "id": ident, **message}).encode()
            data = b"Content-Length: %d\r\n\r\n" % len(body) + body
        else:
            data = json.dumps({"id": ident, **message}).encode() + b"\n"
        os.write(self.out, data)
        while True:
            while self.waiting:
                answer = self.waiting.pop(0)
                if str(answer.get("id")) == ident:
                    return answer
            if not self.poll.poll(RUN_TIMEOUT * 1000):
                raise TimeoutError(f"no answer to {message} in {RUN_TIMEOUT} s")
            chunk = os.read(self.inp, 1 << 20)
            if not chunk:
                raise RuntimeError(f"server exited: {self.process.wait()}")
            self.buffer += chunk
            split = split_frames if self.framed else split_lines
            self.waiting, self.buffer = split(self.buffer)

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


def record_sequential(
    results: dict[str, Any], key: str, count: int, peer: BlockingPeer, message: dict[str, Any]
) -> None:
    """``results[key]``: round trips per second; ``results[key + "_cpu_us"]``: the server's
    CPU time (user + system) per request. The rate is the server and the client taking
    turns; the CPU time is the server alone."""
    peer.call(message)
    cpu_before = peer.cpu_seconds()
    started = time.perf_counter()
    for _ in range(count):
        peer.call(message)
    elapsed = time.perf_counter() - started
    results[key] = count / elapsed
    results[f"{key}_cpu_us"] = (peer.cpu_seconds() - cpu_before) / count * 1e6


def say(what: str) -> None:
    print(f"[daemon_bench] {what}", file=sys.stderr, flush=True)


def isolated_env(home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_STATE_HOME": str(home / ".local/state"),
        "XDG_RUNTIME_DIR": str(home / "run"),
    }


async def rate_in_flight(
    count: int, send: Callable[[], asyncio.Future[Any]], window: int = 64
) -> float:
    started = time.perf_counter()
    pending: set[asyncio.Future[Any]] = set()
    for _ in range(count):
        pending.add(send())
        if len(pending) >= window:
            _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
    await asyncio.gather(*pending)
    return count / (time.perf_counter() - started)


async def sessiond_peer(env: dict[str, str]) -> tuple[Peer, float]:
    started = time.perf_counter()
    peer = await Peer.start(SESSIOND_SERVE, True, env)
    answer = await peer.call({"method": "initialize", "params": {"clientInfo": {"name": "bench"}}})
    assert "result" in answer, answer
    return peer, time.perf_counter() - started


def pi_command(session: Path | None) -> list[str]:
    command = ["node", str(PI_CLI), "--mode", "rpc", "--no-extensions", "--no-skills"]
    return command + (["--session", str(session)] if session else ["--no-session"])


async def pi_peer(env: dict[str, str], session: Path | None = None) -> tuple[Peer, float]:
    started = time.perf_counter()
    peer = await Peer.start(pi_command(session), False, env)
    answer = await peer.call({"type": "get_state"})
    assert answer.get("success"), answer
    return peer, time.perf_counter() - started


def working_copy(source: Path, directory: Path) -> Path:
    """A copy of a cached session whose header names ``directory`` as its cwd.

    pi refuses a session whose stored working directory does not exist, and the servers
    must not leave locks or repairs in the cache.
    """
    copy = directory / source.name
    with source.open("rb") as reader, copy.open("wb") as writer:
        header = json.loads(reader.readline())
        header["cwd"] = str(directory)
        writer.write(json.dumps(header).encode() + b"\n")
        shutil.copyfileobj(reader, writer, 1 << 20)
    return copy


async def measure(count: int, big: Path, medium: Path) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch)
        env = isolated_env(home)
        big, medium = working_copy(big, home), working_copy(medium, home)
        starts = []
        say("sessiond: start to first answer")
        for _ in range(5):
            peer, elapsed = await sessiond_peer(env)
            starts.append(elapsed)
            await peer.close()
        results["sessiond_start_s"] = statistics.median(starts)
        peer, _ = await sessiond_peer(env)
        results["sessiond_rss_idle_mb"] = peer.rss_mb()
        new_session = {
            "method": "session/new",
            "params": {"cwd": str(home), "sessionDir": str(home / "s"), "writeNow": True},
        }
        new = await peer.call(new_session)
        sid = new["result"]["sessionId"]
        body = {"type": "message", "message": {"role": "user", "content": "hi " * 50}}
        usage = {"method": "context/usage", "params": {"sessionId": sid}}
        append = {"method": "session/append", "params": {"sessionId": sid, "entries": [body]}}
        await peer.call(usage)
        say("sessiond: round trips")
        blocking = BlockingPeer(SESSIOND_SERVE, True, env)
        try:
            blocking.call({"method": "initialize", "params": {"clientInfo": {"name": "bench"}}})
            own = blocking.call(new_session)["result"]["sessionId"]
            own_usage = {"method": "context/usage", "params": {"sessionId": own}}
            own_append = {
                "method": "session/append",
                "params": {"sessionId": own, "entries": [body]},
            }
            record_sequential(results, "sessiond_usage_seq", count, blocking, own_usage)
            record_sequential(results, "sessiond_append_seq", count, blocking, own_append)
        finally:
            blocking.close()
        say("floor: a no-op asyncio server, same client")
        noop = BlockingPeer([sys.executable, str(ROOT / "bench/noop_server.py")], True, env)
        try:
            record_sequential(results, "noop_seq", count, noop, {"method": "noop", "params": {}})
        finally:
            noop.close()
        results["sessiond_usage_64"] = await rate_in_flight(count * 3, lambda: peer.send(usage))
        results["sessiond_append_64"] = await rate_in_flight(count * 3, lambda: peer.send(append))
        say("sessiond: context/build on 10k entries, open 100k")
        opened = await peer.call({"method": "session/open", "params": {"path": str(medium)}})
        medium_id = opened["result"]["sessionId"]
        build = {"method": "context/build", "params": {"sessionId": medium_id, "format": "llm"}}
        samples = []
        for _ in range(20):
            started = time.perf_counter()
            await peer.call(build)
            samples.append(time.perf_counter() - started)
        results["sessiond_build_10k_ms"] = statistics.median(samples) * 1000
        started = time.perf_counter()
        await peer.call({"method": "session/open", "params": {"path": str(big)}})
        results["sessiond_open_100k_s"] = time.perf_counter() - started
        results["sessiond_rss_100k_mb"] = peer.rss_mb()
        await peer.close()

        if PI_CLI.exists() and shutil.which("node"):
            starts = []
            say("pi: start to first answer, round trips")
            for _ in range(3):
                pi, elapsed = await pi_peer(env)
                starts.append(elapsed)
                await pi.close()
            results["pi_start_s"] = statistics.median(starts)
            pi, _ = await pi_peer(env)
            results["pi_rss_idle_mb"] = pi.rss_mb()
            state = {"type": "get_state"}
            blocking = BlockingPeer(pi_command(None), False, env)
            try:
                record_sequential(results, "pi_state_seq", count, blocking, state)
            finally:
                blocking.close()
            results["pi_state_64"] = await rate_in_flight(count * 3, lambda: pi.send(state))
            await pi.close()
            say("pi: get_messages on 10k entries")
            pi, _ = await pi_peer(env, medium)
            samples = []
            for _ in range(20):
                started = time.perf_counter()
                await pi.call({"type": "get_messages"})
                samples.append(time.perf_counter() - started)
            results["pi_messages_10k_ms"] = statistics.median(samples) * 1000
            await pi.close()
    return results


def table(r: dict[str, Any]) -> str:
    def num(key: str, fmt: str) -> str:
        return format(r[key], fmt) if key in r else "n/a"

    def cpu(key: str) -> str:
        return f"server CPU {num(key + '_cpu_us', '.0f')} µs each"

    rows = [
        (
            "start to first answer",
            f"{num('sessiond_start_s', '.2f')} s",
            f"{num('pi_start_s', '.2f')} s",
        ),
        (
            "sequential, context/usage (pi: get_state)",
            f"{num('sessiond_usage_seq', ',.0f')}/s ({cpu('sessiond_usage_seq')})",
            f"{num('pi_state_seq', ',.0f')}/s ({cpu('pi_state_seq')})",
        ),
        (
            "sequential, session/append",
            f"{num('sessiond_append_seq', ',.0f')}/s ({cpu('sessiond_append_seq')})",
            "—",
        ),
        (
            "sequential, a no-op asyncio server (`bench/noop_server.py`)",
            f"{num('noop_seq', ',.0f')}/s ({cpu('noop_seq')})",
            "—",
        ),
        (
            "64 in flight, context/usage (pi: get_state)",
            f"{num('sessiond_usage_64', ',.0f')}/s",
            f"{num('pi_state_64', ',.0f')}/s",
        ),
        ("64 in flight, session/append", f"{num('sessiond_append_64', ',.0f')}/s", "—"),
        (
            "context/build, 10k entries, llm form (pi: get_messages)",
            f"{num('sessiond_build_10k_ms', '.1f')} ms",
            f"{num('pi_messages_10k_ms', '.1f')} ms",
        ),
        (
            "RSS idle",
            f"{num('sessiond_rss_idle_mb', '.0f')} MB",
            f"{num('pi_rss_idle_mb', '.0f')} MB",
        ),
        (
            "open a 100k-entry session; RSS after",
            f"{num('sessiond_open_100k_s', '.2f')} s; {num('sessiond_rss_100k_mb', '.0f')} MB",
            "—",
        ),
    ]
    lines = ["| measure | sessiond | pi 0.73.1 `--mode rpc` |", "|---|---:|---:|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=3000, help="sequential requests per measure")
    parser.add_argument("--write", action="store_true", help="update bench/README.md")
    args = parser.parse_args()
    from bench.store_bench import session_file

    big = session_file(100_000, False)
    medium = session_file(10_000, False)
    results = asyncio.run(asyncio.wait_for(measure(args.count, big, medium), RUN_TIMEOUT))
    print(json.dumps(results, indent=2))
    print(table(results))
    if args.write:
        write_section("daemon-bench", "python -m bench.daemon_bench --write", table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
