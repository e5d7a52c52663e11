"""pi itself writes a session file that the daemon holds open: clients hear of it.

pi 0.73.1 (from the npm registry, as the parity tests use it) appends with its own
SessionManager, without sessiond's lock, while a client has the session open in a
daemon. Skipped only where node or `npm ci` in tests/parity is missing, like the
parity tests.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import msgspec
import pytest

from sessiond_client import SessiondClient
from sessiond_client import types as t
from tests.parity.pi_reference import PARITY_DIR, node_executable, unavailable_reason

from .helpers import message, user

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample-session.jsonl"


@pytest.fixture
def session_file(tmp_path: Path) -> Path:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    path = tmp_path / "held.jsonl"
    shutil.copyfile(SAMPLE, path)
    return path


async def _pi_appends(path: Path, count: int, delay_ms: int = 0) -> list[dict[str, Any]]:
    process = await asyncio.create_subprocess_exec(
        node_executable(),
        str(PARITY_DIR / "pi_append.mjs"),
        str(path),
        str(count),
        str(delay_ms),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return [json.loads(line) for line in out.decode().splitlines()]


async def _changes_until(
    stream: Any, wanted: set[str], timeout: float = 10.0
) -> list[t.SessionChanged]:
    """session/changed notifications until every id in ``wanted`` was announced."""
    seen: list[t.SessionChanged] = []
    announced: set[str] = set()
    async with asyncio.timeout(timeout):
        async for notification in stream:
            params = notification.params
            assert isinstance(params, t.SessionChanged)
            seen.append(params)
            announced.update(params.appended_ids)
            if wanted <= announced:
                return seen
    raise AssertionError(f"the stream ended before {wanted - announced} were announced")


async def test_pi_appending_to_a_held_session_reaches_every_client(
    client: SessiondClient, session_file: Path
) -> None:
    opened = await client.open_session(session_file)
    sid = opened.session_id
    before = (await client.tree(sid)).leaf_id
    stream = client.notifications("session/changed")
    written = await _pi_appends(session_file, 4, delay_ms=20)
    assert written[0]["parentId"] == before  # pi appended under the file's last entry
    changes = await _changes_until(stream, {w["id"] for w in written})
    assert {c.reason for c in changes} == {"fileAppended"}
    assert changes[-1].leaf_id == written[-1]["id"]
    # Reads see pi's entries at once, in the tree and the context.
    tree = await client.tree(sid)
    assert tree.leaf_id == written[-1]["id"]
    context = await client.build_context(sid)
    assert b"pi answers 3" in msgspec.json.encode(context.messages)
    # The next append through the daemon goes under pi's last entry ...
    mine = await client.append(sid, [message(user("the daemon's client, after pi"))])
    entry = await client.entry(sid, mine.ids[0])
    assert entry.entry["parentId"] == written[-1]["id"]  # type: ignore[index]
    # ... and pi, opening the file again, continues under that one.
    again = await _pi_appends(session_file, 1)
    assert again[0]["parentId"] == mine.ids[0]
    await _changes_until(stream, {again[0]["id"]})
    stream.close()


async def test_a_file_replaced_behind_the_daemon_is_read_again(
    client: SessiondClient, session_file: Path, tmp_path: Path
) -> None:
    sid = (await client.open_session(session_file)).session_id
    count = len((await client.tree(sid)).nodes)
    stream = client.notifications("session/changed")
    lines = session_file.read_bytes().splitlines(keepends=True)
    replacement = tmp_path / "replacement"
    replacement.write_bytes(b"".join(lines[: len(lines) // 2]))
    os.replace(replacement, session_file)  # what an editor's save or a sync does
    async with asyncio.timeout(10):
        notification = await anext(aiter(stream))
    assert isinstance(notification.params, t.SessionChanged)
    assert notification.params.reason == "fileRewritten"
    assert notification.params.entry_count < count
    assert len((await client.tree(sid)).nodes) == notification.params.entry_count
    # Appends go to the new file, under its last entry.
    mine = await client.append(sid, [message(user("after the replacement"))])
    assert mine.ids[0].encode() in session_file.read_bytes()
    stream.close()
