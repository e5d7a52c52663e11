"""Test helpers for tests/llm: a real HTTP server on 127.0.0.1 that plays scripted provider answers.

Each test scripts the replies per path; the server records every request it
got (path, headers, JSON body). Replies can stream chunks with pauses, hang
forever, or cut the connection, which is what the summarizers must survive.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    # A whole body, sent with Content-Length.
    body: bytes | None = None
    # Or a chunked body: bytes are sent as chunks, floats are pauses (seconds).
    chunks: list[bytes | float] | None = None
    # Never send anything (until the server stops).
    hang: bool = False
    # Close the connection after the chunks without the final empty chunk.
    cut: bool = False
    reason: str | None = None


def json_reply(data: Any, status: int = 200, **kwargs: Any) -> Reply:
    headers = {"content-type": "application/json", **kwargs.pop("headers", {})}
    return Reply(status=status, body=json.dumps(data).encode(), headers=headers, **kwargs)


def sse_reply(events: list[bytes | float], **kwargs: Any) -> Reply:
    return Reply(chunks=events, headers={"content-type": "text/event-stream"}, **kwargs)


def sse(data: Any, event: str | None = None) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data)
    prefix = f"event: {event}\n" if event else ""
    return f"{prefix}data: {text}\n\n".encode()


def openai_stream(
    pieces: list[str], *, finish: str | None = "stop", done: bool = True, usage: bool = False
) -> list[bytes | float]:
    events: list[bytes | float] = [
        sse({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
    ]
    events += [sse({"choices": [{"index": 0, "delta": {"content": p}}]}) for p in pieces]
    if finish:
        events.append(sse({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}))
    if usage:
        events.append(sse({"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 7}}))
    if done:
        events.append(sse("[DONE]"))
    return events


def anthropic_stream(
    texts: list[list[str]], *, thinking: list[str] | None = None, stop: bool = True
) -> list[bytes | float]:
    events: list[bytes | float] = [
        sse(
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "model": "claude-test",
                    "usage": {"input_tokens": 25, "output_tokens": 1},
                },
            },
            "message_start",
        ),
        sse({"type": "ping"}, "ping"),
    ]
    index = 0
    if thinking:
        events.append(
            sse(
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "thinking", "thinking": ""},
                },
                "content_block_start",
            )
        )
        for piece in thinking:
            events.append(
                sse(
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "thinking_delta", "thinking": piece},
                    },
                    "content_block_delta",
                )
            )
        events.append(
            sse(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "signature_delta", "signature": "c2ln"},
                },
                "content_block_delta",
            )
        )
        events.append(sse({"type": "content_block_stop", "index": 0}, "content_block_stop"))
        index = 1
    for block in texts:
        events.append(
            sse(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
                "content_block_start",
            )
        )
        for piece in block:
            events.append(
                sse(
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "text_delta", "text": piece},
                    },
                    "content_block_delta",
                )
            )
        events.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
        index += 1
    events.append(
        sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 42},
            },
            "message_delta",
        )
    )
    if stop:
        events.append(sse({"type": "message_stop"}, "message_stop"))
    return events


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any
    # Every header line as sent, to catch duplicates.
    raw_headers: list[tuple[str, str]] = field(default_factory=list)


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that hang up mid-request are what these tests provoke


def _peek(connection: socket.socket) -> bytes:
    try:
        return connection.recv(1, socket.MSG_PEEK)
    except OSError:
        return b""  # reset by the client: hung up as well


class FakeServer:
    def __init__(self) -> None:
        self.replies: dict[str, list[Reply]] = defaultdict(list)
        self.requests: list[Recorded] = []
        self.received = threading.Event()
        self.stopping = threading.Event()
        # Set when a client closed its connection while a reply was hanging or pausing.
        self.hung_up = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = raw
                headers = {k.lower(): v for k, v in self.headers.items()}
                header_lines = list(self.headers.items())
                server.requests.append(Recorded(self.path, headers, body, header_lines))
                server.received.set()
                script = server.replies.get(self.path) or [Reply(status=404, body=b"no script")]
                reply = script.pop(0) if len(script) > 1 else script[0]
                server.play(self, reply)

        self.httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def script(self, path: str, *replies: Reply) -> None:
        """Replies for ``path`` in order; the last one repeats."""
        self.replies[path] = list(replies)

    def play(self, handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        if reply.hang:
            self._pause(handler, None)
            return
        try:
            handler.send_response(reply.status, reply.reason)
            for name, value in reply.headers.items():
                handler.send_header(name, value)
            if reply.chunks is None:
                body = reply.body or b""
                handler.send_header("content-length", str(len(body)))
                handler.end_headers()
                handler.wfile.write(body)
                return
            handler.send_header("transfer-encoding", "chunked")
            handler.end_headers()
            handler.wfile.flush()
            for chunk in reply.chunks:
                if isinstance(chunk, float):
                    if self._pause(handler, chunk):
                        return
                    continue
                handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                handler.wfile.flush()
            if reply.cut:
                handler.close_connection = True
                handler.wfile.flush()
                handler.connection.shutdown(2)
                return
            handler.wfile.write(b"0\r\n\r\n")
            handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            pass  # the client gave up (cancellation, timeout): that is the test

    def _pause(self, handler: BaseHTTPRequestHandler, seconds: float | None) -> bool:
        """Wait ``seconds`` (None: until stopped) without answering; True if the wait ended
        early because the server is stopping or the client hung up (``hung_up``)."""
        connection = handler.connection
        deadline = None if seconds is None else time.monotonic() + seconds
        while deadline is None or time.monotonic() < deadline:
            if self.stopping.is_set():
                return True
            readable, _, _ = select.select([connection], [], [], 0.02)
            # The client sends nothing more while it waits for the answer: its socket turns
            # readable only when it closes (a read of no bytes).
            if readable and not _peek(connection):
                self.hung_up.set()
                return True
        return False

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        if self.stopping.is_set():
            return
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer()
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def no_sleep() -> tuple[list[float], Any]:
    """An injectable sleep that records the delays and returns at once."""
    delays: list[float] = []

    async def sleep(seconds: float) -> None:
        delays.append(seconds)

    return delays, sleep


def wait_for(condition: Any, timeout: float = 2.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.005)
