"""A real OpenAI-compatible chat-completions server on 127.0.0.1 for tests.

It answers every request through a responder function (so that concurrent
calls get answers that fit them), streams the answer as server-sent events
when asked to (Anthropic's Messages API, on ``/v1/messages``, gets it whole),
and records what it received. It can also hold requests until released, or
fail with a given status, which is how tests reach cancellation, retries and
failures.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from tests.loopback_http import QuietHandler, error_body, send_body, serve, stream_text


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

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
                provider.requests.append(body)
                provider.arrived.set()
                answer = provider.responder(body)
                # the client may go away mid-answer: cancellation tests do that
                with contextlib.suppress(BrokenPipeError, ConnectionResetError, OSError):
                    provider.play(self, body, answer)

        self.httpd, self.url = serve(Handler)

    def play(self, handler: BaseHTTPRequestHandler, body: dict[str, Any], answer: Answer) -> None:
        if answer.hold:
            while not (self.released.is_set() or self.stopping.is_set()):
                self.released.wait(0.02)
            if self.stopping.is_set():
                return
        if answer.status != 200:
            send_body(handler, answer.status, error_body(answer.error or "failure"), answer.headers)
            return
        if handler.path.endswith("/v1/messages"):
            # Anthropic's Messages API (see ``anthropic_candidate``), answered whole.
            message = {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "text", "text": answer.text}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 10, "output_tokens": 5},
            }
            send_body(handler, 200, json.dumps(message).encode(), {})
            return
        if body.get("stream"):
            stream_text(handler, [answer.text])
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
        send_body(handler, 200, data, {})

    def prompts(self) -> list[str]:
        return [request["messages"][-1]["content"] for request in self.requests]

    def purposes(self) -> list[str]:
        return [purpose_of(request) for request in self.requests]

    def candidate(self, **extra: Any) -> dict[str, Any]:
        """A ``summarizer.candidates`` entry pointing at this server."""
        return {"kind": "openai", "model": "fake-model", "baseUrl": self.url, **extra}

    def anthropic_candidate(self, **extra: Any) -> dict[str, Any]:
        """An ``anthropic`` candidate pointing at this server (it answers that API too)."""
        base = self.url.removesuffix("/v1")
        return {"kind": "anthropic", "model": "fake-claude", "baseUrl": base, **extra}

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
