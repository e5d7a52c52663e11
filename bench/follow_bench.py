"""Reopening with the persistent index, and following a file another program writes.

    python -m bench.follow_bench            # 100k-entry linear session, 5 runs each
    python -m bench.follow_bench --write    # also update bench/README.md

Side by side in one run, on the same generated 100k-entry session (bench/out):

- pi: ``SessionManager.open`` + ``buildSessionContext`` in a fresh node process each
  run (``bench/pi_open_context.mjs``), timed inside the process (node's start and pi's
  imports not counted) for pi 0.73.1 and pi 1.6.0, and for pi 0.73.1 also as a whole
  process (counted, as they are for sessiond);
- sessiond through its command line: ``sessiond context FILE --json``, a whole process
  each time (Python's start, the imports and printing the context counted): the first
  open (no index: a full scan, which also writes the index), a reopen (the index read,
  nothing scanned), the first reopen after pi itself appended 1,000 entries to the file
  (the index read, only those lines scanned, the index brought up to date), and the
  reopen after that;
- live follow: a daemon holds the session open for a client (``sessiond serve --stdio``,
  the Python client); pi appends 40 entries 100 ms apart; the delay from each write
  (pi's clock after ``appendFileSync``) to the client receiving the ``session/changed``
  that announces it.

The ratios are to pi 0.73.1 inside its process: the strictest comparison, since
sessiond's figures include its start-up and pi's do not.
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
from bench.timing import median_and_range, sessiond_command

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
PI_APPEND = ROOT / "tests" / "parity" / "pi_append.mjs"
PI_OPEN = ROOT / "bench" / "pi_open_context.mjs"


def session_file() -> Path:
    from sessiond_testkit.generate_session import generate

    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "session-100000-linear.jsonl"
    if not path.exists():
        generate(str(path), entries=100_000, branchy=False, compactions=True, seed=7)
    return path


def pi_open(path: Path, version: str) -> tuple[float, float]:
    """One open + context by pi in a fresh node process: the time inside the process, and
    the whole process's."""
    started = time.perf_counter()
    done = subprocess.run(
        ["node", str(PI_OPEN), str(path), "1", version],
        capture_output=True,
        text=True,
        check=True,
    )
    whole = time.perf_counter() - started
    return json.loads(done.stdout)["seconds"][0], whole


def sessiond_context(path: Path, cache: Path) -> float:
    """``sessiond context FILE --json`` as a whole process: its wall time."""
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    started = time.perf_counter()
    subprocess.run(
        [*sessiond_command(), "context", str(path), "--json"],
        stdout=subprocess.DEVNULL,
        check=True,
        env=env,
    )
    return time.perf_counter() - started


OPENS = {
    "first": "sessiond, first open (full scan; writes the index)",
    "reopen": "sessiond, reopen (index)",
    "after_pi": "sessiond, first reopen after pi appended 1,000 entries (updates the index)",
    "after_update": "sessiond, the reopen after that (the updated index)",
}


def opens(path: Path, runs: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Run after run, pi and then sessiond (so that the VM's drift falls on both alike)."""
    pi: dict[str, list[float]] = {"0.73": [], "1.6": [], "whole": []}
    results: dict[str, list[float]] = {name: [] for name in OPENS}
    with tempfile.TemporaryDirectory() as work:
        for run in range(runs):
            inside, whole = pi_open(path, "0.73")
            pi["0.73"].append(inside)
            pi["whole"].append(whole)
            pi["1.6"].append(pi_open(path, "1.6")[0])
            cache = Path(work, f"cache-{run}")
            copy = Path(work, "session.jsonl")
            shutil.copyfile(path, copy)
            time.sleep(0.05)  # the copy's last change a timestamp tick before the index
            results["first"].append(sessiond_context(copy, cache))
            results["reopen"].append(sessiond_context(copy, cache))
            subprocess.run(
                ["node", str(PI_APPEND), str(copy), "1000"], capture_output=True, check=True
            )
            time.sleep(0.05)  # as above: an index written within a tick would be racy
            results["after_pi"].append(sessiond_context(copy, cache))
            results["after_update"].append(sessiond_context(copy, cache))
    return pi, results


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


def table(
    pi: dict[str, list[float]],
    sessiond: dict[str, list[float]],
    delays: list[float] | None,
    count: int,
) -> str:
    reference = statistics.median(pi["0.73"])

    def row(label: str, values: list[float], target: str) -> str:
        ratio = statistics.median(values) / reference
        return f"| {label} | {median_and_range(values)} | {ratio:.3f}{X} | {target} |"

    lines = [
        f"| open + context, 100k-entry linear session (209 MB) | median (range) | {X} pi 0.73.1 "
        "| target |",
        "|---|---:|---:|---:|",
        row("pi 0.73.1, inside the process", pi["0.73"], ""),
        row("pi 1.6.0, inside the process", pi["1.6"], ""),
        row("pi 0.73.1, whole process (node)", pi["whole"], ""),
        row(OPENS["first"], sessiond["first"], f"≤ 0.12{X}"),
        row(OPENS["reopen"], sessiond["reopen"], f"≤ 0.05{X}"),
        row(OPENS["after_pi"], sessiond["after_pi"], f"≤ 0.05{X}"),
        row(OPENS["after_update"], sessiond["after_update"], f"≤ 0.05{X}"),
    ]
    if delays is None:
        return "\n".join(lines)
    lines += [
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
    parser.add_argument("--no-follow", action="store_true", help="measure the opens only")
    parser.add_argument("--write", action="store_true", help="update bench/README.md")
    args = parser.parse_args()
    path = session_file()
    print("open + context: pi, then sessiond, run after run ...", flush=True)
    pi, measured = opens(path, args.runs)
    print("live follow ...", flush=True)
    delays = None if args.no_follow else asyncio.run(follow_delays(path))
    body = table(pi, measured, delays, 40)
    print(body)
    if args.write:
        write_section("follow-bench", "python -m bench.follow_bench --write", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
