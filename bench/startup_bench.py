"""Start-up of the ``sessiond`` command, side by side with pi's.

    python -m bench.startup_bench            # 20 runs of each command
    python -m bench.startup_bench --write    # also update bench/README.md

Each command is run as a whole process (the console script ``sessiond`` beside this
Python, as a user or an editor runs it), its wall time from start to exit measured by
the parent. The commands take turns, run after run, so that the VM's drift (a third
within an hour) falls on all of them alike; each row gives the median and the range.
For each sessiond command the table also gives what ``python -X importtime`` says its
imports cost, and how many of the daemon's own modules it loads.

The references: the interpreter alone (``python -c pass``, with the same site
packages), and pi 0.73.1's ``pi --version`` (``tests/parity/node_modules``; `npm ci`
there first). pi 1.6.0's command line needs Node 22 and does not start on this VM's
Node 20.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.readme import write_section
from bench.timing import median_and_range, ms, sessiond_command

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "examples" / "sample-session.jsonl"
PI_CLI = ROOT / "tests" / "parity" / "node_modules" / "@mariozechner" / "pi-coding-agent"
PI_CLI = PI_CLI / "dist" / "cli.js"


def commands(sample: Path) -> list[tuple[str, list[str]]]:
    sessiond = sessiond_command()
    return [
        ("`python -c pass` (the interpreter alone)", [sys.executable, "-c", "pass"]),
        ("`sessiond --version`", [*sessiond, "--version"]),
        ("`sessiond --help`", [*sessiond, "--help"]),
        ("`sessiond serve --help`", [*sessiond, "serve", "--help"]),
        ("`sessiond context` (75 entries)", [*sessiond, "context", str(sample)]),
        ("`sessiond info` (75 entries)", [*sessiond, "info", str(sample)]),
        ("`sessiond tree` (75 entries)", [*sessiond, "tree", str(sample)]),
    ]


def wall(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True)
    return time.perf_counter() - started


def imports(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    """What ``-X importtime`` says the imports cost (the sum of the top-level imports'
    cumulative times), and how many of sessiond's modules were loaded."""
    if argv[0] != sys.executable:
        argv = [sys.executable, "-m", "sessiond", *argv[1:]]
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *argv[1:]],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        check=True,
    )
    total = 0
    ours = 0
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line.split("|")
        if not name[1:].startswith(" "):  # nested imports are indented
            total += int(cumulative)
        ours += name.strip().startswith("sessiond")
    # ``python -m sessiond`` itself: the console script imports sessiond.cli instead.
    return total / 1e6, ours


Row = tuple[str, list[float], float | None, int | None]


def measure(runs: int) -> tuple[list[Row], list[float]]:
    with tempfile.TemporaryDirectory() as work:
        # A private cache and no settings file: nothing of the user's is read or written.
        env = {
            **os.environ,
            "XDG_CACHE_HOME": str(Path(work, "cache")),
            "XDG_CONFIG_HOME": str(Path(work, "config")),
        }
        sample = Path(work, "sample.jsonl")
        sample.write_bytes(SAMPLE.read_bytes())
        measured = commands(sample)
        for _, argv in measured:  # warm the page cache and the bytecode
            wall(argv, env)
        times: list[list[float]] = [[] for _ in measured]
        pi: list[float] = []
        for _ in range(runs):
            for index, (_, argv) in enumerate(measured):
                times[index].append(wall(argv, env))
            if PI_CLI.exists():
                pi.append(wall(["node", str(PI_CLI), "--version"], env))
        rows: list[Row] = []
        for (label, argv), values in zip(measured, times, strict=True):
            if "sessiond" in label:
                import_seconds, modules = imports(argv, env)
                rows.append((label, values, import_seconds, modules))
            else:
                rows.append((label, values, None, None))
    return rows, pi


def table(rows: list[Row], pi: list[float]) -> str:
    lines = [
        "| command (whole process) | median (range) | imports (`-X importtime`) "
        "| sessiond modules loaded |",
        "|---|---:|---:|---:|",
    ]
    for label, values, import_seconds, modules in rows:
        imported = ms(import_seconds) if import_seconds is not None else ""
        lines.append(f"| {label} | {median_and_range(values)} | {imported} | {modules or ''} |")
    if pi:
        lines.append(f"| pi 0.73.1 `pi --version` (node) | {median_and_range(pi)} | | |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--write", action="store_true", help="update bench/README.md")
    args = parser.parse_args()
    rows, pi = measure(args.runs)
    body = table(rows, pi)
    print(body)
    if args.write:
        write_section(
            "startup-bench",
            "python -m bench.startup_bench --write",
            body,
            f"{args.runs} runs of each command, taking turns",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
