"""Summaries that do not finish: $/cancelRequest, compaction/abort, tree/abort, a lost
client, a summarizer that fails.

The loopback summarizer holds every request until released, so the daemon is
waiting on it when the test interrupts. Whatever interrupts it, the answer is
prompt and the session file is left exactly as it was; so it is when the
summarizer fails.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from pygls.exceptions import JsonRpcException

from tests.e2e.conftest import private_root
from tests.e2e.support import (
    FAST_SETTINGS,
    AgentClient,
    Daemon,
    conversation,
    error_data,
    file_lines,
    isolated_env,
    reopen,
    start_listening_daemon,
)
from tests.fake_provider import Answer, FakeProvider, default_answer

pytestmark = pytest.mark.asyncio(loop_scope="module")
ROOT = private_root("cancel")
# Seconds: a bound for the test, not a speed target. The summarizer holds its answer
# until released, so a request it blocks is answered only if the cancellation works.
ANSWER_WAIT = 30.0

Connect = Callable[..., Awaitable[AgentClient]]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def daemon(module_provider: FakeProvider) -> AsyncIterator[Daemon]:
    # Summarizer endpoints come from the daemon's settings file, never from a client:
    # the clients below name this configured candidate.
    settings = {
        **FAST_SETTINGS,
        "summarizer": {"candidates": [module_provider.candidate(model="m")]},
    }
    running = await start_listening_daemon(
        ROOT, ["--socket", str(ROOT / "cancel.sock")], isolated_env(ROOT, settings)
    )
    yield running
    assert await running.stop() == 0, running.log_text()


@pytest.fixture
def holding(module_provider: FakeProvider) -> Iterator[FakeProvider]:
    """The summarizer accepts every request and never answers until released."""
    module_provider.requests.clear()
    module_provider.released.clear()
    module_provider.arrived.clear()
    module_provider.responder = lambda body: Answer(hold=True)
    yield module_provider
    module_provider.responder = default_answer
    module_provider.released.set()


@pytest_asyncio.fixture(loop_scope="module")
async def connect(daemon: Daemon, module_provider: FakeProvider) -> AsyncIterator[Connect]:
    opened: list[AgentClient] = []

    async def open_client(name: str) -> AgentClient:
        client = AgentClient(name)
        await client.start_unix(daemon.address)
        opened.append(client)
        await client.initialize(
            settings={
                # No extractive stand-in: a held model must stay the only way to a summary.
                "summarizer": {
                    "candidates": [module_provider.candidate(model="m")],
                    "extractiveFallback": False,
                },
                "compaction": {"keepRecentTokens": 200, "shortSummary": False},
            }
        )
        return client

    yield open_client
    for client in opened:
        if not client.stopped:
            await client.disconnect()


async def new_session(client: AgentClient) -> tuple[str, Path, list[str]]:
    created = await client.call("session/new", {"cwd": str(ROOT / "project"), "writeNow": True})
    appended = await client.call(
        "session/append", {"sessionId": created["sessionId"], "entries": conversation(4, words=40)}
    )
    return created["sessionId"], Path(created["path"]), appended["ids"]


async def summarizer_reached(provider: FakeProvider) -> None:
    assert await asyncio.to_thread(provider.arrived.wait, 10), "the summarizer was never called"


async def refused(future: asyncio.Future[Any]) -> JsonRpcException:
    """The error ``future`` ends with while the summarizer still holds its answer."""
    with pytest.raises(JsonRpcException) as caught:
        await asyncio.wait_for(future, ANSWER_WAIT)
    return caught.value


async def test_cancel_request_stops_a_hanging_compaction(
    connect: Connect, holding: FakeProvider
) -> None:
    client = await connect("canceller")
    sid, path, ids = await new_session(client)
    before = path.read_bytes()
    request_id, pending = client.start_call("compaction/run", {"sessionId": sid})
    await summarizer_reached(holding)
    client.cancel(request_id)
    error = await refused(pending)
    assert error.code == -32800
    assert error_data(error)["kind"] == "cancelled"
    assert path.read_bytes() == before
    ended = await client.wait_for("compaction/ended", lambda p: p["sessionId"] == sid)
    assert ended["aborted"] is True and "entryId" not in ended
    # The session is free again: the next compaction runs to the end.
    holding.responder = default_answer
    run = await client.call("compaction/run", {"sessionId": sid})
    assert file_lines(path)[-1]["id"] == run["entry"]["id"]
    assert run["entry"]["parentId"] == ids[-1]


async def test_compaction_abort_from_another_request(
    connect: Connect, holding: FakeProvider
) -> None:
    client = await connect("aborter")
    watcher = await connect("watcher")
    sid, path, _ = await new_session(client)
    await watcher.call("session/open", {"path": str(path)})
    before = path.read_bytes()
    assert await watcher.call("compaction/abort", {"sessionId": sid}) == {"aborted": False}
    _, pending = client.start_call("compaction/run", {"sessionId": sid})
    await summarizer_reached(holding)
    assert await watcher.call("compaction/abort", {"sessionId": sid}) == {"aborted": True}
    error = await refused(pending)
    # The kind, not the code: -32800 is kept for answers to $/cancelRequest (LSP clients
    # drop other answers with it), so an abort may carry sessiond's own "cancelled" code.
    assert error_data(error)["kind"] == "cancelled"
    assert error.message == "Compaction cancelled"
    assert path.read_bytes() == before
    for each in (client, watcher):
        ended = await each.wait_for("compaction/ended", lambda p: p["sessionId"] == sid)
        assert ended["aborted"] is True


async def test_tree_abort_stops_a_hanging_branch_summary(
    connect: Connect, holding: FakeProvider
) -> None:
    client = await connect("navigator")
    sid, path, ids = await new_session(client)
    before = path.read_bytes()
    _, pending = client.start_call(
        "tree/navigate", {"sessionId": sid, "targetId": ids[1], "summarize": True}
    )
    await summarizer_reached(holding)
    assert holding.purposes() == ["branch"]
    assert await client.call("tree/abort", {"sessionId": sid}) == {"aborted": True}
    result = await asyncio.wait_for(pending, ANSWER_WAIT)
    assert result["cancelled"] is True and result["aborted"] is True
    assert result["leafId"] == ids[-1]
    assert path.read_bytes() == before


async def test_a_client_lost_mid_compaction_leaves_the_file_intact(
    connect: Connect, holding: FakeProvider
) -> None:
    survivor = await connect("survivor")
    doomed = await connect("doomed")
    sid, path, ids = await new_session(doomed)
    before = path.read_bytes()
    _, pending = doomed.start_call("compaction/run", {"sessionId": sid})
    await summarizer_reached(holding)
    await doomed.disconnect()
    assert pending.done() or pending.cancel()

    # The daemon keeps serving the others (the doomed compaction still holds).
    listed = await asyncio.wait_for(
        survivor.call("session/list", {"cwd": str(ROOT / "project")}), ANSWER_WAIT
    )
    assert str(path) in [s["path"] for s in listed["sessions"]]

    # Nothing was written.
    assert path.read_bytes() == before
    assert all(line.get("type") != "compaction" for line in file_lines(path))
    store = reopen(path)
    assert [record.id for record in store.records()] == ids
    store.close()

    # Nobody else had the session open: it was closed, and its lock released.
    lock = path.with_name(path.name + ".lock")
    for _ in range(250):
        if not lock.exists():
            break
        await asyncio.sleep(0.02)
    assert not lock.exists(), "the lost client's session was never closed"
    opened = await survivor.call("session/open", {"path": str(path)})
    assert opened["sessionId"] == sid
    assert opened["entryCount"] == len(ids) and "recovery" not in opened


# -- a summarizer that fails -----------------------------------------------------------------------


@pytest.fixture
def failing(module_provider: FakeProvider) -> Iterator[FakeProvider]:
    module_provider.requests.clear()
    module_provider.responder = lambda body: Answer(status=400, error="model is not loaded")
    yield module_provider
    module_provider.responder = default_answer


async def test_a_failing_summarizer_fails_with_pis_messages_and_writes_nothing(
    connect: Connect, failing: FakeProvider
) -> None:
    client = await connect("unlucky")
    sid, path, _ = await new_session(client)
    before = path.read_bytes()
    with pytest.raises(JsonRpcException) as failed:
        await client.call("compaction/run", {"sessionId": sid})
    assert error_data(failed.value)["kind"] == "summarizerFailed"
    assert failed.value.message.startswith("Summarization failed: ")
    assert "model is not loaded" in failed.value.message
    assert path.read_bytes() == before

    assert len(failing.requests) == 1, "a manual compaction does not retry"

    # At the end of a turn over the threshold, the failure is reported, not raised, after
    # pi's retries (the session's own settings make them quick).
    updated = await client.call(
        "settings/update", {"sessionId": sid, "settings": {"retry": {"baseDelayMs": 10}}}
    )
    assert updated["settings"]["retry"]["baseDelayMs"] == 10
    turn = await client.call(
        "agent/turnEnded", {"sessionId": sid, "contextWindow": 1200}, timeout=20
    )
    assert turn["action"] == "none" and "compaction" not in turn
    assert turn["errorMessage"].startswith("Auto-compaction failed: Summarization failed: ")
    ended = await client.wait_for(
        "compaction/ended", lambda p: p["sessionId"] == sid and p.get("reason") == "threshold"
    )
    assert ended["errorMessage"] == turn["errorMessage"] and ended["aborted"] is False
    assert path.read_bytes() == before
    assert len(failing.requests) == 1 + 4, "one try and three retries"
