"""A misbehaving OpenAI-compatible provider on 127.0.0.1 for the fault and secret tests.

A ``script(key, n, body, headers)`` function decides how to answer the ``n``-th request
(0-based) from the session ``key`` (the ``<<session:NAME>>`` tag found in the prompt):
stream a summary, fail with a status and headers, send garbage, pause between chunks,
hang, or reset the connection. Every request is recorded with its arrival time.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import struct
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from sessiond.store.session import SessionStore
from tests.loopback_http import QuietHandler, error_body, send_body, serve, stream_text
from tests.store.helpers import assistant, user

TAG = re.compile(r"<<session:([A-Za-z0-9_-]+)>>")


def tagged_session(directory: Path, name: str, cwd: str, words: int) -> Path:
    """A five-turn session whose prompts carry the tag that keys the provider's script;
    the answers are short, so a compaction cuts at a user message (one summary call)."""
    with SessionStore.create(cwd, session_dir=directory) as store:
        for turn in range(5):
            store.append(user(f"<<session:{name}>> request {turn} " + "words " * words))
            store.append(assistant(f"answer {turn}", input=1000 * (turn + 1)))
        return store.path


@dataclass
class Act:
    status: int = 200
    text: str = "## Goal\nA summary from the scripted provider."
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None  # sent as it is (with Content-Length) instead of a stream
    pieces: int = 1  # the text streamed in this many chunks...
    pause: float = 0.0  # ...with this pause before each
    hang: bool = False  # never answer
    reset: bool = False  # close the connection with a TCP reset, answering nothing


@dataclass
class Hit:
    key: str
    n: int
    at: float
    headers: dict[str, str]
    body: Any


Script = Callable[[str, int, dict[str, Any], dict[str, str]], Act]


class ScriptedProvider:
    def __init__(self, script: Script) -> None:
        self.script = script
        self.hits: list[Hit] = []
        self._counts: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()
        self.stopping = threading.Event()
        provider = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", "0")))
                body = json.loads(raw)
                headers = {k.lower(): v for k, v in self.headers.items()}
                prompt = body["messages"][-1]["content"] if "messages" in body else json.dumps(body)
                match = TAG.search(prompt)
                key = match.group(1) if match else "?"
                with provider._lock:
                    n = provider._counts[key]
                    provider._counts[key] += 1
                    provider.hits.append(Hit(key, n, time.monotonic(), headers, body))
                act = provider.script(key, n, body, headers)
                with contextlib.suppress(OSError):  # the client hung up: that is the test
                    provider._play(self, act)

        self.httpd, self.url = serve(Handler)

    def _play(self, handler: BaseHTTPRequestHandler, act: Act) -> None:
        if act.hang:
            self.stopping.wait()
            return
        if act.reset:
            handler.connection.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
            )
            handler.close_connection = True
            handler.connection.close()
            return
        if act.body is not None or act.status != 200:
            data = act.body if act.body is not None else error_body(act.text)
            send_body(handler, act.status, data, act.headers)
            return
        size = max(1, len(act.text) // act.pieces + 1)
        pieces = [act.text[i : i + size] for i in range(0, len(act.text), size)]

        def keep_going() -> bool:
            return not (act.pause and self.stopping.wait(act.pause))

        stream_text(handler, pieces, act.headers, keep_going)

    def hits_for(self, key: str) -> list[Hit]:
        with self._lock:
            return [hit for hit in self.hits if hit.key == key]

    def wait_for_hits(self, key: str, n: int, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while len(self.hits_for(key)) < n:
            assert time.monotonic() < deadline, f"{key}: {len(self.hits_for(key))} of {n} requests"
            time.sleep(0.005)

    def candidate(self, **extra: Any) -> dict[str, Any]:
        return {"kind": "openai", "model": "scripted", "baseUrl": self.url, **extra}

    def stop(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
