"""Broken input on the daemon's stdin, byte for byte: each gets its error, then life goes on.

One ``sessiond serve --stdio`` process takes every case in turn. After each one the
next request is answered normally; no answer ever carries a traceback, and the
daemon's stdout holds nothing but well-formed frames until it exits.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from tests.e2e.conftest import private_root
from tests.e2e.support import (
    FAST_SETTINGS,
    Daemon,
    Wire,
    assert_no_traceback,
    assistant,
    frame,
    isolated_env,
    start_stdio_daemon,
    user,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")
ROOT = private_root("malformed")
_probes = itertools.count(1)


class Stdio:
    def __init__(self, daemon: Daemon, wire: Wire) -> None:
        self.daemon = daemon
        self.wire = wire
        self.session_id = ""
        self.entry_ids: list[str] = []
        self.finished = False

    async def exchange(self, data: bytes, request_id: Any = None) -> list[Any]:
        """Send ``data``, then a harmless request; return what came back besides its answer
        (waiting for the answer to ``request_id`` too, when the bad message had one),
        after checking that the harmless request was answered normally."""
        wire = self.wire
        start = len(wire.received)
        wire.send_bytes(data)
        probe = f"probe-{next(_probes)}"
        wire.send(
            {"jsonrpc": "2.0", "id": probe, "method": "session/list", "params": {"cwd": "/nowhere"}}
        )
        answer = await wire.answer_to(probe, start=start)
        assert answer == {"jsonrpc": "2.0", "id": probe, "result": {"sessions": []}}
        if request_id is not None:
            await wire.answer_to(request_id, start=start)
        replies = [
            m for m in wire.received[start:] if not (isinstance(m, dict) and m.get("id") == probe)
        ]
        assert_no_traceback(replies)
        return replies

    async def error_for(self, message: dict[str, Any] | bytes) -> dict[str, Any]:
        """The one reply to a single bad message."""
        if isinstance(message, bytes):
            replies = await self.exchange(message)
        else:
            request_id = message.get("id")
            valid = isinstance(request_id, int | str) and isinstance(message.get("method"), str)
            replies = await self.exchange(frame(message), request_id if valid else None)
        assert len(replies) == 1, replies
        reply: dict[str, Any] = replies[0]
        assert "result" not in reply, reply
        return reply


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stdio() -> AsyncIterator[Stdio]:
    daemon, wire = await start_stdio_daemon(ROOT, isolated_env(ROOT, FAST_SETTINGS))
    link = Stdio(daemon, wire)
    await wire.result("initialize", {"clientInfo": {"name": "raw"}})
    wire.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    created = await wire.result("session/new", {"cwd": str(ROOT / "project")})
    link.session_id = created["sessionId"]
    appended = await wire.result(
        "session/append",
        {"sessionId": link.session_id, "entries": [user("hello"), assistant("hi")]},
    )
    link.entry_ids = appended["ids"]
    yield link
    if not link.finished:
        wire.send({"jsonrpc": "2.0", "id": "bye", "method": "shutdown"})
        wire.send({"jsonrpc": "2.0", "method": "exit"})
        await daemon.process.wait()


GOOD_BODY = json.dumps(
    {"jsonrpc": "2.0", "id": "lost", "method": "session/list", "params": {"cwd": "/"}}
).encode()


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"Content-Length: 10\r\n\r\n" + GOOD_BODY, id="length-too-short"),
        pytest.param(b"Content-Length: 500\r\n\r\n" + GOOD_BODY, id="length-too-long"),
        pytest.param(b"hello, is this the daemon?\r\n\r\n", id="garbage"),
        pytest.param(b"\x00\xff\xfe\x01 binary junk", id="binary-garbage"),
        pytest.param(b"Content-Type: application/json\r\n\r\n{}", id="no-content-length"),
        pytest.param(b"Content-Length: abc\r\n\r\n{}", id="length-not-a-number"),
    ],
)
async def test_bad_frames_are_parse_errors(stdio: Stdio, data: bytes) -> None:
    replies = await stdio.exchange(data)
    assert replies, "a bad frame is reported"
    for reply in replies:
        assert reply["id"] is None
        assert reply["error"]["code"] == -32700
        assert reply["error"]["data"]["kind"] == "parseError"
    # The request inside the damaged frame is lost, never half-executed.
    assert all(m.get("id") != "lost" for m in stdio.wire.received)


async def test_length_too_long_names_the_problem(stdio: Stdio) -> None:
    (reply,) = await stdio.exchange(b"Content-Length: 400\r\n\r\n" + GOOD_BODY)
    assert "Content-Length announced 400 bytes" in reply["error"]["message"]


@pytest.mark.parametrize(
    "body",
    [
        '{"jsonrpc": "2.0", "id": 5, "method": ',
        '{"jsonrpc": "2.0", "id": 6, "method": "session/list", "params": {cwd: 1}}',
        "not json at all",
        '{"jsonrpc": "2.0", "id": 7, "method": "session/list"}}',
    ],
    ids=["truncated", "unquoted-key", "text", "trailing-brace"],
)
async def test_invalid_json_is_a_parse_error_with_id_null(stdio: Stdio, body: str) -> None:
    reply = await stdio.error_for(frame(body))
    assert reply["id"] is None
    assert reply["error"]["code"] == -32700
    assert reply["error"]["message"].startswith("Parse error")


@pytest.mark.parametrize("params", [None, "null"], ids=["absent", "null"])
async def test_missing_params_are_invalid_params(stdio: Stdio, params: str | None) -> None:
    body = '{"jsonrpc": "2.0", "id": "np", "method": "session/append"'
    body += "}" if params is None else f', "params": {params}}}'
    reply = await stdio.error_for(frame(body))
    assert reply["id"] == "np"
    assert reply["error"]["code"] == -32602
    assert "sessionId" in reply["error"]["message"]
    assert reply["error"]["data"]["kind"] == "invalidParams"


@pytest.mark.parametrize(
    ("method", "params", "path", "expected"),
    [
        ("session/append", {"sessionId": 5, "entries": []}, "params.sessionId", "str"),
        ("session/append", {"sessionId": "s", "entries": {"a": 1}}, "params.entries", "array"),
        ("session/append", {"sessionId": "s", "entries": [7]}, "params.entries[0]", "object"),
        (
            "context/usage",
            {"sessionId": "s", "contextWindow": "big"},
            "params.contextWindow",
            "int",
        ),
        ("context/build", {"sessionId": "s", "format": "xml"}, "params.format", "'xml'"),
        ("tree/navigate", {"sessionId": "s", "targetId": None}, "params.targetId", "str"),
        ("session/open", ["path"], None, "object"),
    ],
)
async def test_wrong_param_types_name_the_field(
    stdio: Stdio, method: str, params: Any, path: str | None, expected: str
) -> None:
    reply = await stdio.error_for(
        {"jsonrpc": "2.0", "id": "wt", "method": method, "params": params}
    )
    error = reply["error"]
    assert reply["id"] == "wt"
    assert error["code"] == -32602
    assert expected in error["message"]
    if path is not None:
        assert error["data"]["path"] == path
        assert f"`{path}`" in error["message"]


async def test_invalid_entry_is_refused_and_nothing_is_appended(stdio: Stdio) -> None:
    before = await stdio.wire.result("session/entries", {"sessionId": stdio.session_id})
    reply = await stdio.error_for(
        {
            "jsonrpc": "2.0",
            "id": "ie",
            "method": "session/append",
            "params": {
                "sessionId": stdio.session_id,
                "entries": [user("fine"), {"type": "message", "message": {"role": "assistant"}}],
            },
        }
    )
    assert reply["error"]["code"] == -32602
    assert reply["error"]["data"]["kind"] == "invalidEntry"
    after = await stdio.wire.result("session/entries", {"sessionId": stdio.session_id})
    assert after == before, "a refused batch appends nothing, not even its valid part"


async def test_unknown_method(stdio: Stdio) -> None:
    reply = await stdio.error_for(
        {"jsonrpc": "2.0", "id": 42, "method": "session/explode", "params": {}}
    )
    assert reply["id"] == 42
    assert reply["error"]["code"] == -32601
    assert "session/explode" in reply["error"]["message"]


@pytest.mark.parametrize(
    ("message", "reply_id"),
    [
        ({"jsonrpc": "1.0", "id": "v1", "method": "session/list"}, "v1"),
        ({"jsonrpc": "2.0", "id": {"no": 1}, "method": "session/list"}, None),
        ({"jsonrpc": "2.0", "id": "m", "method": 17}, "m"),
        ({"id": "nv", "method": "session/list"}, "nv"),
    ],
    ids=["version", "object-id", "method-not-string", "no-version"],
)
async def test_invalid_requests(stdio: Stdio, message: dict[str, Any], reply_id: Any) -> None:
    reply = await stdio.error_for(message)
    assert reply["id"] == reply_id
    assert reply["error"]["code"] == -32600


async def test_batches_are_refused_as_a_batch(stdio: Stdio) -> None:
    batch = [
        {"jsonrpc": "2.0", "id": "b1", "method": "session/list", "params": {"cwd": "/"}},
        {"jsonrpc": "2.0", "id": "b2", "method": "session/list", "params": {"cwd": "/"}},
    ]
    (reply,) = await stdio.exchange(frame(batch))
    assert isinstance(reply, list)
    assert [item["id"] for item in reply] == ["b1", "b2"]
    assert {item["error"]["code"] for item in reply} == {-32600}


async def test_unknown_session_id(stdio: Stdio) -> None:
    cases: list[tuple[str, dict[str, Any]]] = [
        ("context/build", {}),
        ("session/append", {"entries": []}),
        ("compaction/run", {}),
        ("tree/navigate", {"targetId": "x"}),
    ]
    for method, extra in cases:
        reply = await stdio.error_for(
            {
                "jsonrpc": "2.0",
                "id": method,
                "method": method,
                "params": {"sessionId": "no-such-session", **extra},
            }
        )
        assert reply["error"]["data"]["kind"] == "notFound", reply
        assert reply["error"]["data"]["sessionId"] == "no-such-session"
        assert "no-such-session" in reply["error"]["message"]


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("session/entry", {"entryId": "deadbeef"}),
        ("session/path", {"fromId": "deadbeef"}),
        ("context/build", {"leafId": "deadbeef"}),
        ("tree/navigate", {"targetId": "deadbeef"}),
        ("session/label", {"targetId": "deadbeef", "label": "x"}),
        ("session/entries", {"ids": ["deadbeef"]}),
    ],
)
async def test_unknown_entry_id(stdio: Stdio, method: str, params: dict[str, Any]) -> None:
    before = await stdio.wire.result("session/entries", {"sessionId": stdio.session_id})
    reply = await stdio.error_for(
        {
            "jsonrpc": "2.0",
            "id": "ue",
            "method": method,
            "params": {"sessionId": stdio.session_id, **params},
        }
    )
    assert reply["error"]["data"]["kind"] == "notFound", reply
    assert "deadbeef" in reply["error"]["message"]
    after = await stdio.wire.result("session/entries", {"sessionId": stdio.session_id})
    assert after == before


async def test_navigate_to_unknown_entry_uses_pis_message(stdio: Stdio) -> None:
    reply = await stdio.error_for(
        {
            "jsonrpc": "2.0",
            "id": "nav",
            "method": "tree/navigate",
            "params": {"sessionId": stdio.session_id, "targetId": "cafe0000"},
        }
    )
    assert reply["error"]["message"] == "Entry cafe0000 not found"


async def test_fork_at_a_non_user_entry(stdio: Stdio) -> None:
    reply = await stdio.error_for(
        {
            "jsonrpc": "2.0",
            "id": "fk",
            "method": "session/fork",
            "params": {"sessionId": stdio.session_id, "entryId": stdio.entry_ids[-1]},
        }
    )
    assert reply["error"]["code"] == -32602
    assert reply["error"]["message"] == "Invalid entry ID for forking"


async def test_stdout_holds_only_frames_and_the_daemon_exits_cleanly(stdio: Stdio) -> None:
    wire = stdio.wire
    assert await wire.result("shutdown") is None
    after_shutdown = await wire.request("session/list", {"cwd": "/"})
    assert after_shutdown["error"]["code"] == -32600
    wire.send({"jsonrpc": "2.0", "method": "exit"})
    # Read to the end of the stream: every byte must belong to a well-formed frame.
    while await wire.read_frame() is not None:
        pass
    stdio.finished = True
    assert await stdio.daemon.process.wait() == 0
    assert_no_traceback(body.decode() for body in wire.raw)
    assert "Traceback" not in stdio.daemon.log_text()
