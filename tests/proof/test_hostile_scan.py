"""A huge session file never freezes the daemon, and costs neither its memory nor the disk.

The hostile file is a session whose last line runs on for 512 MB without a newline: a
sparse file (the tail is a hole), so it is made at once and costs no disk. Gathering
that line by concatenation used to take over 20 s on the event loop, during which no
other client got an answer, and the whole tail was copied into the ``.corrupt`` file.
Now the file is read in a worker thread in linear time: another client's requests are
answered while it is read, the repair keeps only the first 64 MiB aside, and the daemon
serves on.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from sessiond.store.lines import MAX_LINE_BYTES
from sessiond.store.session import SessionStore
from tests.proof.support import Peer, assert_no_traceback, listening_daemon, timeout_for
from tests.store.helpers import assistant, user

pytestmark = pytest.mark.timeout(timeout_for(180, 600))

TAIL = 512 << 20


def session(directory: Path) -> tuple[Path, list[str]]:
    with SessionStore.create("/hostile/project", session_dir=directory) as store:
        ids = [store.append(user("question")).id, store.append(assistant("answer")).id]
        return store.path, ids


def hostile_session(directory: Path) -> tuple[Path, int, list[str]]:
    """A session whose last line is a torn entry padded to 512 MB; where that line begins."""
    path, ids = session(directory)
    offset = path.stat().st_size
    with open(path, "ab") as handle:
        handle.write(b'{"type":"message","id":"torn0001","message":{"role":"user","content":"')
    os.truncate(path, offset + TAIL)
    return path, offset, ids


def round_trip(peer: Peer, session_id: str, quiet_dir: Path) -> float:
    started = time.monotonic()
    usage = peer.call("context/usage", {"sessionId": session_id}, timeout=120)
    assert usage["tokens"] > 0
    listed = peer.call("session/list", {"sessionDir": str(quiet_dir)}, timeout=120)
    assert [entry["sessionId"] for entry in listed["sessions"]] == [session_id]
    return time.monotonic() - started


def test_other_clients_are_answered_while_a_huge_file_is_opened(tmp_path: Path) -> None:
    quiet_dir, hostile_dir = tmp_path / "quiet", tmp_path / "hostile"
    quiet, _ = session(quiet_dir)
    hostile, offset, hostile_ids = hostile_session(hostile_dir)
    daemon = listening_daemon(tmp_path / "daemon", ["--socket", str(tmp_path / "d.sock")])
    try:
        opener, other = daemon.unix_peer("opener"), daemon.unix_peer("other")
        opener.initialize()
        other.initialize()
        session_id = other.call("session/open", {"path": str(quiet)})["sessionId"]

        started = time.monotonic()
        opening = opener.start("session/open", {"path": str(hostile)})
        latencies: list[float] = []
        answered_meanwhile = 0
        while not latencies or json.dumps(opening) not in opener.received_at:
            latencies.append(round_trip(other, session_id, quiet_dir))
            answered_meanwhile += json.dumps(opening) not in opener.received_at
        opened = opener.wait(opening, timeout=120)["result"]
        open_took = time.monotonic() - started
        print(
            f"\nhostile scan: {answered_meanwhile} round trips answered while the 512 MB file "
            f"was opened, the slowest in {max(latencies) * 1000:.0f} ms"
        )

        assert answered_meanwhile > 0, "the open finished before anyone else was answered"
        # Measured against the open itself, so that a slow machine slows both: no round
        # trip of the other client waited for a large part of it.
        assert max(latencies) < open_took / 2, (
            f"another client waited {max(latencies):.1f} s of the open's {open_took:.1f} s"
        )
        assert opened["entryCount"] == len(hostile_ids) and opened["leafId"] == hostile_ids[-1]
        torn = opened["recovery"]["tornTail"]
        assert (torn["offset"], torn["length"]) == (offset, TAIL)
        assert torn["savedBytes"] == MAX_LINE_BYTES and torn["allNul"] is False
        saved = Path(torn["savedTo"])
        assert saved.stat().st_size == MAX_LINE_BYTES
        assert hostile.stat().st_size == offset
        notice = opener.wait_notification("session/recovered")
        assert notice["recovery"]["tornTail"]["savedTo"] == str(saved)
        assert not other.received("session/recovered")

        # The daemon serves on: the repaired session takes appends, the other is intact.
        appended = opener.call(
            "session/append", {"sessionId": opened["sessionId"], "entries": [user("after")]}
        )
        assert len(appended["ids"]) == 1
        round_trip(other, session_id, quiet_dir)
        assert not opener.violations and not other.violations
        for peer in (opener, other):
            assert_no_traceback(json.loads(body) for body in peer.bodies)
    finally:
        daemon.stop()
    assert "Traceback" not in daemon.all_logs()
