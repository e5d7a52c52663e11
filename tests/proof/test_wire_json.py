"""What the daemon sends is always JSON, whatever another program did to the file.

The daemon reads an entry's line again whenever it is asked for (``session/entry``,
``session/entries``, ``session/path``, context building). Another program may have
changed the file in place meanwhile: one byte overwritten inside a middle line (making
it not JSON, or not UTF-8), or a line replaced by another entry's of the same length; or
a same-length edit outside the persistent index's sampled windows, made together with
an append, which the index cannot notice. Against a real ``sessiond serve``, every
answer is then a JSON answer: the changed line is a ``fileChanged`` error naming the
entry, the daemon reads the file again, and the next requests are served (strict peer:
every frame is checked). The Python client goes on working after such an error.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from sessiond.store.session import SessionStore
from sessiond_client import SessiondClient
from tests.proof.support import FAST, Peer, isolated_env, stdio_daemon, timeout_for
from tests.store.helpers import assistant, user

pytestmark = pytest.mark.timeout(timeout_for(120, 300))


def long_session(path: Path, turns: int = 150, words: int = 800) -> list[str]:
    with SessionStore.create("/p", path=path) as store:
        ids = []
        for turn in range(turns):
            ids.append(store.append(user(f"question {turn} " + "word " * words)).id)
            ids.append(store.append(assistant(f"answer {turn} " + "word " * words)).id)
    return ids


def line_of(path: Path, entry_id: str) -> tuple[int, bytes]:
    offset = 0
    for line in path.read_bytes().split(b"\n"):
        if f'"id":"{entry_id}"'.encode() in line[:80]:
            return offset, line
        offset += len(line) + 1
    raise AssertionError(entry_id)


def overwrite(path: Path, offset: int, data: bytes) -> None:
    with path.open("r+b") as handle:
        handle.seek(offset)
        handle.write(data)


def edits(path: Path, ids: list[str]) -> dict[str, tuple[str, int, bytes]]:
    """Same-size edits of middle lines: which entry, where, what bytes."""
    middle = ids[len(ids) // 2]
    offset, line = line_of(path, middle)
    word = line.index(b"word ")
    other = ids[len(ids) // 2 + 2]
    _, other_line = line_of(path, other)
    return {
        "a byte that breaks the JSON": (middle, offset + line.index(b'"message"'), b"\x00"),
        "a byte that is not UTF-8": (middle, offset + word, b"\xff"),
        "another entry's line": (middle, offset, other_line[: len(line)].ljust(len(line))),
    }


def answers_are_json(peer: Peer) -> None:
    assert peer.violations == []
    for body in peer.bodies:
        json.loads(body)  # strict: a body with invalid UTF-8 fails here too


@pytest.mark.parametrize("edit", ["a byte that breaks the JSON", "a byte that is not UTF-8"])
def test_a_line_changed_behind_an_open_session_is_an_error_about_that_line(
    tmp_path: Path, edit: str
) -> None:
    path = tmp_path / "s.jsonl"
    ids = long_session(path, turns=20, words=50)
    daemon, peer = stdio_daemon(tmp_path / "d", FAST)
    try:
        peer.initialize()
        session_id = peer.call("session/open", {"path": str(path)})["sessionId"]
        entry_id, offset, data = edits(path, ids)[edit]
        asked: dict[str, Any] = {"sessionId": session_id, "entryId": entry_id}
        assert peer.call("session/entry", asked)["entry"]["id"] == entry_id  # read once
        overwrite(path, offset, data)
        response = peer.request("session/entry", asked)
        assert response["error"]["data"]["kind"] == "fileChanged", response
        assert response["error"]["data"]["entryId"] == entry_id
        # The daemon read the file again: a line that is not JSON is damage now (the entry
        # is gone), one with invalid UTF-8 is read as pi reads it; the rest is there.
        again = peer.request("session/entry", asked)
        if "error" in again:
            assert again["error"]["data"]["kind"] == "notFound", again
        else:
            assert again["result"]["entry"]["id"] == entry_id
        entries = peer.call("session/entries", {"sessionId": session_id})["entries"]
        assert len(entries) == len(ids) - ("error" in again)
        assert peer.call("context/build", {"sessionId": session_id, "format": "llm"})
        answers_are_json(peer)
    finally:
        daemon.stop()


def test_another_entrys_line_in_its_place_is_not_sent_as_this_entry(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    ids = long_session(path, turns=20, words=50)
    daemon, peer = stdio_daemon(tmp_path / "d", FAST)
    try:
        peer.initialize()
        session_id = peer.call("session/open", {"path": str(path)})["sessionId"]
        entry_id, offset, data = edits(path, ids)["another entry's line"]
        overwrite(path, offset, data)
        response = peer.request("session/entry", {"sessionId": session_id, "entryId": entry_id})
        result = response.get("result")
        assert result is None or result["entry"]["id"] == entry_id, response
        answers_are_json(peer)
    finally:
        daemon.stop()


def _sampled(size: int, window: int = 4096, windows: int = 16, tail: int = 64 * 1024) -> list:
    """The ranges the persistent index fingerprints (see ``store.index_file``)."""
    ranges = [(0, min(size, window))]
    if size > tail + window:
        step = (size - tail) // (windows + 1)
        ranges += [(step * (n + 1), window) for n in range(windows)]
    return [*ranges, (max(0, size - tail), size)]


def test_an_edit_the_index_cannot_see_is_caught_when_the_line_is_read(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    ids = long_session(path)
    env = isolated_env(tmp_path / "d", FAST)
    daemon, peer = stdio_daemon(tmp_path / "d", env=env)
    try:
        peer.initialize()
        session_id = peer.call("session/open", {"path": str(path)})["sessionId"]
        peer.call("session/close", {"sessionId": session_id})  # the index is written
        index_dir = Path(env["XDG_CACHE_HOME"]) / "sessiond" / "index"
        deadline = time.monotonic() + 10
        while not list(index_dir.glob("*.idx")) and time.monotonic() < deadline:
            time.sleep(0.05)  # written a timestamp tick after the file's last change
        assert list(index_dir.glob("*.idx"))
        size = path.stat().st_size
        sampled = _sampled(size)
        # A line none of whose bytes the index fingerprints.
        target = None
        for entry_id in ids[10:-10]:
            offset, line = line_of(path, entry_id)
            if all(
                offset + len(line) < start or offset > start + length for start, length in sampled
            ):
                target = (entry_id, offset + line.index(b"word "))
                break
        assert target is not None
        overwrite(path, target[1], b"\x00")  # a control character: no longer JSON
        with path.open("ab") as handle:  # ...together with an append
            line = {
                "type": "message",
                "id": "appended",
                "parentId": ids[-1],
                "timestamp": "2026-12-01T00:00:00.000Z",
                "message": {"role": "user", "content": "more"},
            }
            handle.write(json.dumps(line).encode() + b"\n")
        # Opened a timestamp tick later (as on a busy machine): the index that open writes
        # is then trusted, and the read again after the error must not go by it.
        time.sleep(0.05)
        session_id = peer.call("session/open", {"path": str(path)})["sessionId"]
        response = peer.request("session/entry", {"sessionId": session_id, "entryId": target[0]})
        assert response["error"]["data"]["kind"] == "fileChanged", response
        assert peer.call("session/entries", {"sessionId": session_id})["total"] == len(ids)
        answers_are_json(peer)
    finally:
        daemon.stop()


def test_the_python_client_goes_on_after_a_changed_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    ids = long_session(path, turns=20, words=50)
    env = isolated_env(tmp_path / "d", FAST)

    from sessiond_client import FileChangedError  # (new with the fix: imported here)

    async def scenario() -> None:
        async with SessiondClient.spawn(env=env) as client:
            await client.initialize()
            opened = await client.open_session(str(path))
            entry_id, offset, data = edits(path, ids)["a byte that is not UTF-8"]
            assert (await client.entry(opened.session_id, entry_id)).entry["id"] == entry_id
            overwrite(path, offset, data)
            with pytest.raises(FileChangedError):
                await client.entry(opened.session_id, entry_id)
            assert (await client.entries(opened.session_id)).total == len(ids)

    asyncio.run(scenario())
