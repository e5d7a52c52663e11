"""What the end-to-end tests share: isolated daemons, clients, raw frames, session data.

Every daemon runs as a real ``sessiond serve`` process whose home, config, data, cache
and runtime directories are temporary, and whose log goes to a file (stderr is never
left undrained). Clients are stock pygls ``JsonRPCClient``s whose params and results
stay plain dicts, or ``Wire``, which reads and writes raw frames for the tests that
need to see (or break) the bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol.types import CancelNotification, CancelParams
from pygls.client import JsonRPCClient
from pygls.exceptions import JsonRpcException
from pygls.io_ import run_async
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCProtocol,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    default_converter,
)

from tests.checks import assert_no_traceback as assert_no_traceback  # noqa: PLC0414
from tests.checks import reopen as reopen  # noqa: PLC0414
from tests.isolation import FAST
from tests.isolation import isolated_env as isolated_env  # noqa: PLC0414  (re-exported)

SERVE = [sys.executable, "-m", "sessiond", "serve"]
ANSWER_TIMEOUT = 10.0
NOTIFICATIONS = (
    "session/changed",
    "session/recovered",
    "compaction/started",
    "compaction/ended",
    "$/progress",
    "window/logMessage",
    "hooks/session_compact",
    "hooks/session_tree",
)
SERVER_REQUESTS = (
    "hooks/session_before_compact",
    "hooks/session.compacting",
    "hooks/session_before_tree",
    "llm/complete",
)
ALL_HOOKS = [
    "session_before_compact",
    "session.compacting",
    "session_compact",
    "session_before_tree",
    "session_tree",
]


# -- isolation -------------------------------------------------------------------------------------


# Settings that keep a daemon cheap to start: no tokenizer to load in the background.
FAST_SETTINGS = FAST


# -- a pygls client whose params and results stay plain JSON ---------------------------------------


def plain_converter() -> Any:
    converter = default_converter()

    def keep(data: dict[str, Any], message_type: type) -> Any:
        return message_type(**data)

    def keep_params(data: dict[str, Any], message_type: type) -> Any:
        # A request or notification may omit params; pygls' message types need the field.
        return message_type(**{"params": None, **data})

    converter.register_structure_hook(JsonRPCRequestMessage, keep_params)
    converter.register_structure_hook(JsonRPCNotification, keep_params)
    converter.register_structure_hook(JsonRPCResponseMessage, keep)
    return converter


class PlainJsonProtocol(JsonRPCProtocol):
    def get_message_type(self, method: str) -> Any:
        # pygls reads ``params.id`` of a $/cancelRequest the daemon sends (hook timeouts).
        return CancelNotification if method == "$/cancelRequest" else None


HookAnswer = Any  # a value, or a callable (sync or async) taking the params, or an exception
# An answer of JSON null (what vscode-jsonrpc sends for a handler that returns undefined).
NULL = object()


def error_data(error: JsonRpcException) -> dict[str, Any]:
    """The ``data`` object of an error answer (sessiond always sends one, with ``kind``)."""
    assert isinstance(error.data, dict), error
    return error.data


class AgentClient(JsonRPCClient):
    """An editor or agent frontend: records what the daemon sends, answers hooks as told.

    ``answers[method]`` is what a server request gets: a plain value (``{}`` when unset,
    ``NULL`` for JSON null), an exception to raise, or a function of the params (which
    may be async, to take its time).
    """

    def __init__(self, name: str = "e2e") -> None:
        super().__init__(protocol_cls=PlainJsonProtocol, converter_factory=plain_converter)
        self.name = name
        self.notifications: list[tuple[str, Any]] = []
        self.asked: list[tuple[str, Any]] = []
        self.answers: dict[str, HookAnswer] = {}
        self.events: list[str] = []  # ordered log shared with other clients, when given
        self._ids = itertools.count(1)
        for method in NOTIFICATIONS:
            self.feature(method)(self._recorder(method))
        for method in SERVER_REQUESTS:
            self.feature(method)(self._answerer(method))

    def _recorder(self, method: str) -> Callable[[Any], None]:
        def record(params: Any) -> None:
            self.notifications.append((method, params))

        return record

    def _answerer(self, method: str) -> Callable[[Any], Awaitable[Any]]:
        async def answer(params: Any) -> Any:
            self.asked.append((method, params))
            self.events.append(f"{self.name}:{method}")
            reply = self.answers.get(method)
            if isinstance(reply, BaseException):
                raise reply
            if callable(reply):
                reply = reply(params)
                if asyncio.iscoroutine(reply):
                    reply = await reply
            if reply is NULL:
                return None
            return reply if reply is not None else {}

        return answer

    # -- requests

    async def call(self, method: str, params: Any = None, timeout: float = ANSWER_TIMEOUT) -> Any:
        return await asyncio.wait_for(self.protocol.send_request_async(method, params), timeout)

    def start_call(self, method: str, params: Any = None) -> tuple[str, asyncio.Future[Any]]:
        """Send a request without waiting; returns its id (for $/cancelRequest) and future."""
        request_id = f"{self.name}-{next(self._ids)}"
        return request_id, self.protocol.send_request_async(method, params, msg_id=request_id)

    def notify(self, method: str, params: Any = None) -> None:
        self.protocol.notify(method, params)

    def cancel(self, request_id: str) -> None:
        """``$/cancelRequest`` for a request sent with ``start_call``."""
        self.protocol.notify("$/cancelRequest", CancelParams(id=request_id))

    async def initialize(
        self,
        *,
        hooks: Iterable[str] = (),
        llm: bool = False,
        opt_out: Iterable[str] = (),
        settings: dict[str, Any] | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        capabilities = {"hooks": list(hooks), "llm": llm, "optOutNotifications": list(opt_out)}
        params: dict[str, Any] = {
            "clientInfo": {"name": self.name, "version": "1.0"},
            "protocolVersion": "1",
            "capabilities": capabilities,
            **extra,
        }
        if settings is not None:
            params["settings"] = settings
        result: dict[str, Any] = await self.call("initialize", params)
        self.notify("initialized", {})
        return result

    # -- notifications

    def received(self, method: str, session_id: str | None = None) -> list[Any]:
        return [
            params
            for name, params in self.notifications
            if name == method and (session_id is None or params.get("sessionId") == session_id)
        ]

    async def wait_for(
        self,
        method: str,
        predicate: Callable[[Any], bool] = lambda params: True,
        timeout: float = ANSWER_TIMEOUT,
    ) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            for name, params in self.notifications:
                if name == method and predicate(params):
                    return params
            if time.monotonic() > deadline:
                seen = [name for name, _ in self.notifications]
                raise AssertionError(f"{self.name}: no {method} within {timeout} s; got {seen}")
            await asyncio.sleep(0.01)

    # -- sockets: pygls has start_tcp; a Unix socket is driven the same way

    async def start_unix(self, path: str) -> None:
        reader, writer = await asyncio.open_unix_connection(path)
        self.protocol.set_writer(writer)
        task = asyncio.ensure_future(
            run_async(stop_event=self._stop_event, reader=reader, protocol=self.protocol)
        )
        self._async_tasks.append(task)

    @property
    def _socket(self) -> asyncio.StreamWriter:
        writer = self.protocol.writer
        assert isinstance(writer, asyncio.StreamWriter), "not a socket client"
        return writer

    async def disconnect(self) -> None:
        """Drop a socket connection without shutdown/exit (an editor that crashed)."""
        writer = self._socket
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        self._stop_event.set()
        await asyncio.wait_for(asyncio.gather(*self._async_tasks, return_exceptions=True), 5)

    async def close(self) -> None:
        """shutdown + exit on a socket, then wait for the daemon to close the connection."""
        writer = self._socket
        if writer.is_closing():
            return
        with contextlib.suppress(Exception):
            await self.call("shutdown")
        self.notify("exit")
        await asyncio.wait_for(asyncio.gather(*self._async_tasks, return_exceptions=True), 5)
        writer.close()
        self._stop_event.set()


# -- raw frames ------------------------------------------------------------------------------------


class FramingViolation(AssertionError):
    """The daemon wrote something that is not a well-formed frame."""


def frame(body: Any) -> bytes:
    """A Content-Length frame around ``body`` (bytes as they are, other values as JSON)."""
    if not isinstance(body, bytes | str):
        body = json.dumps(body)
    if isinstance(body, str):
        body = body.encode()
    return b"Content-Length: %d\r\n\r\n%b" % (len(body), body)


@dataclass
class Wire:
    """A JSON-RPC peer at the byte level, checking every frame the daemon writes."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    # Every message read, in order: objects, and arrays for answers to batches.
    received: list[Any] = field(default_factory=list)
    raw: list[bytes] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1000))
    _sent_at: int = 0

    def send_bytes(self, data: bytes) -> None:
        self._sent_at = len(self.received)
        self.writer.write(data)

    def send(self, message: dict[str, Any]) -> None:
        self.send_bytes(frame(message))

    async def read_frame(self, timeout: float = ANSWER_TIMEOUT) -> Any:
        """The next message, or None at end of stream; raises FramingViolation on junk."""
        headers: dict[str, str] = {}
        async with asyncio.timeout(timeout):
            while True:
                line = await self.reader.readline()
                if not line:
                    if headers:
                        raise FramingViolation(f"stream ended inside a header: {headers}")
                    return None
                if not line.endswith(b"\r\n"):
                    raise FramingViolation(f"header line without CRLF: {line!r}")
                if line == b"\r\n":
                    break
                name, sep, value = line.decode("ascii").partition(":")
                if not sep:
                    raise FramingViolation(f"not a header line: {line!r}")
                headers[name.strip().lower()] = value.strip()
            if "content-length" not in headers or not headers["content-length"].isdigit():
                raise FramingViolation(f"no usable Content-Length in {headers}")
            body = await self.reader.readexactly(int(headers["content-length"]))
        self.raw.append(body)
        try:
            message = json.loads(body)
        except ValueError as exc:
            raise FramingViolation(f"frame body is not JSON: {body[:200]!r}") from exc
        # A batch is answered with an array of responses.
        for item in message if isinstance(message, list) else [message]:
            if not isinstance(item, dict) or item.get("jsonrpc") != "2.0":
                raise FramingViolation(f"not a JSON-RPC 2.0 message: {body[:200]!r}")
        self.received.append(message)
        return message

    async def answer_to(
        self, request_id: Any, timeout: float = ANSWER_TIMEOUT, *, start: int | None = None
    ) -> dict[str, Any]:
        """Read until the response with ``request_id`` (looking at what was received from
        ``start`` on, by default from what the last ``request`` sent); returns it."""
        first = self._sent_at if start is None else start
        for message in self.received[first:]:
            if _answers(message, request_id):
                return dict(message)
        while True:
            message = await self.read_frame(timeout)
            if message is None:
                raise AssertionError(f"the daemon closed the stream before answering {request_id}")
            if _answers(message, request_id):
                return dict(message)

    async def request(
        self, method: str, params: Any = None, *, request_id: Any = None
    ) -> dict[str, Any]:
        """Send a request and return the whole response (result or error)."""
        request_id = next(self._ids) if request_id is None else request_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        start = len(self.received)
        self.send(message)
        return await self.answer_to(request_id, start=start)

    async def result(self, method: str, params: Any = None) -> Any:
        response = await self.request(method, params)
        assert "error" not in response, response
        return response["result"]


def _answers(message: Any, request_id: Any) -> bool:
    return isinstance(message, dict) and "method" not in message and message.get("id") == request_id


# -- daemon processes ------------------------------------------------------------------------------


@dataclass
class Daemon:
    """A ``sessiond serve`` process on a socket or TCP (or stdio, driven raw)."""

    process: asyncio.subprocess.Process
    log: Path
    env: dict[str, str]
    address: str = ""
    stderr_lines: list[str] = field(default_factory=list)
    _drain: asyncio.Task[None] | None = None

    async def _read_stderr_until_listening(self, timeout: float = 15) -> None:
        assert self.process.stderr is not None
        async with asyncio.timeout(timeout):
            while True:
                line = await self.process.stderr.readline()
                if not line:
                    raise AssertionError(f"daemon exited before listening: {self.stderr_lines}")
                text = line.decode(errors="replace").rstrip("\n")
                self.stderr_lines.append(text)
                match = re.search(r"listening on (?:unix|tcp) (\S+)", text)
                if match:
                    self.address = match.group(1)
                    break
        self._drain = asyncio.ensure_future(self._drain_stderr())

    async def _drain_stderr(self) -> None:
        assert self.process.stderr is not None
        while line := await self.process.stderr.readline():
            self.stderr_lines.append(line.decode(errors="replace").rstrip("\n"))

    async def stop(self, timeout: float = 10) -> int:
        """SIGTERM (if still running) and wait; returns the exit code."""
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(self.process.wait(), timeout)
        if self._drain is not None:
            await asyncio.wait_for(self._drain, timeout)
        return code

    def log_text(self) -> str:
        return self.log.read_text() if self.log.exists() else ""


async def start_listening_daemon(root: Path, args: list[str], env: dict[str, str]) -> Daemon:
    """``sessiond serve --socket PATH`` or ``--tcp PORT``, once it says where it listens."""
    log = root / "daemon.log"
    process = await asyncio.create_subprocess_exec(
        *SERVE,
        *args,
        "--log-file",
        str(log),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    daemon = Daemon(process, log, env)
    await daemon._read_stderr_until_listening()
    return daemon


async def start_stdio_daemon(root: Path, env: dict[str, str]) -> tuple[Daemon, Wire]:
    """``sessiond serve --stdio`` driven by a raw ``Wire`` on its stdin and stdout."""
    log = root / "daemon.log"
    process = await asyncio.create_subprocess_exec(
        *SERVE,
        "--stdio",
        "--log-file",
        str(log),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=env,
    )
    assert process.stdin is not None and process.stdout is not None
    return Daemon(process, log, env), Wire(process.stdout, process.stdin)


# -- session data ----------------------------------------------------------------------------------


def now_ms() -> int:
    return int(time.time() * 1000)


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "message": {"role": "user", "content": text, "timestamp": now_ms()}}


def assistant(
    text: str,
    *,
    input_tokens: int = 100,
    output_tokens: int = 50,
    model: str = "agent-model",
    stop_reason: str = "stop",
    tool_calls: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}]
    content += tool_calls or []
    return {
        "type": "message",
        "message": {
            "role": "assistant",
            "content": content,
            "api": "openai-completions",
            "provider": "fake",
            "model": model,
            "usage": {
                "input": input_tokens,
                "output": output_tokens,
                "cacheRead": 0,
                "cacheWrite": 0,
                "totalTokens": input_tokens + output_tokens,
                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
            },
            "stopReason": stop_reason,
            "timestamp": now_ms(),
        },
    }


def tool_call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "toolCall", "id": call_id, "name": name, "arguments": arguments}


def tool_result(call_id: str, name: str, text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "message": {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": name,
            "content": [{"type": "text", "text": text}],
            "isError": False,
            "timestamp": now_ms(),
        },
    }


def conversation(turns: int, words: int = 60, tag: str = "turn") -> list[dict[str, Any]]:
    """``turns`` user/assistant exchanges, each message ``words`` words long."""
    entries: list[dict[str, Any]] = []
    for n in range(turns):
        filler = " ".join(f"{tag}{n}word{k}" for k in range(words))
        entries.append(user(f"Request {tag} {n}: please handle {filler}"))
        entries.append(assistant(f"Answer {tag} {n}: done with {filler}"))
    return entries


def file_lines(path: str | Path) -> list[dict[str, Any]]:
    """Every line of a session file, decoded (a torn or non-JSON line fails the test)."""
    data = Path(path).read_bytes()
    assert data.endswith(b"\n"), "a session file ends with a newline"
    return [json.loads(line) for line in data.splitlines()]
