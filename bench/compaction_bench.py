"""How long the agent waits for compaction: sessiond's background compaction against pi's.

    python -m bench.compaction_bench            # needs node and `npm ci` in tests/parity
    python -m bench.compaction_bench --write    # also update bench/README.md
    python -m bench.compaction_bench --tasks 20 --summary-delay 3   # a quicker look

The same scripted session (``bench.agent_script``: ~60 coding tasks, each a request,
two file reads of 2-6 KB and an answer) is played on both sides against the same model
server on 127.0.0.1 (``bench.slow_provider``), which takes ``--model-delay`` seconds per
agent request and ``--summary-delay`` (10) seconds per summary:

- pi 0.73.1 in ``--mode rpc``, with the server as a custom provider in its
  ``models.json``: pi's own agent loop runs each task; the agent's wait is the time
  from ``agent_end`` until pi is idle again (its blocking compaction, when one runs);
- sessiond: the bench's agent loop appends what the same script says (after the same
  model delay per request) and calls ``agent/turnEnded`` after each task; the wait is
  that call. sessiond's summarizer is the same server.

Both use a 60,000-token window, pi's reserve (16,384) and ``keepRecentTokens``
(20,000), characters / 4 as the token estimate, and no short summary, tool-output
pruning or auto-continue (pi 0.73.1 has none of them). Reported per side: summary
requests, compactions, the agent's total wait, the wait per threshold crossing, and
the ratio of the total waits.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.agent_script import Script, Task
from bench.daemon_bench import PI_CLI, Peer, isolated_env, split_frames, split_lines
from bench.readme import write_section
from bench.slow_provider import SlowProvider

WINDOW = 60_000
RESERVE = 16_384
KEEP = 20_000
MODEL = "bench-model"


@dataclass
class Side:
    name: str
    waits: list[float] = field(default_factory=list)
    # The waits of the turns that crossed the threshold (a compaction was due).
    crossings: list[float] = field(default_factory=list)
    compactions: int = 0
    summary_requests: int = 0
    elapsed: float = 0.0

    @property
    def total_wait(self) -> float:
        return sum(self.waits)


class EventPeer(Peer):
    """A ``Peer`` that also keeps the notifications / events, with their arrival time."""

    def __init__(self, process: asyncio.subprocess.Process, framed: bool) -> None:
        self.events: list[tuple[float, dict[str, Any]]] = []
        self.event_arrived = asyncio.Event()
        super().__init__(process, framed)

    async def _read_answers(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        buffer = b""
        while data := await stream.read(1 << 20):
            buffer += data
            messages, buffer = split_frames(buffer) if self.framed else split_lines(buffer)
            for message in messages:
                ident = message.get("id")
                is_answer = ident is not None and (self.framed or message.get("type") == "response")
                future = self.pending.pop(str(ident), None) if is_answer else None
                if future is not None and not future.done():
                    future.set_result(message)
                elif not is_answer:
                    self.events.append((time.perf_counter(), message))
                    self.event_arrived.set()

    async def next_event(self, kinds: set[str], timeout: float = 300) -> dict[str, Any]:
        """The first event (pi: ``type``) of ``kinds`` not seen yet, waited for."""
        deadline = time.perf_counter() + timeout
        while True:
            for index, (_, event) in enumerate(self.events):
                if event.get("type") in kinds or event.get("method") in kinds:
                    del self.events[: index + 1]
                    return event
            self.events.clear()
            self.event_arrived.clear()
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError(f"no {kinds}")
            await asyncio.wait_for(self.event_arrived.wait(), left)


# ----------------------------------------------------------------------------- sessiond


def _usage(prompt: int, output: int) -> dict[str, int]:
    return {
        "input": prompt,
        "output": output,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": prompt + output,
    }


def _assistant(text: str, calls: list[dict[str, Any]], prompt: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    content += [
        {"type": "toolCall", "id": c["id"], "name": c["name"], "arguments": c["args"]}
        for c in calls
    ]
    output = (len(text) + sum(len(json.dumps(c)) for c in calls)) // 4
    return {
        "type": "message",
        "message": {
            "role": "assistant",
            "content": content,
            "api": "openai-completions",
            "provider": "bench",
            "model": MODEL,
            "usage": _usage(prompt, output),
            "stopReason": "toolUse" if calls else "stop",
            "timestamp": int(time.time() * 1000),
        },
    }


def _message(role: str, **fields: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "message": {"role": role, **fields, "timestamp": int(time.time() * 1000)},
    }


async def _call(peer: Peer, method: str, params: dict[str, Any]) -> Any:
    answer = await peer.call({"method": method, "params": params})
    if "error" in answer:
        raise RuntimeError(f"{method}: {answer['error']}")
    return answer["result"]


async def sessiond_side(
    script: Script, provider: SlowProvider, home: Path, model_delay: float, background: bool
) -> Side:
    side = Side("sessiond" + ("" if background else ", background off"))
    settings = {
        "compaction": {
            "reserveTokens": RESERVE,
            "keepRecentTokens": KEEP,
            "tokenEstimator": "chars",
            "shortSummary": False,
            "pruneToolOutputs": False,
            "autoContinue": False,
            **({} if background else {"backgroundAt": 0}),
        },
        "summarizer": {
            "candidates": [
                {
                    "kind": "openai",
                    "model": MODEL,
                    "baseUrl": provider.base_url,
                    "contextWindow": WINDOW,
                }
            ],
            "extractiveFallback": False,
        },
    }
    settings_file = home / "sessiond-settings.json"
    settings_file.write_text(json.dumps(settings))
    command = [
        sys.executable,
        "-m",
        "sessiond",
        "serve",
        "--stdio",
        "--settings",
        str(settings_file),
    ]
    if os.environ.get("BENCH_LOG"):
        command += ["--log-file", os.environ["BENCH_LOG"], "--log-level", "INFO"]
    peer = await Peer.start(command, True, isolated_env(home))
    provider.reset()
    started = time.perf_counter()
    try:
        await _call(peer, "initialize", {"clientInfo": {"name": "compaction-bench"}})
        new = await _call(
            peer, "session/new", {"cwd": str(home), "sessionDir": str(home / "sessiond")}
        )
        sid = new["sessionId"]
        for task in script.tasks:
            wait, crossed, compacted = await _sessiond_task(peer, sid, task, model_delay, script)
            side.waits.append(wait)
            if crossed:
                side.crossings.append(wait)
            side.compactions += compacted
    finally:
        side.elapsed = time.perf_counter() - started
        side.summary_requests = provider.summary_requests
        await peer.close()
    return side


async def _sessiond_task(
    peer: Peer, sid: str, task: Task, model_delay: float, script: Script
) -> tuple[float, bool, int]:
    async def prompt_tokens() -> int:
        usage = await _call(peer, "context/usage", {"sessionId": sid, "contextWindow": WINDOW})
        return int(usage["tokens"])

    await _call(
        peer,
        "session/append",
        {"sessionId": sid, "entries": [_message("user", content=task.request)]},
    )
    await asyncio.sleep(model_delay)
    calls = task.calls()
    entries = [_assistant(task.opening, calls, await prompt_tokens())]
    entries += [
        _message(
            "toolResult",
            toolCallId=call["id"],
            toolName="read",
            content=[{"type": "text", "text": script.files[call["args"]["path"]]}],
            isError=False,
        )
        for call in calls
    ]
    await _call(peer, "session/append", {"sessionId": sid, "entries": entries})
    await asyncio.sleep(model_delay)
    closing = _assistant(task.closing, [], await prompt_tokens())
    await _call(peer, "session/append", {"sessionId": sid, "entries": [closing]})
    started = time.perf_counter()
    result = await _call(peer, "agent/turnEnded", {"sessionId": sid, "contextWindow": WINDOW})
    wait = time.perf_counter() - started
    crossed = result.get("autoCompaction") is not None
    return wait, crossed, 1 if result.get("compaction") else 0


# ----------------------------------------------------------------------------- pi


def _pi_home(home: Path, provider: SlowProvider) -> dict[str, str]:
    agent = home / "pi-agent"
    agent.mkdir(parents=True, exist_ok=True)
    models = {
        "providers": {
            "bench": {
                "baseUrl": provider.base_url,
                "apiKey": "bench-key",
                "api": "openai-completions",
                "models": [
                    {
                        "id": MODEL,
                        "name": "Bench model",
                        "contextWindow": WINDOW,
                        "maxTokens": 8192,
                        "reasoning": False,
                        "input": ["text"],
                        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                    }
                ],
            }
        }
    }
    (agent / "models.json").write_text(json.dumps(models))
    settings = {
        "compaction": {"enabled": True, "reserveTokens": RESERVE, "keepRecentTokens": KEEP},
        "retry": {"enabled": False},
    }
    (agent / "settings.json").write_text(json.dumps(settings))
    return {**isolated_env(home), "PI_CODING_AGENT_DIR": str(agent)}


async def pi_side(script: Script, provider: SlowProvider, home: Path) -> Side:
    side = Side("pi 0.73.1")
    env = _pi_home(home, provider)
    command = [
        "node",
        str(PI_CLI),
        "--mode",
        "rpc",
        "--no-extensions",
        "--no-skills",
        "--no-context-files",
        "--offline",
        "--provider",
        "bench",
        "--model",
        MODEL,
        "--tools",
        "read",
        "--session-dir",
        str(home / "pi-sessions"),
    ]
    process = await asyncio.create_subprocess_exec(
        *command,
        cwd=home,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=env,
        limit=1 << 26,
    )
    peer = EventPeer(process, False)
    provider.reset()
    started = time.perf_counter()
    try:
        state = await peer.call({"type": "get_state"})
        assert state.get("success"), state
        for task in script.tasks:
            answer = await peer.call({"type": "prompt", "message": task.request})
            assert answer.get("success"), answer
            await peer.next_event({"agent_end"})
            ended_at = time.perf_counter()
            crossed = False
            while True:
                state = (await peer.call({"type": "get_state"}))["data"]
                seen = [e for _, e in peer.events if e.get("type") == "compaction_start"]
                crossed = crossed or bool(seen)
                if not state["isStreaming"] and not state["isCompacting"]:
                    break
                await asyncio.sleep(0.01)
            wait = time.perf_counter() - ended_at
            ends = [e for _, e in peer.events if e.get("type") == "compaction_end"]
            side.compactions += sum(1 for e in ends if e.get("result"))
            peer.events.clear()
            side.waits.append(wait)
            if crossed:
                side.crossings.append(wait)
    finally:
        side.elapsed = time.perf_counter() - started
        side.summary_requests = provider.summary_requests
        await peer.close()
    return side


# ----------------------------------------------------------------------------- report


def table(sides: list[Side]) -> str:
    rows = [
        "| side | summary requests | compactions | threshold crossings | agent's total wait "
        "| wait per crossing | wall time |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for side in sides:
        per = side.total_wait / len(side.crossings) if side.crossings else 0.0
        rows.append(
            f"| {side.name} | {side.summary_requests} | {side.compactions} | "
            f"{len(side.crossings)} | {side.total_wait:.2f} s | {per:.2f} s | "
            f"{side.elapsed:.0f} s |"
        )
    return "\n".join(rows)


async def measure(args: argparse.Namespace) -> list[Side]:
    script = Script(tasks=args.tasks)
    provider = SlowProvider(script, model_delay=args.model_delay, summary_delay=args.summary_delay)
    sides: list[Side] = []
    try:
        with tempfile.TemporaryDirectory() as scratch:
            home = Path(scratch)
            script.write_files(home)
            print("sessiond, background compaction...", file=sys.stderr)
            sides.append(await sessiond_side(script, provider, home, args.model_delay, True))
            if args.blocking:
                print("sessiond, background off...", file=sys.stderr)
                sides.append(await sessiond_side(script, provider, home, args.model_delay, False))
            if PI_CLI.exists() and shutil.which("node"):
                print("pi 0.73.1...", file=sys.stderr)
                sides.append(await pi_side(script, provider, home))
            else:
                print("pi is not installed (./dev.sh test installs it)", file=sys.stderr)
    finally:
        provider.stop()
    return sides


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=60)
    parser.add_argument("--model-delay", type=float, default=1.5)
    parser.add_argument("--summary-delay", type=float, default=10.0)
    parser.add_argument("--blocking", action="store_true", help="also sessiond without background")
    parser.add_argument("--write", action="store_true", help="update bench/README.md")
    args = parser.parse_args()
    os.environ.setdefault("PYTHONPATH", str(Path(__file__).resolve().parent.parent))
    sides = asyncio.run(measure(args))
    body = table(sides)
    ours, pi = sides[0], next((s for s in sides if s.name.startswith("pi")), None)
    if pi is not None and pi.total_wait > 0:
        body += f"\n\nsessiond's total wait / pi's: **{ours.total_wait / pi.total_wait:.3f}**"
    print(body)
    if args.write:
        conditions = (
            f"{args.tasks} tasks, {args.model_delay:g} s per model request, "
            f"{args.summary_delay:g} s per summary"
        )
        write_section(
            "compaction-bench", "python -m bench.compaction_bench --write", body, conditions
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
