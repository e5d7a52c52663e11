"""Pieces shared by the loopback LLM providers the tests start on 127.0.0.1.

The providers differ in how they decide what to answer; what they send is the
same OpenAI wire format, written here once: a JSON body with its length, or a
chunked server-sent-event stream ending in ``data: [DONE]``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # clients that hang up mid-request are what cancellation and fault tests provoke
        pass


class QuietHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive like a real provider, without a log line per request."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve(handler: type[BaseHTTPRequestHandler]) -> tuple[QuietServer, str]:
    """Start ``handler`` on a free loopback port; returns the server and its ``/v1`` URL."""
    httpd = QuietServer(("127.0.0.1", 0), handler)
    threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    ).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}/v1"


def send_body(
    handler: BaseHTTPRequestHandler, status: int, data: bytes, headers: dict[str, str]
) -> None:
    handler.send_response(status)
    for name, value in headers.items():
        handler.send_header(name, value)
    handler.send_header("content-type", headers.get("content-type", "application/json"))
    handler.send_header("content-length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
    handler.wfile.flush()


def error_body(message: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": "server_error"}}).encode()


def stream_text(
    handler: BaseHTTPRequestHandler,
    pieces: Iterable[str],
    headers: dict[str, str] | None = None,
    before_each: Callable[[], bool] | None = None,
) -> None:
    """Stream ``pieces`` as chat-completion deltas; ``before_each`` returning False stops
    the stream where it is (a provider that goes quiet mid-answer)."""
    handler.send_response(200)
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.send_header("content-type", "text/event-stream")
    handler.send_header("transfer-encoding", "chunked")
    handler.end_headers()
    handler.wfile.flush()
    events = [{"choices": [{"index": 0, "delta": {"content": piece}}]} for piece in pieces]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    for event in events:
        if before_each is not None and not before_each():
            return
        payload = f"data: {json.dumps(event)}\n\n".encode()
        handler.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
        handler.wfile.flush()
    done = b"data: [DONE]\n\n"
    handler.wfile.write(f"{len(done):x}\r\n".encode() + done + b"\r\n0\r\n\r\n")
    handler.wfile.flush()
