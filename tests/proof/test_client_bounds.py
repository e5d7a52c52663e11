"""What one client can hold is bounded: it cannot take the daemon from the others.

Against a real ``sessiond serve --socket``, one client opens session after session
(``session/new``, each holding a lock file's descriptor; ``session/open``, each holding
up to three). Past 64 it gets ``limitExceeded`` (``openSessions``, with the maximum), the
daemon's descriptors stay few, and another client still connects, opens a session and
is served. Closing a session makes room again.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sessiond.store.session import SessionStore
from tests.proof.support import FAST, listening_daemon, timeout_for
from tests.store.helpers import assistant, user

pytestmark = [
    pytest.mark.timeout(timeout_for(120, 300)),
    pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="reads /proc"),
]

PER_CLIENT = 64


def descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_one_client_cannot_take_every_descriptor(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    existing = []
    for n in range(20):
        path = sessions / f"old-{n}.jsonl"
        with SessionStore.create("/p", path=path) as store:
            store.append(user("hi"))
            store.append(assistant("hello"))
        existing.append(path)
    daemon = listening_daemon(tmp_path / "d", ["--socket", str(tmp_path / "d.sock")], FAST)
    try:
        greedy = daemon.unix_peer("greedy")
        greedy.initialize()
        base = descriptors(daemon.pid)
        opened: list[str] = []
        refusals = []
        for path in existing:
            response = greedy.request("session/open", {"path": str(path)})
            if "error" in response:
                refusals.append(response["error"])
            else:
                opened.append(response["result"]["sessionId"])
        for n in range(200):
            response = greedy.request(
                "session/new", {"cwd": "/p", "path": str(sessions / f"new-{n}.jsonl")}
            )
            if "error" in response:
                refusals.append(response["error"])
            else:
                opened.append(response["result"]["sessionId"])
        assert len(opened) == PER_CLIENT, len(opened)
        assert refusals, "a client opened 220 sessions"
        assert {r["data"]["kind"] for r in refusals} == {"limitExceeded"}
        assert {r["data"]["limit"] for r in refusals} == {"openSessions"}
        assert refusals[0]["data"]["maximum"] == PER_CLIENT
        held = descriptors(daemon.pid) - base
        assert held <= 3 * PER_CLIENT, f"{held} descriptors for one client"

        other = daemon.unix_peer("other")
        other.initialize()
        mine = other.call("session/new", {"cwd": "/p", "writeNow": True})["sessionId"]
        assert other.call("context/usage", {"sessionId": mine})["tokens"] == 0

        # Closing makes room again.
        greedy.call("session/close", {"sessionId": opened[0]})
        again = greedy.request("session/new", {"cwd": "/p", "path": str(sessions / "again.jsonl")})
        assert "result" in again, again
        assert greedy.violations == [] and other.violations == []
    finally:
        daemon.stop()
