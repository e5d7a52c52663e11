"""No request makes an answer, or the daemon, out of proportion to what a session holds.

Against real ``sessiond serve`` processes, whose memory is read from ``/proc``:

- ``session/entries`` naming one 1 MiB entry 300 times is ``limitExceeded``
  (``answerBytes``): an answer holds at most as many bytes of entries as the session.
- ``session/list`` of a folder holding one 4 MiB session and 49 hard links to it answers
  in a few kilobytes (first messages and names cut, the files read in memory that does
  not grow with them), and the daemon barely grows.
- Opening a 14 MiB file of tiny entries (``{"id":"N"}`` lines, each costing the index far
  more than its bytes) is refused with ``limitExceeded`` (``openMemory``) before the
  daemon holds ten times the file's size; the same file is left out of a listing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from sessiond.store.session import SessionStore
from tests.proof.support import FAST, stdio_daemon, timeout_for
from tests.proof.test_resource_limits import PeakMemory, rss_bytes
from tests.store.helpers import assistant, user

pytestmark = [
    pytest.mark.timeout(timeout_for(180, 600)),
    pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc"),
]

MIB = 1024 * 1024


def test_an_id_named_many_times_cannot_make_a_huge_answer(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with SessionStore.create("/p", path=path) as store:
        big = store.append(user("x" * MIB)).id
        store.append(assistant("ok"))
    daemon, peer = stdio_daemon(tmp_path / "d", FAST)
    try:
        peer.initialize()
        session_id = peer.call("session/open", {"path": str(path)})["sessionId"]
        before = rss_bytes(daemon.pid)
        peak = PeakMemory(daemon.pid)
        response = peer.request("session/entries", {"sessionId": session_id, "ids": [big] * 300})
        grown = peak.stop() - before
        error = response.get("error") or {}
        assert error.get("data", {}).get("kind") == "limitExceeded", str(response)[:300]
        assert error["data"]["limit"] == "answerBytes"
        # Named a few times, within what the session holds, it is answered as asked.
        answered = peer.call("session/entries", {"sessionId": session_id, "ids": [big]})
        assert [entry["id"] for entry in answered["entries"]] == [big]
    finally:
        daemon.stop()
    assert grown < 64 * MIB, f"the daemon grew {grown >> 20} MiB for a refused request"


def test_listing_hard_links_to_a_big_session_makes_a_short_answer(tmp_path: Path) -> None:
    folder = tmp_path / "sessions"
    folder.mkdir()
    original = folder / "big.jsonl"
    with SessionStore.create("/p", path=original) as store:
        store.append(user("y" * 4 * MIB))
        store.append(assistant("ok"))
        store.set_name("n" * MIB)
    for n in range(49):
        os.link(original, folder / f"link-{n:02d}.jsonl")
    daemon, peer = stdio_daemon(tmp_path / "d", FAST)
    try:
        peer.initialize()
        before = rss_bytes(daemon.pid)
        peak = PeakMemory(daemon.pid)
        request_id = peer.start("session/list", {"sessionDir": str(folder)})
        response = peer.wait(request_id, timeout=120)
        grown = peak.stop() - before
    finally:
        daemon.stop()
    sessions = response["result"]["sessions"]
    assert len(sessions) == 50
    assert all(len(s["firstMessage"]) <= 500 and len(s["name"]) <= 500 for s in sessions)
    answer = max(len(body) for body in peer.bodies)
    assert answer < 256 * 1024, f"a listing of {answer} bytes"
    assert grown < 64 * MIB, f"the daemon grew {grown >> 20} MiB to list 50 files"


def dense_file(path: Path, megabytes: int) -> int:
    header = {"type": "session", "version": 3, "id": "dense", "timestamp": "", "cwd": "/p"}
    lines = [json.dumps(header)]
    size, n = 0, 0
    while size < megabytes * MIB:
        line = json.dumps({"id": str(n)}, separators=(",", ":"))
        lines.append(line)
        size += len(line) + 1
        n += 1
    path.write_text("\n".join(lines) + "\n")
    return path.stat().st_size


def test_a_file_of_tiny_entries_is_refused_before_it_takes_ten_times_its_size(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "sessions"
    folder.mkdir()
    size = dense_file(folder / "dense.jsonl", 14)
    with SessionStore.create("/p", path=folder / "real.jsonl") as store:
        store.append(user("hi"))
        store.append(assistant("hello"))
    daemon, peer = stdio_daemon(tmp_path / "d", FAST)
    try:
        peer.initialize()
        before = rss_bytes(daemon.pid)
        peak = PeakMemory(daemon.pid)
        response = peer.request("session/open", {"path": str(folder / "dense.jsonl")}, 120)
        grown = peak.stop() - before
        error = response.get("error") or {}
        assert error.get("data", {}).get("kind") == "limitExceeded", str(response)[:300]
        assert error["data"]["limit"] == "openMemory"
        listed = peer.call("session/list", {"sessionDir": str(folder)}, 120)["sessions"]
        assert [s["sessionId"] for s in listed] != [] and "dense" not in str(listed)
        assert peer.call("settings/get") is not None
    finally:
        daemon.stop()
    assert grown < 10 * size, f"the daemon grew {grown >> 20} MiB for a {size >> 20} MiB file"
