"""Cancelling a caller's task, and aborting the daemon's long operations, on a held summary."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from sessiond_client import BusyError, OperationCancelledError
from sessiond_client import types as t
from tests.fake_provider import Answer, FakeProvider, default_answer

from .conftest import Connect
from .helpers import conversation, recorder, with_candidates

Wire = list[tuple[str, dict[str, Any]]]


def hold(body: dict[str, Any]) -> Answer:
    return Answer(hold=True)


async def _until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.01)


async def _arrived(provider: FakeProvider) -> None:
    assert await asyncio.to_thread(provider.arrived.wait, 5), "the summary request never came"


def _sent_id(wire: Wire, method: str) -> int:
    return next(m["id"] for d, m in wire if d == "send" and m.get("method") == method)


def _answer(wire: Wire, request_id: int) -> dict[str, Any] | None:
    return next(
        (m for d, m in wire if d == "recv" and "method" not in m and m.get("id") == request_id),
        None,
    )


async def test_cancelled_caller_cancels_the_request_in_the_daemon(
    connect: Connect, project: str, provider: FakeProvider
) -> None:
    provider.responder = hold
    wire: Wire = []
    client = await connect(trace=recorder(wire))
    await client.initialize(settings=with_candidates(provider.candidate()))
    sid = (await client.new_session(cwd=project)).session_id
    ids = await conversation(client, sid)
    ended = client.notifications("compaction/ended")

    task = asyncio.create_task(client.compact(sid))
    await _arrived(provider)
    task.cancel()  # the provider holds its answer: the caller does not wait for it
    with pytest.raises(asyncio.CancelledError):
        await task

    request_id = _sent_id(wire, "compaction/run")
    cancel = {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": request_id}}
    assert ("send", cancel) in wire
    # The daemon acted on it: the run ended aborted, and the request was answered -32800.
    note = await ended.wait_for(lambda n: True, timeout=5)
    assert isinstance(note.params, t.CompactionEndedNotification) and note.params.aborted
    await _until(lambda: _answer(wire, request_id) is not None)
    answer = _answer(wire, request_id)
    assert answer is not None and answer["error"]["code"] == -32800
    assert (await client.tree(sid)).leaf_id == ids[-1]  # nothing written

    # The session is free again: the next compaction is not "busy".
    provider.responder = default_answer
    done = await asyncio.wait_for(client.compact(sid), 10)
    assert done.entry["summary"].startswith("## Goal\nhistory summary")


async def test_a_timeout_around_a_request_cancels_it_too(
    connect: Connect, project: str, provider: FakeProvider
) -> None:
    provider.responder = hold
    wire: Wire = []
    client = await connect(trace=recorder(wire))
    await client.initialize(settings=with_candidates(provider.candidate()))
    sid = (await client.new_session(cwd=project)).session_id
    await conversation(client, sid)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.5):
            await client.compact(sid)
    request_id = _sent_id(wire, "compaction/run")
    assert any(
        m.get("method") == "$/cancelRequest" and m["params"]["id"] == request_id
        for d, m in wire
        if d == "send"
    )
    await _until(lambda: _answer(wire, request_id) is not None)


async def test_abort_compaction_and_busy(
    connect: Connect, project: str, provider: FakeProvider
) -> None:
    provider.responder = hold
    client = await connect()
    await client.initialize(settings=with_candidates(provider.candidate()))
    sid = (await client.new_session(cwd=project)).session_id
    ids = await conversation(client, sid)
    running = asyncio.create_task(client.compact(sid))
    await _arrived(provider)
    with pytest.raises(BusyError) as busy:
        await client.navigate(sid, ids[1])
    assert busy.value.code == -32012 and busy.value.details["running"] == "compaction"
    assert (await client.abort_compaction(sid)).aborted
    with pytest.raises(OperationCancelledError) as aborted:
        await asyncio.wait_for(running, 5)
    assert aborted.value.message == "Compaction cancelled"


async def test_abort_navigation_while_the_branch_is_summarized(
    connect: Connect, project: str, provider: FakeProvider
) -> None:
    provider.responder = hold
    client = await connect()
    await client.initialize(settings=with_candidates(provider.candidate()))
    sid = (await client.new_session(cwd=project)).session_id
    ids = await conversation(client, sid, turns=2)
    navigating = asyncio.create_task(client.navigate(sid, ids[1], summarize=True))
    await _arrived(provider)
    assert (await client.abort_navigation(sid)).aborted
    result = await asyncio.wait_for(navigating, 5)
    assert result.aborted and result.cancelled
    assert (await client.tree(sid)).leaf_id == ids[-1]
