"""Cancelling a summary while the model's server never answers, side by side with pi.

    python -m bench.cancel_bench            # 20 runs each
    python -m bench.cancel_bench --write    # also update bench/README.md

A loopback HTTP server takes each request and never answers; it notes when the client
closes the connection. For each provider form (OpenAI-compatible, Anthropic), the caller
cancels once the server holds the request: sessiond's summarizer task is cancelled
(``task.cancel()``, as the daemon does for ``$/cancelRequest`` or ``compaction/abort``),
pi 0.73.1's ``completeSimple`` is aborted through its ``AbortSignal``
(``bench/pi_abort.mjs``, as pi's compaction does). Measured: the time until the call has
ended for the caller, and until the server saw the connection closed (the request
really stopped, not left running; pi's side of it is read from node's clock, to the
millisecond). The tests hold only that both happen
(``tests/llm/test_llm_cancel_and_secrets.py``); how fast is measured here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import select
import socket
import statistics
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench.readme import write_section

ROOT = Path(__file__).resolve().parent.parent
PI_ABORT = ROOT / "bench" / "pi_abort.mjs"


class HangingServer:
    """Takes a request and never answers; records when each client hangs up."""

    def __init__(self) -> None:
        self.arrived = 0
        self.hung_up_at: list[float] = []  # time.time() of each hang-up
        self.stopping = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # the count of requests held, for the node side
                body = str(server.arrived).encode()
                self.send_response(200)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", "0")))
                server.arrived += 1
                connection = self.connection
                while not server.stopping.is_set():
                    if select.select([connection], [], [], 0.001)[0]:
                        try:
                            gone = not connection.recv(1, socket.MSG_PEEK)
                        except OSError:
                            gone = True
                        if gone:
                            server.hung_up_at.append(time.time())
                            return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def wait_for_hang_up(server: HangingServer, count: int) -> float | None:
    deadline = time.monotonic() + 5
    while len(server.hung_up_at) < count and time.monotonic() < deadline:
        time.sleep(0.001)
    return server.hung_up_at[count - 1] if len(server.hung_up_at) >= count else None


async def sessiond_runs(
    server: HangingServer, form: str, runs: int
) -> tuple[list[float], list[float]]:
    from sessiond.llm import CompletionRequest
    from sessiond.llm.anthropic import AnthropicSummarizer
    from sessiond.llm.openai import OpenAIChatSummarizer

    request = CompletionRequest(system_prompt="Summarize.", prompt="a conversation", max_tokens=100)
    ended: list[float] = []
    closed: list[float] = []
    for _ in range(runs):
        summarizer = (
            OpenAIChatSummarizer(model="m", base_url=f"{server.url}/v1")
            if form == "openai"
            else AnthropicSummarizer(model="m", base_url=server.url)
        )
        before, hung_up = server.arrived, len(server.hung_up_at)
        task = asyncio.create_task(summarizer.complete(request))
        while server.arrived == before:
            await asyncio.sleep(0.005)
        await asyncio.sleep(0.05)  # settled into waiting for the answer
        cancelled_at, started = time.time(), time.perf_counter()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        ended.append(time.perf_counter() - started)
        seen = await asyncio.to_thread(wait_for_hang_up, server, hung_up + 1)
        if seen is not None:
            closed.append(seen - cancelled_at)
    return ended, closed


def pi_runs(server: HangingServer, form: str, runs: int) -> tuple[list[float], list[float]]:
    api, base = (
        ("openai-completions", f"{server.url}/v1")
        if form == "openai"
        else ("anthropic-messages", server.url)
    )
    hung_up = len(server.hung_up_at)
    done = subprocess.run(
        ["node", str(PI_ABORT), base, api, str(runs)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    result = json.loads(done.stdout)
    wait_for_hang_up(server, hung_up + runs)
    seen = server.hung_up_at[hung_up:]
    closed = [at - aborted / 1000 for at, aborted in zip(seen, result["abortedAt"], strict=False)]
    return [s / 1000 for s in result["settled"]], closed


def cell(values: list[float], expected: int) -> str:
    if not values:
        return "never"
    median, low, high = (v * 1000 for v in (statistics.median(values), min(values), max(values)))
    shown = f"{median:.1f} ms ({low:.1f}\N{EN DASH}{high:.1f})"
    return shown if len(values) == expected else f"{shown}, {len(values)} of {expected}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--write", action="store_true", help="update bench/README.md")
    args = parser.parse_args()
    server = HangingServer()
    rows = [
        "| cancelled while the server holds the request | call ended, median (range) "
        "| connection closed, median (range) |",
        "|---|---:|---:|",
    ]
    try:
        for form, label in (("openai", "OpenAI-compatible"), ("anthropic", "Anthropic")):
            measured = {
                "sessiond": asyncio.run(sessiond_runs(server, form, args.runs)),
                "pi 0.73.1": pi_runs(server, form, args.runs),
            }
            for who, (ended, closed) in measured.items():
                rows.append(
                    f"| {who}, {label} | {cell(ended, args.runs)} | {cell(closed, args.runs)} |"
                )
    finally:
        server.stop()
    body = "\n".join(rows)
    print(body)
    if args.write:
        write_section(
            "cancel-bench", "python -m bench.cancel_bench --write", body, f"{args.runs} runs each"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
