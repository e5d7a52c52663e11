"""Benchmarks of the session store and the compaction preparation.

    python -m bench.store_bench                 # 1k, 10k, 100k; linear and branchy
    python -m bench.store_bench --sizes 1000    # quicker
    python -m bench.store_bench --write         # also update bench/README.md

Measures, on generated pi sessions (sessiond_testkit/generate_session.py, ~2 KB an entry,
with compactions, labels and tool output of varied sizes):

- open + context: a fresh process that opens the file read-only and builds the
  context at the leaf; wall time of the whole process and its peak RSS;
- context: building the leaf's context again in a warm process (the store keeps
  it up to date incrementally);
- append: one ``session/append``-sized entry at a time, "batch" fsync policy;
- prepare: ``prepareCompaction`` at the leaf (``compaction/prepare``, dry run);
- summarizer input: converting and serializing the messages it would summarize.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.readme import write_section

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"

# Peak RSS comes from VmHWM: ru_maxrss is inherited across fork and exec on Linux,
# so a child would report its parent's high-water mark.
_OPEN_SCRIPT = """
import sys, time
started = time.perf_counter()
from sessiond.store.session import SessionStore
store = SessionStore.open(sys.argv[1], readonly=True)
context = store.build_context()
elapsed = time.perf_counter() - started
status = open("/proc/self/status").read()
peak = int(status.split("VmHWM:")[1].split()[0])
print(f"{elapsed} {peak} {len(context.messages)} {store.entry_count}")
"""


def session_file(entries: int, branchy: bool) -> Path:
    from sessiond_testkit.generate_session import generate

    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"session-{entries}-{'branchy' if branchy else 'linear'}.jsonl"
    if not path.exists():
        generate(str(path), entries=entries, branchy=branchy, compactions=True, seed=7)
    return path


def open_and_context(path: Path, runs: int) -> tuple[float, float, int]:
    """Median wall time (s) of a whole process, its peak RSS (MB), context size."""
    times: list[float] = []
    peaks: list[float] = []
    messages = 0
    for _ in range(runs):
        started = time.perf_counter()
        with tempfile.TemporaryDirectory() as cache:
            # A cache of its own each run: this measures a first open (a full scan); a
            # reopen from the persistent index is bench/follow_bench.py's.
            output = subprocess.run(
                [sys.executable, "-c", _OPEN_SCRIPT, str(path)],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "XDG_CACHE_HOME": cache},
            ).stdout.split()
        times.append(time.perf_counter() - started)
        peaks.append(int(output[1]) / 1024)
        messages = int(output[2])
    return statistics.median(times), max(peaks), messages


def warm_measures(path: Path) -> dict[str, float]:
    from sessiond.core.convert import convert_to_llm
    from sessiond.core.serialize import serialize_conversation
    from sessiond.service.compactor import prepare
    from sessiond.settings import CompactionSettings
    from sessiond.store.session import SessionStore
    from sessiond.tiktoken_offline import estimator

    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / path.name
        shutil.copyfile(path, copy)
        with SessionStore.open(copy) as store:
            store.build_context()
            samples = []
            for _ in range(50):
                started = time.perf_counter()
                store.build_context()
                samples.append(time.perf_counter() - started)
            results["context_ms"] = statistics.median(samples) * 1000

            chars = estimator("chars")
            settings = CompactionSettings(token_estimator="chars")
            started = time.perf_counter()
            preparation = prepare(store, settings, chars)
            results["prepare_cold_ms"] = (time.perf_counter() - started) * 1000
            samples = []
            for _ in range(10):
                started = time.perf_counter()
                preparation = prepare(store, settings, chars)
                samples.append(time.perf_counter() - started)
            results["prepare_ms"] = statistics.median(samples) * 1000
            messages = getattr(preparation, "messages_to_summarize", [])
            started = time.perf_counter()
            text = serialize_conversation(convert_to_llm(messages))
            results["summarizer_input_ms"] = (time.perf_counter() - started) * 1000
            results["summarizer_input_kb"] = len(text.encode()) / 1024

            body = {
                "type": "message",
                "message": {"role": "user", "content": "benchmark " + "x" * 1900},
            }
            samples = []
            for _ in range(2000):
                started = time.perf_counter()
                store.append(body)
                samples.append(time.perf_counter() - started)
            samples.sort()
            results["append_p50_ms"] = samples[len(samples) // 2] * 1000
            results["append_p99_ms"] = samples[int(len(samples) * 0.99)] * 1000
    return results


def run(sizes: list[int], runs: int) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for entries in sizes:
        for branchy in (False, True):
            path = session_file(entries, branchy)
            wall, peak, messages = open_and_context(path, runs)
            row: dict[str, object] = {
                "entries": entries,
                "shape": "branchy" if branchy else "linear",
                "mb": path.stat().st_size / 1e6,
                "open_s": wall,
                "rss_mb": peak,
                "messages": messages,
                **warm_measures(path),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def table(rows: list[dict[str, object]]) -> str:
    lines = [
        "| entries | shape | file | open + context (process) | peak RSS | context (warm) "
        "| append p50 / p99 | prepare (cold / warm) | summarizer input |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['entries']:,} | {r['shape']} | {r['mb']:.0f} MB | {r['open_s']:.2f} s "
            f"| {r['rss_mb']:.0f} MB | {r['context_ms']:.2f} ms "
            f"| {r['append_p50_ms']:.3f} / {r['append_p99_ms']:.3f} ms "
            f"| {r['prepare_cold_ms']:.0f} / {r['prepare_ms']:.1f} ms "
            f"| {r['summarizer_input_ms']:.1f} ms ({r['summarizer_input_kb']:.0f} KB) |"
        )
    return "\n".join(lines)


def write_readme(rows: list[dict[str, object]]) -> None:
    write_section("store-bench", "python -m bench.store_bench --write", table(rows))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--runs", type=int, default=3, help="process runs per size (median)")
    parser.add_argument("--write", action="store_true", help="update bench/README.md")
    args = parser.parse_args()
    rows = run(args.sizes, args.runs)
    print()
    print(table(rows))
    if args.write:
        write_readme(rows)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\n(benchmark process peak RSS {peak:.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
