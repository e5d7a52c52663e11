"""A writer for the crash tests that works through the store and the service in-process.

    python store_driver.py            (then, on stdin, one line per run: "run SEED WORKDIR")

Importing sessiond takes longer than many of the runs the test wants to kill, so this
is a zygote: it imports everything once and, for each ``run`` line, forks a child that
works on WORKDIR until it is killed, and prints the child's pid. When the child is gone
it prints ``reaped PID STATUS``.

The child opens ``WORKDIR/main.jsonl`` (repairing what the last kill left) and then, for
ever, picks one of: append a turn with a large tool output (under a random fsync policy),
prune old tool outputs (appended context edits), compact with the
offline summarizer, or write a v1 session file and migrate it by opening it. After each
operation returns it appends a JSON line to ``WORKDIR/acks.log`` saying what was
acknowledged; that file is what the test holds the session to.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

SYSTEM_ROLES = ("user", "assistant")
POLICIES = ("always", "batch", "never")


def v1_lines(seed: int) -> list[bytes]:
    """A legacy (version 1) session: no version, no ids; a compaction with an index."""
    rng = random.Random(seed)
    header = {
        "type": "session",
        "id": f"legacy-{seed}",
        "timestamp": "2025-01-01T00:00:00.000Z",
        "cwd": "/legacy/project",
    }
    objects: list[dict[str, Any]] = [header]
    for n in range(rng.randint(8, 40)):
        stamp = f"2025-01-01T00:{n // 60:02d}:{n % 60:02d}.000Z"
        text = f"legacy {seed} message {n} " + "x" * rng.randint(0, 3000)
        if n == 6:
            objects.append(
                {
                    "type": "compaction",
                    "timestamp": stamp,
                    "summary": f"legacy summary {seed}",
                    "firstKeptEntryIndex": 3,
                    "tokensBefore": 1234,
                }
            )
        elif n % 2 == 0:
            objects.append(
                {
                    "type": "message",
                    "timestamp": stamp,
                    "message": {"role": "user", "content": text},
                }
            )
        else:
            objects.append(
                {
                    "type": "message",
                    "timestamp": stamp,
                    "message": {
                        "role": "assistant",
                        "content": [{"type": "text", "text": text}],
                        "provider": "anthropic",
                        "model": "legacy",
                        "stopReason": "stop",
                        "usage": {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0},
                    },
                }
            )
    return [json.dumps(obj, separators=(",", ":")).encode() for obj in objects]


def tool_text(marker: str, size: int) -> str:
    """A tool output the test can recompute from its marker and size."""
    unit = f"{marker} output line with some words\n"
    return (unit * (size // len(unit) + 1))[:size]


def _turn(rng: random.Random, marker: str, size: int) -> list[dict[str, Any]]:
    usage = {
        "input": 1000,
        "output": 100,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 1100,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
    }

    def assistant(text: str, tools: list[dict[str, Any]], stop: str) -> dict[str, Any]:
        return {
            "type": "message",
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": text}, *tools],
                "api": "anthropic-messages",
                "provider": "anthropic",
                "model": "crash-model",
                "usage": usage,
                "stopReason": stop,
            },
        }

    call_id = f"call-{marker}"
    return [
        {"type": "message", "message": {"role": "user", "content": f"{marker} please run it"}},
        assistant(
            f"{marker} running",
            [{"type": "toolCall", "id": call_id, "name": "bash", "arguments": {"command": "ls"}}],
            "toolUse",
        ),
        {
            "type": "message",
            "message": {
                "role": "toolResult",
                "toolCallId": call_id,
                "toolName": "bash",
                "content": [{"type": "text", "text": tool_text(marker, size)}],
                "isError": False,
            },
        },
        assistant(f"{marker} done " + "y" * rng.randint(0, 400), [], "stop"),
    ]


def run(seed: int, workdir: Path) -> None:
    from sessiond.core.preparation import NotCompactable
    from sessiond.errors import AlreadyCompactedError, NothingToCompactError
    from sessiond.service.compactor import Compactor
    from sessiond.service.pruning import prune_tool_outputs
    from sessiond.service.summarizer_setup import summary_context
    from sessiond.settings import Settings, StorageSettings, merge_settings
    from sessiond.store.fileio import atomic_write
    from sessiond.store.session import SessionStore
    from sessiond.tiktoken_offline import estimator

    rng = random.Random(seed)
    acks = os.open(workdir / "acks.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def ack(kind: str, value: Any) -> None:
        os.write(acks, (json.dumps([kind, value]) + "\n").encode())

    settings, _ = merge_settings(
        Settings(),
        {
            "compaction": {
                "tokenEstimator": "chars",
                "keepRecentTokens": 6000,
                "shortSummary": False,
            },
        },
        strict=True,
        source="driver",
    )
    chars = estimator("chars")
    policy = rng.choice(POLICIES)
    store = SessionStore.open(workdir / "main.jsonl", storage=StorageSettings(fsync=policy))
    ack("open", {"policy": policy, "entries": store.entry_count})
    step = 0
    while True:
        step += 1
        op = rng.choices(["append", "prune", "compact", "migrate"], [5, 2, 2, 2])[0]
        time.sleep(rng.uniform(0, 0.002))
        ack("begin", op)
        if op == "append":
            marker = f"<<{seed}:{step}>>"
            size = rng.randint(10_000, 45_000)
            written = store.append_entries(_turn(rng, marker, size))
            ack("append", {"ids": [e.id for e in written], "marker": marker, "size": size})
        elif op == "prune":
            plan = asyncio.run(prune_tool_outputs(store, chars))
            ack("prune", {"targets": [c.entry_id for c in plan.candidates], "edits": plan.edit_ids})
        elif op == "compact":
            compactor = Compactor(store, settings.compaction, chars)
            if isinstance(compactor.prepare(), NotCompactable):
                ack("compactSkipped", None)
                continue
            try:
                outcome = asyncio.run(compactor.run(summary_context(settings, mode="manual")))
            except (NothingToCompactError, AlreadyCompactedError):
                ack("compactSkipped", None)
                continue
            ack(
                "compact",
                {"id": outcome.entry.id, "firstKept": outcome.entry.first_kept_entry_id},
            )
        else:
            legacy_seed = seed * 1000 + step
            name = f"legacy-{legacy_seed}.jsonl"
            data = b"".join(line + b"\n" for line in v1_lines(legacy_seed))
            atomic_write(workdir / name, [data])
            ack("v1", {"name": name, "seed": legacy_seed, "sha": hashlib.sha256(data).hexdigest()})
            SessionStore.open(workdir / name).close()
            ack("migrated", name)


def main() -> None:
    for line in sys.stdin:
        parts = line.split()
        if not parts or parts[0] != "run":
            continue
        seed, workdir = int(parts[1]), Path(parts[2])
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                run(seed, workdir)
            except BaseException as exc:  # reported to the test, which fails on it
                sys.stderr.write(f"driver child failed: {type(exc).__name__}: {exc}\n")
                sys.stderr.flush()
                code = 1
            finally:
                os._exit(code)
        print(pid, flush=True)
        _, status = os.waitpid(pid, 0)
        print(f"reaped {pid} {status}", flush=True)


if __name__ == "__main__":
    # Everything the children use, imported once here.
    import sessiond.core.preparation
    import sessiond.llm.chain
    import sessiond.service.compactor
    import sessiond.service.pruning
    import sessiond.service.summarizer_setup
    import sessiond.store.session
    import sessiond.tiktoken_offline  # noqa: F401

    main()
