"""One connection in-process (an in-memory link, same code path as a socket): errors,
recovery, lifecycle, cancellation, server-to-client requests, notifications, closing."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import msgspec
import pytest

from sessiond.errors import BusyError
from sessiond.jsonrpc import RequestContext, Router
from sessiond.jsonrpc.client_requests import (
    ClientDisconnected,
    ClientRequestTimeout,
    ClientResultInvalid,
    ClientReturnedError,
)
from sessiond.jsonrpc.connection_limits import PRE_AUTH_MAX_FRAME_BYTES
from sessiond.jsonrpc.handler_context import NotificationContext
from sessiond.jsonrpc.header_framing import encode_frame
from sessiond.jsonrpc.lifecycle import State
from tests.jsonrpc.harness import Link, make_link


def error_of(answer: dict[str, Any]) -> tuple[int, str]:
    assert "error" in answer, answer
    return answer["error"]["code"], answer["error"]["data"]["kind"]


async def still_serves(client: Any) -> None:
    assert await client.result("echo", {"still": "here"}) == {"still": "here"}


# -- lifecycle ---------------------------------------------------------------------------------------


async def test_requests_before_initialize_get_32002_and_notifications_are_dropped(
    link: Link,
) -> None:
    client = link.client
    assert error_of(await client.request("echo", {"a": 1})) == (-32002, "serverNotInitialized")
    client.notify("test/ping", {"value": 1})
    await client.initialize()
    await still_serves(client)
    assert client.notifications == []  # the early ping was dropped, never answered with a pong


async def test_initialize_result_comes_from_the_daemons_handler(link: Link) -> None:
    result = await link.client.initialize(capabilities={"hooks": []})
    assert result["serverInfo"] == {"name": "example", "version": "1"}
    assert result["capabilities"]["client"] == "wire"
    assert link.connection.state is State.READY


async def test_second_initialize_is_an_invalid_request(ready: Link) -> None:
    assert error_of(await ready.client.request("initialize", {}))[0] == -32600


async def test_after_shutdown_only_exit_is_accepted(ready: Link) -> None:
    client = ready.client
    assert await client.result("shutdown") is None
    answer = await client.request("echo", {})
    assert error_of(answer) == (-32600, "invalidRequest")
    assert "shutting down" in answer["error"]["message"]
    client.notify("exit")
    await asyncio.wait_for(client.closed, 1)
    assert ready.connection.closed and ready.connection.exit_code == 0


async def test_exit_without_shutdown_means_exit_code_1(ready: Link) -> None:
    ready.client.notify("exit")
    await asyncio.wait_for(ready.client.closed, 1)
    assert ready.connection.exit_code == 1


async def test_shutdown_is_answered_after_the_requests_before_it(ready: Link) -> None:
    client = ready.client
    slow = client.start_request("sleep", {"seconds": 0.2})
    stop = client.start_request("shutdown")
    await client.answer(stop)
    assert "result" in await client.answer(slow)
    order = [m.get("id") for m in client.received if isinstance(m, dict)]
    assert order.index(slow) < order.index(stop)


async def test_a_failed_initialize_can_be_retried() -> None:
    router = Router()
    attempts: list[int] = []

    @router.request("initialize")
    def initialize(ctx: RequestContext, params: object) -> dict[str, Any]:
        attempts.append(1)
        if len(attempts) == 1:
            raise BusyError("not yet")
        return {"capabilities": {}}

    link = make_link(router)
    assert error_of(await link.client.request("initialize", {})) == (-32012, "busy")
    assert link.connection.state is State.UNINITIALIZED
    assert await link.client.result("initialize", {}) == {"capabilities": {}}
    link.connection.close()


# -- malformed input and recovery -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "code", "answer_id"),
    [
        (b"{not json", -32700, None),
        (b'{"jsonrpc":"2.0","id":5,"method":"echo"', -32700, None),
        (b'{"jsonrpc":"1.0","id":5,"method":"echo"}', -32600, 5),
        (b'{"id":6,"method":"echo"}', -32600, 6),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"echo"}', -32600, None),
        (b'{"jsonrpc":"2.0","id":7,"method":["echo"]}', -32600, 7),
        (b'{"jsonrpc":"2.0","id":8}', -32600, 8),
        (b"42", -32600, None),
    ],
)
async def test_bad_messages_get_errors_and_the_next_request_is_served(
    ready: Link, raw: bytes, code: int, answer_id: object
) -> None:
    ready.client.send_raw(encode_frame(raw))
    answer = await ready.client.answer(answer_id)
    assert answer["error"]["code"] == code
    assert answer["id"] == answer_id
    await still_serves(ready.client)


async def test_batch_is_refused_per_request_in_an_array(ready: Link) -> None:
    ready.client.send(
        [{"jsonrpc": "2.0", "id": 11, "method": "echo"}, {"jsonrpc": "2.0", "method": "n"}]
    )
    answer = await ready.client.answer(11)
    assert answer["error"]["code"] == -32600
    assert "batch" in answer["error"]["message"]
    assert isinstance(ready.client.received[-1], list)
    await still_serves(ready.client)


async def test_broken_frames_get_parse_errors_and_the_stream_recovers(ready: Link) -> None:
    client = ready.client
    good = b'{"jsonrpc":"2.0","id":21,"method":"echo","params":{"n":21}}'
    client.send_raw(b"Content-Length: abc\r\n\r\n")
    client.send_raw(b"total garbage\r\n\r\n")
    client.send_raw(b"Content-Length: %d\r\n\r\n%b" % (len(good) + 20, good))  # too long
    client.send_raw(encode_frame(b'{"jsonrpc":"2.0","id":22,"method":"echo","params":{}}'))
    assert (await client.answer(22))["result"] == {}
    errors = [m for m in client.received if isinstance(m, dict) and m.get("id") is None]
    assert [e["error"]["code"] for e in errors] == [-32700, -32700, -32700]
    messages = [e["error"]["message"] for e in errors]
    assert "Invalid Content-Length header value 'abc'" in messages[0]
    assert "not a message header" in messages[1]
    assert "a new header began" in messages[2]


async def test_oversized_message_is_refused_with_its_id() -> None:
    link = make_link(max_frame_bytes=2000)
    await link.client.initialize()
    big = {"jsonrpc": "2.0", "id": 31, "method": "echo", "params": {"x": "y" * 50_000}}
    link.client.send(big)
    answer = await link.client.answer(31)
    assert answer["error"]["code"] == -32600
    assert answer["error"]["data"] == {"kind": "invalidRequest", "reason": "tooLarge"}
    await still_serves(link.client)
    link.connection.close()


async def test_unknown_method_and_unknown_notifications(
    ready: Link, caplog: pytest.LogCaptureFixture
) -> None:
    client = ready.client
    answer = await client.request("no/such", {})
    assert error_of(answer) == (-32601, "methodNotFound")
    assert "no/such" in answer["error"]["message"]
    with caplog.at_level(logging.INFO, logger="sessiond"):
        client.notify("no/suchNotification", {})
        client.notify("$/setTrace", {"value": "off"})
        await still_serves(client)
    logged = caplog.text
    assert "no/suchNotification" in logged and "$/setTrace" not in logged
    assert [m for m in client.received if isinstance(m, dict) and "id" not in m] == []


# -- params ------------------------------------------------------------------------------------------


async def test_missing_params_are_an_empty_object(ready: Link) -> None:
    assert await ready.client.result("echo") == {}
    assert (await ready.client.request("echo", None, id=41))["result"] == {}
    ready.client.send({"jsonrpc": "2.0", "id": 42, "method": "echo", "params": None})
    assert (await ready.client.answer(42))["result"] == {}


async def test_missing_required_field_names_it(ready: Link) -> None:
    answer = await ready.client.request("append")
    assert error_of(answer) == (-32602, "invalidParams")
    assert "sessionId" in answer["error"]["message"]


async def test_wrong_nested_field_gives_its_path(ready: Link) -> None:
    params = {"sessionId": "s", "entries": [{"role": "user", "text": 5}]}
    answer = await ready.client.request("append", params)
    assert answer["error"]["code"] == -32602
    assert answer["error"]["data"]["path"] == "params.entries[0].text"
    assert "Expected `str`, got `int`" in answer["error"]["message"]


async def test_positional_params_are_invalid_params(ready: Link) -> None:
    answer = await ready.client.request("append", [1, 2])
    assert error_of(answer) == (-32602, "invalidParams")
    await still_serves(ready.client)


async def test_camel_case_params_and_results(ready: Link) -> None:
    params = {"sessionId": "s1", "entries": [{"role": "user", "text": "hé"}]}
    result = await ready.client.result("append", params)
    assert result == {"sessionId": "s1", "count": 1, "texts": ["hé"]}


# -- results and errors ------------------------------------------------------------------------------


async def test_raw_result_is_sent_byte_for_byte(ready: Link) -> None:
    await ready.client.result("raw")
    assert b'"result":{"pre":"encoded","n":[1,2,3]}' in bytes(ready.sink.written)


async def test_sessiond_errors_keep_code_kind_and_details(ready: Link) -> None:
    answer = await ready.client.request("fail", {"kind": "notFound"})
    assert answer["error"] == {
        "code": -32010,
        "message": "Entry abc not found",
        "data": {"kind": "notFound", "entryId": "abc"},
    }


async def test_other_exceptions_are_internal_errors_logged_not_sent(
    ready: Link, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="sessiond"):
        answer = await ready.client.request("fail", {"kind": "boom"})
    assert answer["error"] == {
        "code": -32603,
        "message": "Internal error",
        "data": {"kind": "internal"},
    }
    assert b"secret internal detail" not in bytes(ready.sink.written)
    assert b"Traceback" not in bytes(ready.sink.written)
    assert "secret internal detail" in caplog.text and "Traceback" in caplog.text
    await still_serves(ready.client)


async def test_unencodable_result_is_an_internal_error(ready: Link) -> None:
    assert error_of(await ready.client.request("unencodable")) == (-32603, "internal")
    await still_serves(ready.client)


async def test_duplicate_id_in_flight_is_refused(ready: Link) -> None:
    first = ready.client.start_request("sleep", {"seconds": 0.2}, id="dup")
    ready.client.send({"jsonrpc": "2.0", "id": "dup", "method": "echo", "params": {}})
    refusal = await ready.client.answer(first)  # the first answer under that id is the refusal
    assert refusal["error"]["code"] == -32600 and "already in use" in refusal["error"]["message"]


# -- cancellation ------------------------------------------------------------------------------------


async def test_cancel_request_answers_32800_at_once(ready: Link) -> None:
    client = ready.client
    # An hour's sleep: only the cancellation can end it within the test's wait.
    request_id = client.start_request("sleep", {"seconds": 3600})
    await asyncio.sleep(0.05)
    client.notify("$/cancelRequest", {"id": request_id})
    answer = await client.answer(request_id, timeout=30)
    assert answer["error"] == {
        "code": -32800,
        "message": "Request cancelled",
        "data": {"kind": "cancelled"},
    }
    await still_serves(client)


async def test_request_cancelled_in_the_same_read_is_still_answered(ready: Link) -> None:
    # vscode-jsonrpc sends a request and its $/cancelRequest back to back when a token is
    # cancelled right after the call: the handler's task is cancelled before it first runs.
    request = {"jsonrpc": "2.0", "id": 77, "method": "sleep", "params": {"seconds": 10}}
    cancel = {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 77}}
    ready.client.send_raw(
        encode_frame(msgspec.json.encode(request)) + encode_frame(msgspec.json.encode(cancel))
    )
    answer = await ready.client.answer(77, timeout=1)
    assert answer["error"]["code"] == -32800
    assert answer["error"]["data"] == {"kind": "cancelled"}
    assert not ready.connection.busy  # the id is free again
    await still_serves(ready.client)


async def test_cancel_of_unknown_or_finished_request_is_harmless(ready: Link) -> None:
    ready.client.notify("$/cancelRequest", {"id": 999})
    ready.client.notify("$/cancelRequest", {"wrong": "shape"})
    await still_serves(ready.client)


# -- server -> client requests -----------------------------------------------------------------------


async def test_server_request_gets_the_clients_result(ready: Link) -> None:
    ready.client.request_handlers["client/ask"] = lambda params: {"echoed": params}
    result = await ready.connection.request("client/ask", {"q": 1}, timeout=2)
    assert result == {"echoed": {"q": 1}}
    assert ready.client.server_requests[0]["method"] == "client/ask"


async def test_server_request_result_is_decoded_to_the_type_asked() -> None:
    class Verdict(msgspec.Struct):
        cancel: bool

    link = make_link()
    await link.client.initialize()
    link.client.request_handlers["hooks/before"] = lambda params: {"cancel": True}
    assert await link.connection.request("hooks/before", result_type=Verdict) == Verdict(True)
    link.client.request_handlers["hooks/before"] = lambda params: {"cancel": "yes"}
    with pytest.raises(ClientResultInvalid):
        await link.connection.request("hooks/before", result_type=Verdict)
    link.connection.close()


async def test_server_request_error_answer(ready: Link) -> None:
    async def answer_with_error() -> None:
        await ready.client.wait_for(lambda: bool(ready.client.server_requests))
        request = ready.client.server_requests[0]
        ready.client.send(
            {
                "jsonrpc": "2.0",
                "id": request["id"],
                "error": {"code": -32601, "message": "Unhandled method", "data": {"m": 1}},
            }
        )

    helper = asyncio.create_task(answer_with_error())
    with pytest.raises(ClientReturnedError) as raised:
        await ready.connection.request("client/unknown", timeout=2)
    await helper
    assert raised.value.code == -32601 and raised.value.data == {"m": 1}


async def test_server_request_timeout_sends_cancel(ready: Link) -> None:
    with pytest.raises(ClientRequestTimeout):
        await ready.connection.request("client/silent", {}, timeout=0.05)
    await ready.client.wait_for(lambda: bool(ready.client.notifications))
    request_id = ready.client.server_requests[0]["id"]
    assert ready.client.notifications == [
        {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": request_id}}
    ]


async def test_server_request_fails_when_the_client_disconnects(ready: Link) -> None:
    pending = asyncio.create_task(ready.connection.request("client/silent", timeout=5))
    await ready.client.wait_for(lambda: bool(ready.client.server_requests))
    ready.client.close()
    with pytest.raises(ClientDisconnected):
        await pending
    with pytest.raises(ClientDisconnected):
        await ready.connection.request("client/after", timeout=5)


async def test_a_handler_asking_the_client(ready: Link) -> None:
    ready.client.request_handlers["client/confirm"] = lambda params: params["x"] * 2
    answer = await ready.client.result(
        "askClient", {"method": "client/confirm", "params": {"x": 21}}
    )
    assert answer == {"answer": 42}
    timed_out = await ready.client.result("askClient", {"method": "client/none", "timeout": 0.05})
    assert timed_out == {"failure": "ClientRequestTimeout"}


# -- notifications, progress, log ------------------------------------------------------------------


async def test_notification_handler_runs_and_can_notify(ready: Link) -> None:
    ready.client.notify("test/ping", {"value": "v"})
    await ready.client.wait_for(lambda: bool(ready.client.notifications))
    assert ready.client.notifications[0]["params"] == {"value": "v"}


async def test_notification_with_bad_params_is_logged_not_answered(
    ready: Link, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="sessiond"):
        ready.client.notify("test/ping", {"nope": 1})
        await still_serves(ready.client)
    assert "test/ping" in caplog.text and "value" in caplog.text
    assert all("id" in m for m in ready.client.received if isinstance(m, dict))


async def test_sync_and_async_notification_handlers() -> None:
    router = Router()
    seen: list[str] = []

    @router.notification("a/sync")
    def on_sync(ctx: NotificationContext, params: object) -> None:
        seen.append(ctx.method)

    @router.notification("a/async", dict[str, Any])
    async def on_async(ctx: NotificationContext, params: dict[str, Any]) -> None:
        await asyncio.sleep(0)
        seen.append(params["x"])

    link = make_link(router)
    await link.client.initialize()
    link.client.notify("a/sync")
    link.client.notify("a/async", {"x": "done"})
    await link.client.result("shutdown")
    assert seen == ["a/sync", "done"]
    link.connection.close()


async def test_progress_only_with_a_work_done_token(ready: Link) -> None:
    assert await ready.client.result("progress", {"workDoneToken": "tok"}) is True
    values = [n["params"] for n in ready.client.notifications if n["method"] == "$/progress"]
    assert values == [
        {"token": "tok", "value": {"kind": "begin", "title": "working", "percentage": 0}},
        {"token": "tok", "value": {"kind": "report", "message": "half", "percentage": 50}},
        {"token": "tok", "value": {"kind": "end", "message": "done"}},
    ]
    ready.client.notifications.clear()
    assert await ready.client.result("progress", {}) is False
    assert ready.client.notifications == []


async def test_notifications_and_log_message_arrive_before_the_answer(ready: Link) -> None:
    assert await ready.client.result("notifyMe", {"count": 3}) == 3
    methods = [n["method"] for n in ready.client.notifications]
    assert methods == ["test/event"] * 3 + ["window/logMessage"]
    assert ready.client.notifications[-1]["params"] == {"type": 3, "message": "notified"}


# -- closing ---------------------------------------------------------------------------------------


async def test_close_cancels_handlers_and_runs_close_callbacks() -> None:
    router = Router()
    events: list[str] = []

    @router.request("hang")
    async def hang(ctx: RequestContext, params: object) -> None:
        try:
            await asyncio.sleep(10)
        finally:
            events.append("handler unwound")

    link = make_link(router)
    await link.client.initialize()

    async def async_callback(conn: object) -> None:
        await asyncio.sleep(0)
        events.append("async callback")

    link.connection.on_close(lambda conn: events.append("sync callback"))
    link.connection.on_close(async_callback)
    link.client.start_request("hang")
    await asyncio.sleep(0.02)
    link.client.close()
    await asyncio.sleep(0.01)
    await link.connection.wait_closed()
    assert events == ["handler unwound", "sync callback", "async callback"]


async def test_end_of_input_lets_running_requests_answer(ready: Link) -> None:
    request_id = ready.client.start_request("sleep", {"seconds": 0.1})
    await asyncio.sleep(0.01)
    ready.connection.end_of_input()
    assert "result" in await ready.client.answer(request_id)
    await asyncio.wait_for(ready.client.closed, 1)


async def test_write_pressure_pauses_and_resumes_reading(ready: Link) -> None:
    connection = ready.connection
    connection.pause_writing()
    assert ready.sink.reading_paused
    connection.resume_writing()
    assert not ready.sink.reading_paused


# -- authentication (what TCP uses) ---------------------------------------------------------------


async def test_initialize_without_or_with_a_wrong_token_is_refused_and_closed() -> None:
    for params in ({}, {"authToken": "wrong"}, {"authToken": 5}):
        link = make_link(auth_token="s3cret")
        answer = await link.client.request("initialize", params)
        assert error_of(answer) == (-32001, "unauthorized")
        await asyncio.wait_for(link.client.closed, 1)
        assert b"s3cret" not in bytes(link.sink.written)


async def test_initialize_with_the_token_is_accepted_and_lifts_the_size_limit() -> None:
    link = make_link(auth_token="s3cret")
    params = {"x": "y" * PRE_AUTH_MAX_FRAME_BYTES}
    await link.client.initialize(authToken="s3cret")
    assert (await link.client.request("echo", params, id="big"))["result"] == params
    link.connection.close()


async def test_oversized_message_before_authentication_closes() -> None:
    link = make_link(auth_token="s3cret")
    link.client.start_request("initialize", {"pad": "y" * PRE_AUTH_MAX_FRAME_BYTES}, id="big")
    assert (await link.client.answer("big"))["error"]["code"] == -32600
    await asyncio.wait_for(link.client.closed, 1)
