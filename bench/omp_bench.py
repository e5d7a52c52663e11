"""The same session read by pi's rules and by oh-my-pi's.

    python -m bench.omp_bench                 # 100k entries, with and without compactions
    python -m bench.omp_bench --write         # also update bench/README.md

A generated pi session (sessiond_testkit/generate_session.py) is read as it is, then with
oh-my-pi's title line put before its header, which makes it oh-my-pi's file: the same
entries under the other dialect (``core.omp_context``, ``store.omp_leaf_view``). In one
warm process per file:

- open: the store's open (a scan: no persistent index);
- first usage: ``context/usage``'s estimate right after the open (every context
  message's estimate computed once and cached);
- usage after an append: appending a user message and an answer, then the estimate,
  median over 40 rounds (what an agent loop asks after each turn);
- context: building the leaf's context whole, after those appends.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.readme import write_section

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"


def session_file(entries: int, compactions: bool) -> Path:
    from sessiond_testkit.generate_session import generate

    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"omp-bench-{entries}-{'compacted' if compactions else 'whole'}.jsonl"
    if not path.exists():
        generate(str(path), entries=entries, compactions=compactions, seed=3)
    return path


def measure(path: Path) -> dict[str, float]:
    from sessiond.settings import StorageSettings
    from sessiond.store.session import SessionStore
    from sessiond.tiktoken_offline import estimator

    chars = estimator("chars")
    usage = {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15}
    answer = {
        "type": "message",
        "message": {
            "role": "assistant",
            "content": [{"type": "text", "text": "done"}],
            "api": "anthropic-messages",
            "provider": "anthropic",
            "model": "claude",
            "usage": usage,
            "stopReason": "stop",
        },
    }
    question = {"type": "message", "message": {"role": "user", "content": "next step"}}
    storage = StorageSettings(persistent_index=False)
    started = time.perf_counter()
    store = SessionStore.open(path, storage=storage)
    opened = time.perf_counter()
    try:
        store.leaf_view.estimate_context(chars)
        first = time.perf_counter()
        rounds = []
        for _ in range(40):
            store.append_entries([question, answer])
            before = time.perf_counter()
            store.leaf_view.estimate_context(chars)
            rounds.append(time.perf_counter() - before)
        before = time.perf_counter()
        messages = len(store.build_context().messages)
        context = time.perf_counter() - before
        dialect = store.dialect.name
    finally:
        store.close()
    return {
        "dialect": dialect,  # type: ignore[dict-item]
        "open_s": opened - started,
        "first_usage_s": first - opened,
        "usage_ms": statistics.median(rounds) * 1000,
        "context_s": context,
        "messages": messages,
    }


def as_omp(path: Path, scratch: Path) -> Path:
    from sessiond.core.title_slot import serialize_title_slot

    copy = scratch / ("omp-" + path.name)
    line = serialize_title_slot("bench", "user", "2026-09-27T09:00:00.000Z")
    with open(copy, "wb") as out, open(path, "rb") as source:
        out.write(line)
        while chunk := source.read(1 << 20):
            out.write(chunk)
    return copy


def run(entries: int) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for compactions in (True, False):
        source = session_file(entries, compactions)
        with tempfile.TemporaryDirectory() as scratch:
            pi_copy = Path(scratch) / source.name
            pi_copy.write_bytes(source.read_bytes())
            for path in (pi_copy, as_omp(source, Path(scratch))):
                row: dict[str, object] = {
                    "entries": entries,
                    "shape": "with compactions" if compactions else "never compacted",
                    **measure(path),
                }
                rows.append(row)
                print(row, flush=True)
    return rows


def table(rows: list[dict[str, object]]) -> str:
    lines = [
        "| entries | session | rules | open | first usage | usage after an append "
        "| context (messages) |",
        "|---:|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['entries']:,} | {r['shape']} | {r['dialect']} | {r['open_s']:.2f} s "
            f"| {r['first_usage_s']:.2f} s | {r['usage_ms']:.2f} ms "
            f"| {r['context_s']:.2f} s ({r['messages']:,}) |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--write", action="store_true", help="update bench/README.md")
    args = parser.parse_args()
    rows = run(args.entries)
    print()
    print(table(rows))
    if args.write:
        write_section("omp-bench", "python -m bench.omp_bench --write", table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
