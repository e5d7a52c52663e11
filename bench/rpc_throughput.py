"""JSON-RPC round trips per second: sessiond's layer (stdio, Unix socket, TCP) against pygls.

    python bench/rpc_throughput.py                 # all transports, ours and pygls
    python bench/rpc_throughput.py --n 20000 --transports stdio --servers ours
    python bench/rpc_throughput.py --uvloop        # server and client on uvloop (if installed)

Each run spawns a tiny echo server (``serve`` / ``serve-pygls`` below), sends ``initialize``
(ours only), then measures ``--n`` sequential requests (await each answer) and ``--n``
pipelined requests (64 in flight). Params are about 90 bytes of JSON, the size of a
typical ``context/usage`` request. The client is a minimal asyncio ``Protocol`` with
msgspec and sessiond's frame parser: it should cost less than either server.
Also reports the time from exec to the first answer (initialize; for pygls, the first echo).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "daemon")]

from bench.readme import write_section  # noqa: E402
from sessiond.jsonrpc.header_framing import FrameParser, encode_frame  # noqa: E402

PARAMS = {"text": "the quick brown fox jumps over the lazy dog", "n": 42, "items": [1, 2, 3]}
IN_FLIGHT = 64
_LISTENING = re.compile(r"listening on (?:tcp|unix) (\S+)")


# -- servers -------------------------------------------------------------------------------------


def serve_ours(argv: list[str]) -> int:
    from sessiond.jsonrpc import (
        RequestContext,
        Router,
        RpcServer,
        add_server_arguments,
        configure_logging,
        endpoint_from_args,
        loop_factory_from_args,
    )

    parser = argparse.ArgumentParser()
    add_server_arguments(parser)
    args = parser.parse_args(argv)
    configure_logging("WARNING", args.log_file)
    router = Router()

    @router.request("initialize", dict[str, Any])
    def initialize(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        return {"capabilities": {}}

    @router.request("echo", dict[str, Any])
    async def echo(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        return params

    @router.request("echoSync", dict[str, Any])
    def echo_sync(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        return params

    return RpcServer(router).run(
        endpoint_from_args(args), loop_factory=loop_factory_from_args(args)
    )


def serve_pygls(argv: list[str]) -> int:
    """Stock pygls 2 ``JsonRPCServer``: dict params pass through, echo returns them."""
    from pygls.protocol import (
        JsonRPCNotification,
        JsonRPCProtocol,
        JsonRPCRequestMessage,
        JsonRPCResponseMessage,
        default_converter,
    )
    from pygls.server import JsonRPCServer

    def converter_factory() -> Any:
        converter = default_converter()
        for message_type in (JsonRPCRequestMessage, JsonRPCNotification, JsonRPCResponseMessage):
            converter.register_structure_hook(message_type, lambda data, cls: cls(**data))
        return converter

    server = JsonRPCServer(protocol_cls=JsonRPCProtocol, converter_factory=converter_factory)

    @server.feature("echo")
    async def echo(params: Any) -> Any:
        return params

    if argv and argv[0] == "--tcp":
        server.start_tcp("127.0.0.1", int(argv[1]))
    else:
        server.start_io()
    return 0


# -- client ----------------------------------------------------------------------------------------


class _Request(msgspec.Struct):
    id: int
    method: str
    params: Any
    jsonrpc: str = "2.0"


class _Response(msgspec.Struct):
    id: int | str | None = None
    result: msgspec.Raw = msgspec.Raw()
    error: Any = None


class BenchClient(asyncio.Protocol):
    def __init__(self) -> None:
        self._parser = FrameParser()
        self._decoder = msgspec.json.Decoder(_Response)
        self._encoder = msgspec.json.Encoder()
        self._waiting: dict[int, asyncio.Future[_Response]] = {}
        self._next_id = 0
        self._write: Callable[[bytes], None] | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def attach(self, write: Callable[[bytes], None]) -> None:
        self._write = write

    def data_received(self, data: bytes) -> None:
        for body in self._parser.feed(data):
            if not isinstance(body, bytes):
                raise RuntimeError(f"bad frame from server: {body}")
            response = self._decoder.decode(body)
            if isinstance(response.id, int) and response.id in self._waiting:
                self._waiting.pop(response.id).set_result(response)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)

    def call(self, method: str, params: Any) -> asyncio.Future[_Response]:
        assert self._write is not None
        self._next_id += 1
        future: asyncio.Future[_Response] = asyncio.get_running_loop().create_future()
        self._waiting[self._next_id] = future
        self._write(encode_frame(self._encoder.encode(_Request(self._next_id, method, params))))
        return future

    def notify(self, method: str) -> None:
        assert self._write is not None
        self._write(encode_frame(self._encoder.encode({"jsonrpc": "2.0", "method": method})))


async def sequential(client: BenchClient, n: int, method: str) -> float:
    start = time.perf_counter()
    for _ in range(n):
        response = await client.call(method, PARAMS)
        if response.error is not None:
            raise RuntimeError(f"error answer: {response.error}")
    return n / (time.perf_counter() - start)


async def pipelined(client: BenchClient, n: int, method: str) -> float:
    start = time.perf_counter()
    window: set[asyncio.Future[_Response]] = set()
    sent = 0
    while sent < n or window:
        while sent < n and len(window) < IN_FLIGHT:
            window.add(client.call(method, PARAMS))
            sent += 1
        done, window = await asyncio.wait(window, return_when=asyncio.FIRST_COMPLETED)
        for future in done:
            if future.result().error is not None:
                raise RuntimeError(f"error answer: {future.result().error}")
    return n / (time.perf_counter() - start)


# -- one run ---------------------------------------------------------------------------------------


async def run_one(
    server: str, transport: str, n: int, use_uvloop: bool, method: str
) -> dict[str, float]:
    loop = asyncio.get_running_loop()
    script = [sys.executable, str(Path(__file__).resolve())]
    extra = ["--loop", "uvloop"] if use_uvloop and server == "ours" else []
    env = dict(os.environ, SESSIOND_TOKEN="bench-token")
    with tempfile.TemporaryDirectory() as tmp:
        if transport == "stdio":
            command = [*script, "serve" if server == "ours" else "serve-pygls", "--stdio", *extra]
            if server == "pygls":
                command = [*script, "serve-pygls"]
        elif transport == "unix":
            command = [*script, "serve", "--socket", f"{tmp}/s.sock", *extra]
        elif server == "ours":
            command = [*script, "serve", "--tcp", "127.0.0.1:0", *extra]
        else:
            command = [*script, "serve-pygls", "--tcp", str(_free_port())]
        started = time.perf_counter()
        process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if transport != "stdio" else subprocess.DEVNULL,
            env=env,
        )
        try:
            client = BenchClient()
            if transport == "stdio":
                assert process.stdin is not None and process.stdout is not None
                writer, _ = await loop.connect_write_pipe(asyncio.BaseProtocol, process.stdin)
                await loop.connect_read_pipe(lambda: client, process.stdout)
                client.attach(writer.write)
            else:
                address = (
                    await _wait_for_address(process)
                    if server == "ours"
                    else f"127.0.0.1:{command[-1]}"
                )
                transport_obj = await _connect(loop, client, transport, address)
                client.attach(transport_obj.write)
            if server == "ours":
                first = await client.call("initialize", {"authToken": "bench-token"})
                assert first.error is None, first.error
                client.notify("initialized")
            else:
                await client.call(method, PARAMS)
            first_answer = time.perf_counter() - started
            await sequential(client, min(500, n), method)  # warm up
            cpu_before = _cpu_seconds(process.pid)
            seq = await sequential(client, n, method)
            cpu_between = _cpu_seconds(process.pid)
            pipe = await pipelined(client, n, method)
            cpu_after = _cpu_seconds(process.pid)
            return {
                "first": first_answer,
                "sequential": seq,
                "pipelined": pipe,
                "seq_cpu_us": (cpu_between - cpu_before) / n * 1e6,
                "pipe_cpu_us": (cpu_after - cpu_between) / n * 1e6,
            }
        finally:
            process.kill()
            process.wait()


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux ``/proc``): robust to a busy machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def _wait_for_address(process: subprocess.Popen[bytes]) -> str:
    assert process.stderr is not None
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, process.stderr.readline)
        if not line:
            raise RuntimeError("server exited before listening")
        match = _LISTENING.search(line.decode())
        if match:
            return match.group(1)


async def _connect(
    loop: asyncio.AbstractEventLoop, client: BenchClient, transport: str, address: str
) -> asyncio.Transport:
    if transport == "unix":
        for _ in range(100):
            try:
                connected, _ = await loop.create_unix_connection(lambda: client, address)
                return connected
            except (FileNotFoundError, ConnectionRefusedError):
                await asyncio.sleep(0.02)
        raise RuntimeError("cannot connect")
    host, _, port = address.rpartition(":")
    for _ in range(200):
        try:
            connected, _ = await loop.create_connection(lambda: client, host, int(port))
            return connected
        except ConnectionRefusedError:
            await asyncio.sleep(0.02)
    raise RuntimeError("cannot connect")


def bench(args: argparse.Namespace) -> list[tuple[str, str, list[dict[str, float]]]]:
    rows = []
    for server in args.servers:
        for transport in args.transports:
            if server == "pygls" and transport == "unix":
                continue  # pygls has no Unix-socket transport
            runs = []
            for _ in range(args.repeat):
                runner = _runner(args.uvloop)
                runs.append(runner(run_one(server, transport, args.n, args.uvloop, args.method)))
            rows.append((server, transport, runs))
    loop_name = "uvloop" if args.uvloop else "asyncio"
    print(f"\n{args.n} requests per measurement, {args.repeat} runs, loop: {loop_name}")
    print("req/s: median (min-max); server CPU: median microseconds of CPU per request")
    print(
        f"{'server':8} {'transport':9} {'sequential req/s':>24} {'64 in flight req/s':>24}"
        f" {'server CPU seq/pipe':>20} {'first answer ms':>18}"
    )
    for server, transport, runs in rows:
        seq = [r["sequential"] for r in runs]
        pipe = [r["pipelined"] for r in runs]
        first = [r["first"] * 1000 for r in runs]
        cpu = (
            f"{statistics.median(r['seq_cpu_us'] for r in runs):.0f} / "
            f"{statistics.median(r['pipe_cpu_us'] for r in runs):.0f} us"
        )
        print(
            f"{server:8} {transport:9} {_span(seq):>24} {_span(pipe):>24} {cpu:>20}"
            f" {_span(first):>18}"
        )
    return rows


def write_table(
    args: argparse.Namespace, rows: list[tuple[str, str, list[dict[str, float]]]]
) -> None:
    """This benchmark's section of bench/README.md: a table of ``rows``."""
    names = {"ours": "sessiond (`jsonrpc/`)", "pygls": "pygls 2.1 `JsonRPCServer`"}
    lines = [
        "| server | transport | sequential req/s | 64 in flight req/s"
        " | server CPU per request (seq / pipelined) | first answer |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for server, transport, runs in rows:
        seq = statistics.median(r["sequential"] for r in runs)
        pipe = statistics.median(r["pipelined"] for r in runs)
        cpu_seq = statistics.median(r["seq_cpu_us"] for r in runs)
        cpu_pipe = statistics.median(r["pipe_cpu_us"] for r in runs)
        first = statistics.median(r["first"] for r in runs) * 1000
        lines.append(
            f"| {names[server]} | {transport} | {seq:,.0f} | {pipe:,.0f}"
            f" | {cpu_seq:.0f} / {cpu_pipe:.0f} µs | {first:.0f} ms |"
        )
    conditions = (
        f"loop {'uvloop' if args.uvloop else 'asyncio'}, {args.n:,} requests per measure,"
        f" median of {args.repeat} runs"
    )
    write_section(
        "rpc-bench", "python -m bench.rpc_throughput --write", "\n".join(lines), conditions
    )


def _runner(use_uvloop: bool) -> Callable[[Any], dict[str, float]]:
    if use_uvloop:
        import uvloop

        return uvloop.run  # type: ignore[no-any-return]
    return asyncio.run


def _span(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:,.0f}"
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        sys.exit(serve_ours(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] == "serve-pygls":
        sys.exit(serve_pygls(sys.argv[2:]))
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--servers", nargs="+", default=["ours", "pygls"], choices=["ours", "pygls"]
    )
    parser.add_argument(
        "--transports",
        nargs="+",
        default=["stdio", "unix", "tcp"],
        choices=["stdio", "unix", "tcp"],
    )
    parser.add_argument("--method", default="echo", choices=["echo", "echoSync"])
    parser.add_argument("--uvloop", action="store_true")
    parser.add_argument("--write", action="store_true", help="update bench/README.md")
    args = parser.parse_args()
    rows = bench(args)
    if args.write:
        write_table(args, rows)


if __name__ == "__main__":
    main()
