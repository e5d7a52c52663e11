"""A scripted OpenAI-compatible model on 127.0.0.1 that takes its time, for the compaction bench.

Two kinds of request reach it. An agent's request (it offers tools) is answered from
the script: a new task is answered with text and two ``read`` calls, tool results with
the turn's closing text; each after ``model_delay`` seconds, with usage counted as
the conversation's characters / 4 (system prompt and tool definitions left out, so
that an agent with a long system prompt measures the same context as one without).
A summarizer's request (no tools) is answered after ``summary_delay`` seconds with a
summary of fixed size. Every answer is streamed as chat-completion deltas, as
providers do; the requests are counted by kind.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bench.agent_script import Script

_SUMMARY = (
    "## Goal\nKeep the report generator working while its modules are reorganized.\n\n"
    "## Progress\n### Done\n"
    + "".join(f"- [x] Reviewed and adjusted module {n} of the generator\n" for n in range(24))
    + "\n## Next Steps\n1. Continue with the next task of the list\n"
)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that hangs up (an aborted summary) is not the bench's failure


class SlowProvider:
    def __init__(self, script: Script, *, model_delay: float, summary_delay: float) -> None:
        self.script = script
        self.model_delay = model_delay
        self.summary_delay = summary_delay
        self.agent_requests = 0
        self.summary_requests = 0
        self._lock = threading.Lock()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
                provider.answer(self, body)

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def reset(self) -> None:
        with self._lock:
            self.agent_requests = self.summary_requests = 0

    def answer(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        messages = body.get("messages", [])
        if body.get("tools"):
            with self._lock:
                self.agent_requests += 1
            time.sleep(self.model_delay)
            text, calls = self.script.model_answer(messages)
            prompt = conversation_tokens(messages)
            completion = (len(text) + sum(len(json.dumps(c)) for c in calls)) // 4
            _stream(handler, text, calls, prompt, completion)
            return
        with self._lock:
            self.summary_requests += 1
        time.sleep(self.summary_delay)
        _stream(handler, _SUMMARY, [], conversation_tokens(messages), len(_SUMMARY) // 4)


def conversation_tokens(messages: list[dict[str, Any]]) -> int:
    """Characters / 4 of what the messages say, system messages left out."""
    chars = 0
    for message in messages:
        if message.get("role") in ("system", "developer"):
            continue
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            chars += sum(len(part.get("text", "")) for part in content if isinstance(part, dict))
        for call in message.get("tool_calls") or []:
            function = call.get("function", {})
            chars += len(function.get("name", "")) + len(function.get("arguments", ""))
    return chars // 4


def _stream(
    handler: BaseHTTPRequestHandler,
    text: str,
    calls: list[dict[str, Any]],
    prompt_tokens: int,
    completion_tokens: int,
) -> None:
    handler.send_response(200)
    handler.send_header("content-type", "text/event-stream")
    handler.send_header("transfer-encoding", "chunked")
    handler.end_headers()
    deltas: list[dict[str, Any]] = []
    if text:
        deltas.append({"content": text})
    for index, call in enumerate(calls):
        deltas.append(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["name"], "arguments": json.dumps(call["args"])},
                    }
                ]
            }
        )
    events: list[dict[str, Any]] = [
        {"id": "bench", "choices": [{"index": 0, "delta": delta}]} for delta in deltas
    ]
    finish = "tool_calls" if calls else "stop"
    events.append({"id": "bench", "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    events.append(
        {
            "id": "bench",
            "choices": [],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
    )
    try:
        for event in events:
            _chunk(handler, f"data: {json.dumps(event)}\n\n".encode())
        _chunk(handler, b"data: [DONE]\n\n")
        _chunk(handler, b"")
    except (BrokenPipeError, ConnectionResetError):
        pass


def _chunk(handler: BaseHTTPRequestHandler, data: bytes) -> None:
    handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
    handler.wfile.flush()
