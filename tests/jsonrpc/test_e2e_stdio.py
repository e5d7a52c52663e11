"""End to end over stdio with pytest-lsp and a stock pygls client, as an editor would talk."""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol.types import CancelParams
from pygls.exceptions import (
    JsonRpcInternalError,
    JsonRpcInvalidParams,
    JsonRpcMethodNotFound,
    JsonRpcRequestCancelled,
    JsonRpcServerError,
)
from pytest_lsp import ClientServerConfig

from tests.jsonrpc.harness import PlainClient
from tests.jsonrpc.wire_client import EXAMPLE_SERVER, LOOP_ARGS

LOG_FILE = Path(tempfile.mkdtemp(prefix="sessiond-rpc-e2e-")) / "server.log"


def client_factory() -> PlainClient:
    client = PlainClient()

    @client.feature("client/confirm")
    def confirm(params: Any) -> dict[str, Any]:
        client.asked.append(params)
        return {"ok": True, "got": params}

    for method in ("test/event", "window/logMessage", "$/progress"):

        def record(params: Any, method: str = method) -> None:
            client.notifications.append((method, params))

        client.feature(method)(record)
    return client


@pytest_lsp.fixture(
    config=ClientServerConfig(
        server_command=[
            sys.executable,
            str(EXAMPLE_SERVER),
            "--stdio",
            "--log-file",
            str(LOG_FILE),
            *LOOP_ARGS,
        ],
        client_factory=client_factory,
    )
)
async def client(rpc_client: PlainClient):  # type: ignore[no-untyped-def]
    result = await call(
        rpc_client, "initialize", {"clientInfo": {"name": "pytest-lsp"}, "capabilities": {}}
    )
    assert result["capabilities"]["client"] == "pytest-lsp"
    rpc_client.protocol.notify("initialized", {})
    yield
    # Without exit the server would wait for stdin to close and client.stop() would hang.
    assert await call(rpc_client, "shutdown") is None
    rpc_client.protocol.notify("exit")


async def call(client: PlainClient, method: str, params: Any = None) -> Any:
    return await asyncio.wait_for(client.protocol.send_request_async(method, params), 5)


async def test_echo_typed_params_and_non_ascii(client: PlainClient) -> None:
    assert await call(client, "echo", {"text": "héllo ✓ 日本", "n": [1, 2]}) == {
        "text": "héllo ✓ 日本",
        "n": [1, 2],
    }
    appended = await call(
        client, "append", {"sessionId": "s", "entries": [{"role": "user", "text": "hi"}]}
    )
    assert appended == {"sessionId": "s", "count": 1, "texts": ["hi"]}
    assert await call(client, "raw") == {"pre": "encoded", "n": [1, 2, 3]}


async def test_errors_reach_pygls_as_its_exception_types(client: PlainClient) -> None:
    with pytest.raises(JsonRpcMethodNotFound):
        await call(client, "no/such")
    with pytest.raises(JsonRpcInvalidParams) as invalid:
        await call(client, "append", {"entries": []})
    assert "sessionId" in invalid.value.message
    with pytest.raises(JsonRpcServerError) as not_found:
        await call(client, "fail", {"kind": "notFound"})
    assert not_found.value.code == -32010
    assert not_found.value.data == {"kind": "notFound", "entryId": "abc"}
    with pytest.raises(JsonRpcInternalError) as internal:
        await call(client, "fail", {"kind": "boom"})
    assert internal.value.message == "Internal error"
    await asyncio.sleep(0.05)
    log = LOG_FILE.read_text(encoding="utf-8")
    assert "Traceback" in log and "secret internal detail" in log
    assert await call(client, "echo", {"after": "errors"}) == {"after": "errors"}


async def test_cancel_request(client: PlainClient) -> None:
    # An hour's sleep: only the cancellation can end it within the test's wait.
    pending = client.protocol.send_request_async("sleep", {"seconds": 3600}, msg_id="nap")
    await asyncio.sleep(0.1)
    client.protocol.notify("$/cancelRequest", CancelParams(id="nap"))
    with pytest.raises(JsonRpcRequestCancelled):
        await asyncio.wait_for(pending, 30)


async def test_server_asks_the_client(client: PlainClient) -> None:
    answer = await call(
        client, "askClient", {"method": "client/confirm", "params": {"q": "compact?"}}
    )
    assert answer == {"answer": {"ok": True, "got": {"q": "compact?"}}}
    assert client.asked == [{"q": "compact?"}]
    unhandled = await call(client, "askClient", {"method": "client/unknown"})
    assert unhandled["failure"] == "ClientReturnedError" and unhandled["code"] == -32601


async def test_notifications_progress_and_log_messages(client: PlainClient) -> None:
    assert await call(client, "notifyMe", {"count": 2}) == 2
    assert await call(client, "progress", {"workDoneToken": 7}) is True
    await asyncio.sleep(0.05)
    methods = [method for method, _ in client.notifications]
    assert methods == ["test/event", "test/event", "window/logMessage"] + ["$/progress"] * 3
    assert client.notifications[3][1] == {
        "token": 7,
        "value": {"kind": "begin", "title": "working", "percentage": 0},
    }


async def test_a_stray_print_does_not_corrupt_the_stream(client: PlainClient) -> None:
    assert await call(client, "print") == "printed"
    assert await call(client, "echo", {"still": "framed"}) == {"still": "framed"}
