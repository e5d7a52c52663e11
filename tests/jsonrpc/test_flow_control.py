"""Flow control of one connection, in-process: what a client that does not read, pipelines
without limit, or sends before its token can make the connection hold."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from sessiond.jsonrpc.connection_limits import (
    MAX_CONCURRENT_REQUESTS,
    PRE_AUTH_MAX_MESSAGES,
    UNREAD_NOTIFICATIONS_LIMIT,
)
from sessiond.jsonrpc.header_framing import encode_frame
from sessiond.jsonrpc.receive_budget import ReceiveBudget
from tests.jsonrpc.harness import Link, make_link


def request(request_id: Any, method: str, params: Any) -> bytes:
    """A frame with the id ``f"r{request_id}"`` (apart from the test client's own ids)."""
    message = {"jsonrpc": "2.0", "id": f"r{request_id}", "method": method, "params": params}
    return encode_frame(msgspec.json.encode(message))


def handler_tasks() -> int:
    return sum(1 for task in asyncio.all_tasks() if "_run_request" in task.get_coro().__qualname__)


async def test_requests_wait_while_the_client_is_not_reading(ready: Link) -> None:
    connection, sink = ready.connection, ready.sink
    connection.pause_writing()  # what the transport says when its buffer is over the mark
    written = len(sink.written)
    connection.feed(b"".join(request(i, "echoSync", {"n": i}) for i in range(5)))
    assert len(sink.written) == written, "answers were produced for a client that is not reading"
    assert sink.reading_paused and connection.busy
    connection.resume_writing()
    answers = [await ready.client.answer(f"r{i}") for i in range(5)]
    assert [answer["result"] for answer in answers] == [{"n": i} for i in range(5)]
    assert not sink.reading_paused and not connection.busy


async def test_the_end_of_input_waits_for_the_requests_still_queued(ready: Link) -> None:
    connection = ready.connection
    connection.pause_writing()
    connection.feed(b"".join(request(i, "echoSync", {"n": i}) for i in range(3)))
    connection.end_of_input()
    assert not connection.closed, "queued requests were dropped at the end of input"
    connection.resume_writing()
    assert [(await ready.client.answer(f"r{i}"))["result"]["n"] for i in range(3)] == [0, 1, 2]
    await asyncio.wait_for(ready.client.closed, 1)


async def test_handler_tasks_are_capped_and_every_request_is_answered(ready: Link) -> None:
    count = 3 * MAX_CONCURRENT_REQUESTS
    ready.connection.feed(b"".join(request(i, "sleep", {"seconds": 0.01}) for i in range(count)))
    assert handler_tasks() == MAX_CONCURRENT_REQUESTS
    peak = 0
    for i in range(count):
        answer = await ready.client.answer(f"r{i}")
        assert answer["result"] == {"slept": 0.01}
        peak = max(peak, handler_tasks())
    assert peak <= MAX_CONCURRENT_REQUESTS


async def test_answers_to_the_servers_requests_get_through_when_handlers_are_full(
    ready: Link,
) -> None:
    # Every handler waits for the client's answer, and more requests wait behind them:
    # the answers must not queue behind those (each would wait out its 5 s timeout).
    client = ready.client
    client.request_handlers["client/echo"] = lambda params: params
    count = MAX_CONCURRENT_REQUESTS + 10
    ids = [
        client.start_request("askClient", {"method": "client/echo", "params": {"n": i}})
        for i in range(count)
    ]
    results = [(await client.answer(i, timeout=3))["result"] for i in ids]
    assert results == [{"answer": {"n": i}} for i in range(count)]


async def test_a_cancel_reaches_a_running_request_when_handlers_are_full(ready: Link) -> None:
    client = ready.client
    ids = [client.start_request("sleep", {"seconds": 30}) for _ in range(MAX_CONCURRENT_REQUESTS)]
    waiting = client.start_request("echo", {"queued": True})
    client.notify("$/cancelRequest", {"id": ids[0]})
    assert (await client.answer(ids[0], timeout=2))["error"]["code"] == -32800
    assert (await client.answer(waiting, timeout=2))["result"] == {"queued": True}
    for request_id in ids[1:]:
        client.notify("$/cancelRequest", {"id": request_id})
    for request_id in ids[1:]:
        assert (await client.answer(request_id, timeout=2))["error"]["code"] == -32800


async def test_a_client_that_never_reads_its_notifications_is_dropped(ready: Link) -> None:
    connection, sink = ready.connection, ready.sink
    connection.pause_writing()
    chunk = "x" * (1 << 20)
    sent = 0
    while not connection.closed and sent <= 2 * UNREAD_NOTIFICATIONS_LIMIT:
        connection.notify("test/event", {"data": chunk})
        sent += len(chunk)
    assert connection.closed and sink.aborted
    assert UNREAD_NOTIFICATIONS_LIMIT <= sent <= UNREAD_NOTIFICATIONS_LIMIT + 2 * len(chunk)


async def test_notifications_are_not_counted_against_a_client_that_reads(ready: Link) -> None:
    connection = ready.connection
    chunk = "x" * (1 << 20)
    for _ in range(3):
        connection.pause_writing()
        for _ in range(UNREAD_NOTIFICATIONS_LIMIT // len(chunk) - 1):
            connection.notify("test/event", {"data": chunk})
        connection.resume_writing()  # it caught up
    assert not connection.closed


# -- before the token -----------------------------------------------------------------------------


async def test_a_stranger_gets_a_few_messages_then_is_closed() -> None:
    link = make_link(auth_token="s3cret")
    for i in range(PRE_AUTH_MAX_MESSAGES):
        answer = await link.client.request("echo", {"i": i})
        assert answer["error"]["code"] == -32002
    link.client.send({"jsonrpc": "2.0", "id": "one-too-many", "method": "echo"})
    await asyncio.wait_for(link.client.closed, 1)
    assert link.connection.closed


async def test_a_broken_frame_before_the_token_closes() -> None:
    link = make_link(auth_token="s3cret")
    link.client.send_raw(b"Content-Length: many\r\n\r\n{}")
    await asyncio.wait_for(link.client.closed, 1)
    errors = [m for m in link.client.received if isinstance(m, dict) and "error" in m]
    assert [e["error"]["code"] for e in errors] == [-32700]


async def test_the_token_lifts_the_message_budget() -> None:
    link = make_link(auth_token="s3cret")
    await link.client.initialize(authToken="s3cret")
    for i in range(2 * PRE_AUTH_MAX_MESSAGES):
        assert await link.client.result("echo", {"i": i}) == {"i": i}
    link.connection.close()


# -- unfinished frames of all connections -------------------------------------------------------


async def test_unfinished_frames_beyond_the_shared_budget_are_refused_and_skipped() -> None:
    budget = ReceiveBudget(1 << 20)
    first, second = make_link(receive_budget=budget), make_link(receive_budget=budget)
    for link in (first, second):
        await link.client.initialize()
        await link.client.result("echo", {})  # everything sent so far has arrived
    body = b'{"jsonrpc":"2.0","id":"big","method":"echo","params":{"x":"' + b"y" * 700_000 + b'"}}'
    header = b"Content-Length: %d\r\n\r\n" % len(body)
    first.connection.feed(header + body[:600_000])
    second.connection.feed(header + body[:600_000])  # 1.2 MB unfinished: over the budget
    refused = await second.client.answer("big")
    assert refused["error"]["data"]["reason"] == "tooLarge"
    assert "unfinished messages" in refused["error"]["message"]
    second.connection.feed(body[600_000:])  # the rest is skipped: the stream stays in step
    assert await second.client.result("echo", {"after": 1}) == {"after": 1}
    first.connection.feed(body[600_000:])  # the first one was within the budget
    assert (await first.client.answer("big"))["result"] == {"x": "y" * 700_000}
    assert budget.total == 0
    for link in (first, second):
        link.connection.close()
