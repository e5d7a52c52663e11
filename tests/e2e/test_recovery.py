"""Opening damaged session files over stdio: what is repaired, what is reported, what is kept.

One daemon serves the module (a module-scoped pytest-lsp fixture); each test writes
its own damaged file and opens it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import pytest_lsp
from pytest_lsp import ClientServerConfig

from sessiond.store.session import SessionStore
from tests.e2e.conftest import private_root
from tests.e2e.support import (
    FAST_SETTINGS,
    SERVE,
    AgentClient,
    assert_no_traceback,
    assistant,
    conversation,
    file_lines,
    isolated_env,
    reopen,
    user,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")
ROOT = private_root("recovery")
FILES = ROOT / "files"


@pytest_lsp.fixture(
    scope="module",
    config=ClientServerConfig(
        server_command=[*SERVE, "--stdio", "--log-file", str(ROOT / "daemon.log")],
        client_factory=lambda: AgentClient("recovering"),
        server_env=isolated_env(ROOT, FAST_SETTINGS),
    ),
)
async def client(rpc_client: AgentClient):  # type: ignore[no-untyped-def]
    await rpc_client.initialize()
    FILES.mkdir(exist_ok=True)
    yield
    assert await rpc_client.call("shutdown") is None
    rpc_client.notify("exit")
    assert_no_traceback(params for _, params in rpc_client.notifications)


def written_session(path: Path, turns: int = 2) -> list[str]:
    """A session file written the ordinary way; returns its entry ids."""
    store = SessionStore.create(str(path.parent), path=path)
    try:
        entries = store.append_entries(conversation(turns, words=5))
        store.sync()
        return [entry.id for entry in entries]
    finally:
        store.close()


async def test_a_torn_last_line_is_cut_off_saved_and_reported(client: AgentClient) -> None:
    path = FILES / "torn.jsonl"
    ids = written_session(path)
    intact = path.read_bytes()
    # The writer died in the middle of this line.
    torn = (
        b'{"type":"message","id":"0badf00d","parentId":"' + ids[-1].encode() + b'",'
        b'"timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"user","content":"half a li'
    )
    path.write_bytes(intact + torn)

    opened = await client.call("session/open", {"path": str(path)})
    report = opened["recovery"]
    tail = report["tornTail"]
    assert tail["offset"] == len(intact) and tail["length"] == len(torn)
    assert tail["preview"].startswith('{"type":"message","id":"0badf00d"')
    saved = Path(tail["savedTo"])
    assert saved == path.with_name(path.name + ".corrupt")
    assert saved.read_bytes() == torn
    assert path.read_bytes() == intact
    assert opened["entryCount"] == len(ids) and opened["leafId"] == ids[-1]

    notice = await client.wait_for("session/recovered", lambda p: p["path"] == str(path))
    assert notice == {"sessionId": opened["sessionId"], "path": str(path), "recovery": report}

    # The repaired session takes appends as usual, and reads back cleanly.
    more = await client.call(
        "session/append",
        {"sessionId": opened["sessionId"], "entries": [user("again"), assistant("sure")]},
    )
    assert [line.get("id") for line in file_lines(path)[1:]] == ids + more["ids"]
    reopen(path).close()

    # Opening it again finds nothing more to repair.
    await client.call("session/close", {"sessionId": opened["sessionId"]})
    again = await client.call("session/open", {"path": str(path)})
    assert "recovery" not in again and again["entryCount"] == len(ids) + 2
    assert len(client.received("session/recovered", opened["sessionId"])) == 1
    await client.call("session/close", {"sessionId": opened["sessionId"]})


async def test_damage_in_the_middle_is_reported_and_kept(client: AgentClient) -> None:
    path = FILES / "damaged.jsonl"
    written_session(path)
    lines = path.read_bytes().splitlines(keepends=True)
    lines.insert(2, b"this line is not JSON\n")
    damaged = b"".join(lines)
    path.write_bytes(damaged)

    opened = await client.call("session/open", {"path": str(path)})
    (line,) = opened["recovery"]["damagedLines"]
    assert line["line"] == 3 and line["preview"] == "this line is not JSON"
    assert "tornTail" not in opened["recovery"]
    assert path.read_bytes() == damaged, "damage in the middle is never dropped"
    assert not path.with_name(path.name + ".corrupt").exists()
    notice = await client.wait_for("session/recovered", lambda p: p["path"] == str(path))
    assert notice["recovery"] == opened["recovery"]
    assert notice["sessionId"] == opened["sessionId"]
