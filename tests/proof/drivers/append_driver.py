"""A writer for the crash tests: appends entries to one session through a stdio daemon.

    python append_driver.py SESSION ACKS SEED

It starts ``sessiond serve --stdio`` (in its own process group, so the test kills both
with one SIGKILL), opens SESSION and appends batches of entries of very different sizes
under ``expectedLeafId``, for ever. Only after the daemon has answered an append does it
write the entry ids, with the marker each entry carries, to ACKS (one ``write()`` per
line, O_APPEND): what ACKS holds is what the daemon acknowledged. Labels and session
names are set now and then too. The environment (HOME, XDG directories, settings) is the
caller's and is passed on to the daemon.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from typing import Any


class Daemon:
    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "sessiond", "serve", "--stdio"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin = self.process.stdin
        self.stdout = self.process.stdout
        self.next_id = 0

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.send(method, params)
        return self.receive()

    def send(self, method: str, params: dict[str, Any]) -> int:
        self.next_id += 1
        body = json.dumps(
            {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        )
        data = body.encode()
        self.stdin.write(b"Content-Length: %d\r\n\r\n" % len(data) + data)
        self.stdin.flush()
        return len(data)

    def receive(self) -> dict[str, Any]:
        while True:
            length = None
            while True:
                line = self.stdout.readline()
                if not line:
                    raise SystemExit("daemon closed its stdout")
                if line == b"\r\n":
                    break
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            assert length is not None
            message = json.loads(self.stdout.read(length))
            if message.get("id") == self.next_id and "method" not in message:
                return message  # type: ignore[no-any-return]


def text_of(rng: random.Random, marker: str) -> str:
    roll = rng.random()
    if roll < 0.80:
        size = rng.randint(20, 600)
    elif roll < 0.96:
        size = rng.randint(5_000, 60_000)
    else:
        size = rng.randint(300_000, 2_500_000)  # a long write() the kill may cut
    filler = "".join(rng.choice("abcdefghij klmnop\u00e9\u2028\u4e2d") for _ in range(64))
    return marker + " " + (filler * (size // 64 + 1))[:size]


def entry(rng: random.Random, marker: str) -> dict[str, Any]:
    kind = rng.choice(["user", "assistant", "assistant", "toolResult"])
    text = text_of(rng, marker)
    if kind == "user":
        message: dict[str, Any] = {"role": "user", "content": text}
    elif kind == "assistant":
        message = {
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
            "api": "openai-completions",
            "provider": "fake",
            "model": "crash-model",
            "usage": {
                "input": 100,
                "output": 10,
                "cacheRead": 0,
                "cacheWrite": 0,
                "totalTokens": 110,
                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
            },
            "stopReason": "stop",
        }
    else:
        message = {
            "role": "toolResult",
            "toolCallId": "call-1",
            "toolName": "bash",
            "content": [{"type": "text", "text": text}],
            "isError": False,
        }
    return {"type": "message", "message": message}


def main() -> None:
    session, acks_path, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rng = random.Random(seed)
    acks = os.open(acks_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def ack(kind: str, value: Any) -> None:
        os.write(acks, (json.dumps([kind, value]) + "\n").encode())

    daemon = Daemon()
    ack("pid", daemon.process.pid)
    reply = daemon.call("initialize", {"clientInfo": {"name": "crash-writer"}, "capabilities": {}})
    assert "result" in reply, reply
    opened = daemon.call("session/open", {"path": session})
    if "error" in opened:
        ack("openFailed", opened["error"])
        raise SystemExit(2)
    session_id = opened["result"]["sessionId"]
    leaf = opened["result"]["leafId"]
    ack("ready", leaf)
    acknowledged: list[str] = []
    batch_no = 0
    while True:
        batch_no += 1
        if acknowledged and batch_no % 17 == 0:
            target = rng.choice(acknowledged)
            reply = daemon.call(
                "session/label",
                {"sessionId": session_id, "targetId": target, "label": f"L{seed}-{batch_no}"},
            )
            if "error" in reply:
                ack("error", reply["error"])
                raise SystemExit(3)
            leaf = reply["result"]["leafId"]
            ack("label", [reply["result"]["entryId"], target])
            continue
        markers = [f"<<{seed}:{batch_no}:{j}>>" for j in range(rng.randint(1, 6))]
        entries = [entry(rng, marker) for marker in markers]
        size = daemon.send(
            "session/append",
            # "" is "no entry yet" (null would be no guard at all)
            {"sessionId": session_id, "entries": entries, "expectedLeafId": leaf or ""},
        )
        if size > 1_000_000:
            ack("big", size)  # sent: the test may aim its kill at the write() that follows
        reply = daemon.receive()
        if "error" in reply:
            ack("error", reply["error"])
            raise SystemExit(3)
        ids = reply["result"]["ids"]
        leaf = reply["result"]["leafId"]
        acknowledged += ids
        ack("append", list(zip(ids, markers, strict=True)))


if __name__ == "__main__":
    main()
