"""A real OpenAI-compatible chat-completions server on 127.0.0.1 for tests.

It answers every request through a responder function (so that concurrent
calls get answers that fit them), streams the answer as server-sent events
when asked to, and records what it received. It can also hold requests until
released, or fail with a given status, which is how tests reach cancellation,
retries and failures.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Answer:
    text: str = ""
    status: int = 200
    error: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    hold: bool = False  # wait until the server is released (or stopped)


def purpose_of(body: dict[str, Any]) -> str:
    """Which kind of summary a request asks for, read from sessiond's prompts."""
    prompt = body["messages"][-1]["content"]
    if "too long to keep whole" in prompt:
        return "turnPrefix"
    if "pull-request description" in prompt:
        return "short"
    if "a branch the user explored" in prompt:
        return "branch"
    if "<previous-summary>" in prompt:
        return "update"
    return "history"


def default_answer(body: dict[str, Any]) -> Answer:
    prompt = body["messages"][-1]["content"]
    conversation = re.search(r"<conversation>\n(.*?)\n</conversation>", prompt, re.S)
    size = len(conversation.group(1)) if conversation else 0
    return Answer(text=f"## Goal\n{purpose_of(body)} summary of {size} characters")


class FakeProvider:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.responder: Callable[[dict[str, Any]], Answer] = default_answer
        self.released = threading.Event()
        self.stopping = threading.Event()
        self.arrived = threading.Event()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
                provider.requests.append(body)
                provider.arrived.set()
                answer = provider.responder(body)
                # the client may go away mid-answer: cancellation tests do that
                with contextlib.suppress(BrokenPipeError, ConnectionResetError, OSError):
                    provider.play(self, body, answer)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    def play(self, handler: BaseHTTPRequestHandler, body: dict[str, Any], answer: Answer) -> None:
        if answer.hold:
            while not (self.released.is_set() or self.stopping.is_set()):
                self.released.wait(0.02)
            if self.stopping.is_set():
                return
        if answer.status != 200:
            data = json.dumps(
                {"error": {"message": answer.error or "failure", "type": "server_error"}}
            ).encode()
            handler.send_response(answer.status)
            for name, value in answer.headers.items():
                handler.send_header(name, value)
            handler.send_header("content-type", "application/json")
            handler.send_header("content-length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
            return
        if body.get("stream"):
            handler.send_response(200)
            handler.send_header("content-type", "text/event-stream")
            handler.send_header("transfer-encoding", "chunked")
            handler.end_headers()
            events = [
                {"choices": [{"index": 0, "delta": {"content": answer.text}}]},
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            ]
            for event in events:
                payload = f"data: {json.dumps(event)}\n\n".encode()
                handler.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
            done = b"data: [DONE]\n\n"
            handler.wfile.write(f"{len(done):x}\r\n".encode() + done + b"\r\n0\r\n\r\n")
            handler.wfile.flush()
            return
        data = json.dumps(
            {
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": answer.text},
                        "finish_reason": "stop",
                    }
                ]
            }
        ).encode()
        handler.send_response(200)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def prompts(self) -> list[str]:
        return [request["messages"][-1]["content"] for request in self.requests]

    def purposes(self) -> list[str]:
        return [purpose_of(request) for request in self.requests]

    def candidate(self, **extra: Any) -> dict[str, Any]:
        """A ``summarizer.candidates`` entry pointing at this server."""
        return {"kind": "openai", "model": "fake-model", "baseUrl": self.url, **extra}

    def stop(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    fake = FakeProvider()
    try:
        yield fake
    finally:
        fake.stop()
