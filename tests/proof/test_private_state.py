"""A session line cannot set the daemon's own state.

The daemon keeps bookkeeping per entry (where its line is, cached token counts, whether
its UTF-8 was checked, the decoded entry). Lines are JSON objects of any shape, so a
line may carry any key, including the names that state once had on the wire
(``$sessiond:...``). Against a real ``sessiond serve``, a file whose lines carry every
such key, a line with such keys appended by another program while the session is
open, and an entry a client appends with them, must all read exactly as the same
session without those keys: the same usage (never negative), the same context (the
message with invalid UTF-8 included, read with U+FFFD), a tree, entries that are JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sessiond.store.session import SessionStore
from tests.proof.support import Peer, stdio_daemon, timeout_for
from tests.store.helpers import assistant, user

pytestmark = pytest.mark.timeout(timeout_for(120, 300))

# Every key the daemon's per-entry state was ever read from, with values that would
# steer it: a negative token count, "UTF-8 already checked", a decoded entry that is not
# one, offsets and lengths pointing elsewhere.
HOSTILE_KEYS: dict[str, Any] = {
    "$sessiond:tokensChars": -1_000_000,
    "$sessiond:tokensTiktoken": -1_000_000,
    "$sessiond:utf8": 1,
    "$sessiond:entry": 7,
    "$sessiond:offset": 3,
    "$sessiond:length": 2,
    "$sessiond:seq": 0,
}
# A body with a byte that is not UTF-8 (pi reads it with U+FFFD; so must the daemon).
BAD_UTF8 = b"caf\xe9 latte"


def write_pair(directory: Path) -> tuple[Path, Path]:
    """The same session twice: clean, and with every line carrying the hostile keys."""
    clean = directory / "clean.jsonl"
    with SessionStore.create("/p", path=clean) as store:
        store.append(user("please " * 2000))
        store.append(assistant("done " * 500, input=5000, output=500))
        store.append(user("PLACEHOLDER"))
        store.append(assistant("ok"))
    lines = clean.read_bytes().splitlines()
    lines = [line.replace(b"PLACEHOLDER", BAD_UTF8) for line in lines]
    clean.write_bytes(b"\n".join(lines) + b"\n")
    hostile = directory / "hostile.jsonl"
    header = json.loads(lines[0])
    header["id"] = header["id"][:-4] + "beef"
    out = [json.dumps(header).encode()]
    for line in lines[1:]:
        # The keys go first, where a decoder meets them before anything else.
        keys = json.dumps(HOSTILE_KEYS).encode()[1:-1]
        out.append(b"{" + keys + b"," + line[1:])
    hostile.write_bytes(b"\n".join(out) + b"\n")
    return clean, hostile


def observe(peer: Peer, path: Path) -> dict[str, Any]:
    opened = peer.call("session/open", {"path": str(path)})
    session_id = opened["sessionId"]
    usage = peer.call("context/usage", {"sessionId": session_id})
    context = peer.call("context/build", {"sessionId": session_id, "format": "agent"})
    tree = peer.call("session/tree", {"sessionId": session_id})
    entries = peer.call("session/entries", {"sessionId": session_id})["entries"]
    return {
        "sessionId": session_id,
        "tokens": usage["tokens"],
        "percent": usage["percent"],
        "messages": [json.dumps(m["content"], ensure_ascii=False) for m in context["messages"]],
        "nodes": [node["id"] for node in tree["nodes"]],
        "entries": [entry["id"] for entry in entries],
    }


def test_keys_in_a_file_an_append_and_a_followed_line_never_reach_the_daemons_state(
    tmp_path: Path,
) -> None:
    clean, hostile = write_pair(tmp_path / "sessions")
    daemon, peer = stdio_daemon(tmp_path / "daemon")
    try:
        peer.initialize()
        expected = observe(peer, clean)
        seen = observe(peer, hostile)
        assert seen["tokens"] == expected["tokens"] > 0
        assert seen["percent"] >= 0
        assert seen["messages"] == expected["messages"]
        assert any("caf\ufffd latte" in text for text in seen["messages"])
        assert seen["nodes"] == expected["nodes"]
        assert seen["entries"] == expected["entries"]

        # An entry a client appends with the keys, to both sessions alike.
        for observed in (expected, seen):
            body = {**user("and one more " * 300), **HOSTILE_KEYS}
            peer.call("session/append", {"sessionId": observed["sessionId"], "entries": [body]})
        after_clean = peer.call("context/usage", {"sessionId": expected["sessionId"]})
        after_hostile = peer.call("context/usage", {"sessionId": seen["sessionId"]})
        assert after_hostile["tokens"] == after_clean["tokens"] > expected["tokens"]

        # A line another program appends with the keys, followed while open.
        line = {
            "type": "message",
            "id": "f0110wed",
            "parentId": peer.call("session/path", {"sessionId": seen["sessionId"]})["entries"][-1][
                "id"
            ],
            "timestamp": "2026-12-01T00:00:00.000Z",
            **HOSTILE_KEYS,
            "message": {"role": "user", "content": "from another program " * 200},
        }
        with hostile.open("ab") as handle:
            handle.write(json.dumps(line).encode() + b"\n")
        usage = peer.call("context/usage", {"sessionId": seen["sessionId"]})
        assert usage["tokens"] > after_hostile["tokens"]
        assert peer.call("session/tree", {"sessionId": seen["sessionId"]})["leafId"] == "f0110wed"

        for observed in (expected, seen):
            peer.call("session/close", {"sessionId": observed["sessionId"]})
        # Reopened (the persistent index now holds what the last open found): the same.
        reopened_clean = observe(peer, clean)
        reopened = observe(peer, hostile)
        assert reopened["tokens"] > 0 and reopened_clean["tokens"] > 0
        assert reopened["messages"][: len(reopened_clean["messages"])] == reopened_clean["messages"]
        assert peer.violations == []
    finally:
        daemon.stop()
