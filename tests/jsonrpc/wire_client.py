"""A small JSON-RPC client for the tests: raw frames in, decoded messages out.

It speaks through any asyncio transport (a subprocess's pipes, a Unix socket, TCP) and
keeps everything the server sends: answers by id, notifications and server requests in
order. ``send_raw`` writes arbitrary bytes, for the malformed-input tests.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from sessiond.jsonrpc.header_framing import FrameError, FrameParser, encode_frame

EXAMPLE_SERVER = Path(__file__).with_name("example_server.py")
LISTENING = re.compile(rb"listening on (tcp|unix) (\S+)")
ANSWER_TIMEOUT = 5.0


class WireClient(asyncio.Protocol):
    def __init__(self) -> None:
        self._parser = FrameParser()
        self._ids = itertools.count(1)
        self._answers: dict[Any, asyncio.Future[dict[str, Any]]] = {}
        self.received: list[dict[str, Any] | list[Any]] = []
        self.notifications: list[dict[str, Any]] = []
        self.server_requests: list[dict[str, Any]] = []
        self.request_handlers: dict[str, Callable[[Any], Any]] = {}
        self._write: Callable[[bytes], None] | None = None
        self._close: Callable[[], None] | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._arrived = asyncio.Event()
        self.pump: asyncio.Task[None] | None = None

    # -- transport side --------------------------------------------------------------------------

    def attach(self, write: Callable[[bytes], None], close: Callable[[], None]) -> None:
        self._write = write
        self._close = close

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if isinstance(transport, asyncio.Transport):
            self.attach(transport.write, transport.close)

    def data_received(self, data: bytes) -> None:
        for event in self._parser.feed(data):
            assert not isinstance(event, FrameError), f"server sent a bad frame: {event}"
            message = msgspec.json.decode(event)
            self.received.append(message)
            self._arrived.set()
            if isinstance(message, list):
                for item in message:
                    self._deliver_answer(item)
            elif "method" in message and "id" in message:
                self._answer_server_request(message)
            elif "method" in message:
                self.notifications.append(message)
            else:
                self._deliver_answer(message)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)
        for future in self._answers.values():
            if not future.done():
                future.set_exception(ConnectionError("server closed the connection"))

    # -- client side -----------------------------------------------------------------------------

    def send(self, message: Any) -> None:
        self.send_raw(encode_frame(msgspec.json.encode(message)))

    def send_raw(self, data: bytes) -> None:
        assert self._write is not None
        self._write(data)

    def start_request(self, method: str, params: Any = None, *, id: Any = None) -> Any:
        """Send a request without waiting; returns its id (await ``answer(id)`` later)."""
        request_id = next(self._ids) if id is None else id
        self._answer_future(request_id)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return request_id

    async def answer(self, request_id: Any, timeout: float = ANSWER_TIMEOUT) -> dict[str, Any]:
        return await asyncio.wait_for(self._answer_future(request_id), timeout)

    async def request(self, method: str, params: Any = None, **kwargs: Any) -> dict[str, Any]:
        """The whole answer message (with ``result`` or ``error``)."""
        return await self.answer(self.start_request(method, params, **kwargs))

    async def result(self, method: str, params: Any = None) -> Any:
        answer = await self.request(method, params)
        assert "error" not in answer, answer
        return answer["result"]

    def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    async def initialize(self, **params: Any) -> Any:
        result = await self.result("initialize", {"clientInfo": {"name": "wire"}, **params})
        self.notify("initialized", {})
        return result

    async def wait_for(
        self, predicate: Callable[[], bool], timeout: float = ANSWER_TIMEOUT
    ) -> None:
        async with asyncio.timeout(timeout):
            while not predicate():
                self._arrived.clear()
                await self._arrived.wait()

    def close(self) -> None:
        assert self._close is not None
        self._close()

    def _answer_future(self, request_id: Any) -> asyncio.Future[dict[str, Any]]:
        if request_id not in self._answers:
            self._answers[request_id] = asyncio.get_running_loop().create_future()
        return self._answers[request_id]

    def _deliver_answer(self, message: dict[str, Any]) -> None:
        future = self._answer_future(message.get("id"))
        if not future.done():
            future.set_result(message)

    def _answer_server_request(self, message: dict[str, Any]) -> None:
        self.server_requests.append(message)
        handler = self.request_handlers.get(message["method"])
        if handler is None:
            return  # unanswered on purpose (timeout tests)
        self.send({"jsonrpc": "2.0", "id": message["id"], "result": handler(message.get("params"))})


class ServerProcess:
    """The example server in a subprocess; ``stderr`` is collected (drained) as it comes."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.stderr = bytearray()
        self._stderr_task = asyncio.get_running_loop().create_task(self._drain_stderr())
        self._stderr_grew = asyncio.Event()

    async def _drain_stderr(self) -> None:
        assert self.process.stderr is not None
        while chunk := await self.process.stderr.read(65536):
            self.stderr += chunk
            self._stderr_grew.set()

    async def wait_for_stderr(
        self, pattern: re.Pattern[bytes], timeout: float = 10.0
    ) -> re.Match[bytes]:
        async with asyncio.timeout(timeout):
            while (match := pattern.search(self.stderr)) is None:
                if self.process.returncode is not None or self._stderr_task.done():
                    raise AssertionError(f"server ended early: {bytes(self.stderr)!r}")
                self._stderr_grew.clear()
                await self._stderr_grew.wait()
            return match

    async def wait(self, timeout: float = 10.0) -> int:
        code = await asyncio.wait_for(self.process.wait(), timeout)
        await self._stderr_task
        return code

    async def stop(self) -> None:
        if self.process.returncode is None:
            self.process.kill()
        await self.process.wait()
        await self._stderr_task


# SESSIOND_TEST_LOOP=uvloop runs the spawned servers on uvloop (an optional extra).
LOOP_ARGS = (
    ("--loop", os.environ["SESSIOND_TEST_LOOP"]) if "SESSIOND_TEST_LOOP" in os.environ else ()
)


async def spawn_server(
    *args: str, env: dict[str, str] | None = None, stdio: bool = False
) -> ServerProcess:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(EXAMPLE_SERVER),
        *args,
        *LOOP_ARGS,
        stdin=subprocess.PIPE if stdio else subprocess.DEVNULL,
        stdout=subprocess.PIPE if stdio else subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        # A token in the test runner's own environment must not leak into the servers.
        env={**{k: v for k, v in os.environ.items() if k != "SESSIOND_TOKEN"}, **(env or {})},
    )
    return ServerProcess(process)


async def stdio_client(server: ServerProcess) -> WireClient:
    """A client on the server's stdin/stdout (read without asyncio's StreamReader)."""
    loop = asyncio.get_running_loop()
    client = WireClient()
    process = server.process
    assert process.stdin is not None and process.stdout is not None
    stdin_transport = process.stdin.transport
    client.attach(stdin_transport.write, stdin_transport.close)  # type: ignore[attr-defined]
    # Re-route the server's stdout into our protocol instead of the StreamReader.
    reader = process.stdout

    async def pump() -> None:
        while chunk := await reader.read(65536):
            client.data_received(chunk)
        client.connection_lost(None)

    client.pump = loop.create_task(pump())
    return client


async def unix_client(path: str) -> WireClient:
    loop = asyncio.get_running_loop()
    _, client = await loop.create_unix_connection(WireClient, path)
    return client


async def tcp_client(host: str, port: int) -> WireClient:
    loop = asyncio.get_running_loop()
    _, client = await loop.create_connection(WireClient, host, port)
    return client
