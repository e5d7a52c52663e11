"""Reopening with the persistent index, and following a file another program writes.

    python -m bench.follow_bench            # 100k-entry linear session, 5 runs each
    python -m bench.follow_bench --write    # also update bench/README.md

Side by side in one run, on the same generated 100k-entry session (bench/out):

- pi 0.73.1: ``SessionManager.open`` + ``buildSessionContext``, timed inside one node
  process (``bench/pi_open_context.mjs``; node's start and pi's imports not counted);
- sessiond: ``SessionStore.open`` + ``build_context``, timed inside a fresh Python
  process each run (Python's start and imports not counted, as for pi):
  the first open (no index: a full scan, which also writes the index), a reopen (the
  index read, nothing scanned), and a reopen after pi itself appended 1,000 entries to
  the file (the index read, only those lines scanned);
- live follow: a daemon holds the session open for a client (``sessiond serve --stdio``,
  the Python client); pi appends 40 entries 100 ms apart; the delay from each write
  (pi's clock after ``appendFileSync``) to the client receiving the ``session/changed``
  that announces it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.readme import write_section

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
PI_APPEND = ROOT / "tests" / "parity" / "pi_append.mjs"
PI_OPEN = ROOT / "bench" / "pi_open_context.mjs"

_OPEN_SCRIPT = """
import sys, time
from sessiond.store.session import SessionStore
started = time.perf_counter()
store = SessionStore.open(sys.argv[1])
context = store.build_context()
elapsed = time.perf_counter() - started
store.close()
print(f"{elapsed} {len(context.messages)} {store.entry_count}")
"""


def session_file() -> Path:
    from bench.generate_session import generate

    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "session-100000-linear.jsonl"
    if not path.exists():
        generate(str(path), entries=100_000, branchy=False, compactions=True, seed=7)
    return path


def pi_open(path: Path, runs: int) -> float:
    done = subprocess.run(
        ["node", str(PI_OPEN), str(path), str(runs)],
        capture_output=True,
        text=True,
        check=True,
    )
    return statistics.median(json.loads(done.stdout)["seconds"])


def sessiond_open(path: Path, cache: Path) -> float:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    done = subprocess.run(
        [sys.executable, "-c", _OPEN_SCRIPT, str(path)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return float(done.stdout.split()[0])


def opens(path: Path, runs: int) -> dict[str, float]:
    results: dict[str, list[float]] = {"first": [], "reopen": [], "after_pi": []}
    with tempfile.TemporaryDirectory() as work:
        for run in range(runs):
            cache = Path(work, f"cache-{run}")
            copy = Path(work, "session.jsonl")
            shutil.copyfile(path, copy)
            time.sleep(0.05)  # the copy's last change a timestamp tick before the index
            results["first"].append(sessiond_open(copy, cache))
            results["reopen"].append(sessiond_open(copy, cache))
            subprocess.run(
                ["node", str(PI_APPEND), str(copy), "1000"], capture_output=True, check=True
            )
            results["after_pi"].append(sessiond_open(copy, cache))
    return {name: statistics.median(values) for name, values in results.items()}


async def follow_delays(path: Path, count: int = 40) -> list[float]:
    from sessiond_client import SessiondClient
    from sessiond_client import types as t

    with tempfile.TemporaryDirectory() as work:
        copy = Path(work, "session.jsonl")
        shutil.copyfile(path, copy)
        env = {**os.environ, "XDG_CACHE_HOME": str(Path(work, "cache"))}
        client = await SessiondClient.spawn(
            [sys.executable, "-m", "sessiond", "serve", "--stdio"], env=env
        )
        try:
            await client.initialize()
            sid = (await client.open_session(copy)).session_id
            received: dict[str, float] = {}

            def note(notification: Any) -> None:
                params = notification.params
                if isinstance(params, t.SessionChanged) and params.reason == "fileAppended":
                    now = time.time() * 1000
                    for entry_id in params.appended_ids:
                        received.setdefault(entry_id, now)

            client.subscribe(note, ["session/changed"])
            process = await asyncio.create_subprocess_exec(
                "node",
                str(PI_APPEND),
                str(copy),
                str(count),
                "100",
                stdout=asyncio.subprocess.PIPE,
            )
            out, _ = await process.communicate()
            written = [json.loads(line) for line in out.decode().splitlines()]
            deadline = time.monotonic() + 5
            while len(received) < len(written) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            await client.close_session(sid)
        finally:
            await client.close()
    return [received[w["id"]] - w["writtenAt"] for w in written if w["id"] in received]


X = "\N{MULTIPLICATION SIGN}"


def table(pi: float, sessiond: dict[str, float], delays: list[float], count: int) -> str:
    def row(label: str, seconds: float, target: str) -> str:
        return f"| {label} | {seconds * 1000:,.0f} ms | {seconds / pi:.3f}{X} | {target} |"

    lines = [
        f"| open + context, 100k-entry linear session (209 MB) | time | {X} pi | target |",
        "|---|---:|---:|---:|",
        f"| pi 0.73.1 | {pi * 1000:,.0f} ms | 1{X} | |",
        row("sessiond, first open (full scan; writes the index)", sessiond["first"], f"≤ 0.12{X}"),
        row("sessiond, reopen (index)", sessiond["reopen"], f"≤ 0.05{X}"),
        row("sessiond, reopen after pi appended 1,000 entries", sessiond["after_pi"], f"≤ 0.05{X}"),
        "",
        "| live follow: pi appends, a client of the daemon hears of it | value |",
        "|---|---:|",
        f"| entries announced | {len(delays)} of {count} |",
    ]
    if delays:
        ordered = sorted(delays)
        p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
        median = statistics.median(ordered)
        lines += [
            f"| median delay from pi's write to `session/changed` | {median:.0f} ms |",
            f"| 95th percentile | {p95:.0f} ms |",
            f"| longest | {ordered[-1]:.0f} ms |",
        ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--write", action="store_true", help="update bench/README.md")
    args = parser.parse_args()
    path = session_file()
    print("pi: open + context ...", flush=True)
    pi = pi_open(path, args.runs)
    print("sessiond: first open, reopen, reopen after pi's appends ...", flush=True)
    measured = opens(path, args.runs)
    print("live follow ...", flush=True)
    delays = asyncio.run(follow_delays(path))
    body = table(pi, measured, delays, 40)
    print(body)
    if args.write:
        write_section("follow-bench", "python -m bench.follow_bench --write", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
