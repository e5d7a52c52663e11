"""What a generated client sends, against a real daemon: null for every optional field.

Code generators cannot tell null from absent (quicktype's Go structs send each optional
field they were not given as null), so the protocol gives the two one meaning: a known
optional field sent as null is read as left out, and never written into the session
file as null. ``expectedLeafId`` says "no entry yet" with "" instead. A client built
for a later daemon may declare hooks this one does not know: they are ignored with a
warning. And a hook answer that sets aside a reviewed summary is told to the client.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .wire import Channel, Daemon

_USAGE = {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15}


class _Peer:
    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self.ids = itertools.count(1)
        self.notes: list[dict[str, Any]] = []
        self.asked: list[dict[str, Any]] = []

    def call(self, method: str, params: dict[str, Any], answer: Any = None) -> dict[str, Any]:
        """The answer to a request; server requests meanwhile are answered with ``answer``."""
        request_id = next(self.ids)
        self.channel.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        while True:
            message = self.channel.receive(60)
            assert isinstance(message, dict), f"no answer to {method}: {message!r}"
            if "method" in message and "id" in message:
                self.asked.append(message)
                reply = {"jsonrpc": "2.0", "id": message["id"], "result": answer}
                self.channel.send(reply)
            elif "method" in message:
                self.notes.append(message)
            elif message.get("id") == request_id:
                return message

    def logged(self) -> list[str]:
        return [n["params"]["message"] for n in self.notes if n["method"] == "window/logMessage"]


@pytest.fixture
def peer(tmp_path: Path) -> Iterator[_Peer]:
    daemon = Daemon(tmp_path, ["--stdio"])
    try:
        yield _Peer(daemon.stdio_channel())
    finally:
        daemon.close()


def _initialize(peer: _Peer, hooks: list[str]) -> dict[str, Any]:
    answer = peer.call(
        "initialize",
        {
            "clientInfo": {"name": "go-client", "version": None},
            "protocolVersion": None,
            "capabilities": {"hooks": hooks, "llm": None, "optOutNotifications": None},
            "settings": {"compaction": {"tokenEstimator": "chars"}},
            "authToken": None,
        },
    )
    assert "result" in answer, answer
    peer.channel.send({"jsonrpc": "2.0", "method": "initialized", "params": None})
    return dict(answer["result"])


def _nulls(value: Any, where: str = "") -> list[str]:
    """Where ``value`` holds a null."""
    if value is None:
        return [where]
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in _nulls(item, f"{where}.{key}")]
    if isinstance(value, list):
        return [p for index, item in enumerate(value) for p in _nulls(item, f"{where}[{index}]")]
    return []


def _generated(tmp_path: Path, peer: _Peer) -> tuple[str, Path]:
    """A session created and filled the way a generated Go client does it."""
    path = tmp_path / "s.jsonl"
    created = peer.call(
        "session/new",
        {
            "cwd": str(tmp_path),
            "sessionDir": None,
            "path": str(path),
            "id": None,
            "parentSession": None,
            "writeNow": None,
        },
    )
    assert "result" in created, created
    session_id = created["result"]["sessionId"]
    user = {
        "role": "user",
        "content": "hi",
        "timestamp": None,
        "synthetic": None,
        "attribution": None,
        "providerPayload": None,
    }
    answer = {
        "role": "assistant",
        "content": [{"type": "text", "text": "hello " * 400, "textSignature": None}],
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "claude",
        "usage": {**_USAGE, "cost": None, "premiumRequests": None, "reasoningTokens": None},
        "stopReason": "stop",
        "errorMessage": None,
        "timestamp": None,
        "responseId": None,
        "providerPayload": None,
        "duration": None,
        "ttft": None,
    }
    shell = {
        "role": "bashExecution",
        "command": "ls",
        "output": "a.py",
        "cancelled": False,
        "truncated": False,
        "exitCode": None,
        "excludeFromContext": None,
        "fullOutputPath": None,
        "meta": None,
        "timestamp": None,
    }
    entries = [
        {"type": "message", "message": user},
        {"type": "message", "message": answer},
        {"type": "model_change", "provider": "openai", "modelId": "gpt-5", "model": None},
        {"type": "message", "message": shell},
        {"type": "message", "message": {**user, "content": "more " * 300}},
        {"type": "message", "message": answer},
    ]
    appended = peer.call(
        "session/append",
        {"sessionId": session_id, "entries": entries, "expectedLeafId": None},
    )
    assert "result" in appended, appended
    return session_id, path


def test_optional_nulls_are_absent_and_never_reach_the_file(tmp_path: Path, peer: _Peer) -> None:
    _initialize(peer, [])
    session_id, path = _generated(tmp_path, peer)
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 7
    root = lines[1]
    assert root["parentId"] is None  # a root's parentId is null, as pi writes it
    found = [p for line in lines[1:] for p in _nulls(line) if p != ".parentId"]
    assert found == [], f"nulls written into the session file: {found}"
    assert isinstance(root["message"]["timestamp"], int)  # stamped, as when left out
    read = peer.call("session/entries", {"sessionId": session_id, "ids": None, "limit": None})
    assert read["result"]["total"] == 6


def test_expected_leaf_id_says_no_entry_yet_with_the_empty_string(
    tmp_path: Path, peer: _Peer
) -> None:
    _initialize(peer, [])
    created = peer.call("session/new", {"cwd": str(tmp_path)})
    session_id = created["result"]["sessionId"]
    entry = {"type": "custom", "customType": "note"}
    first = peer.call(
        "session/append", {"sessionId": session_id, "entries": [entry], "expectedLeafId": ""}
    )
    assert "result" in first, first
    again = peer.call(
        "session/append", {"sessionId": session_id, "entries": [entry], "expectedLeafId": ""}
    )
    assert again["error"]["data"]["kind"] == "conflict"
    assert again["error"]["data"]["leafId"] == first["result"]["leafId"]
    # null is the same as leaving it out: no guard at all.
    blind = peer.call(
        "session/append", {"sessionId": session_id, "entries": [entry], "expectedLeafId": None}
    )
    assert "result" in blind, blind


def test_unknown_hooks_are_ignored_with_a_warning(peer: _Peer) -> None:
    result = _initialize(peer, ["session_before_compact", "session_before_switch"])
    warning = 'capabilities.hooks: unknown hooks ignored: "session_before_switch"'
    assert warning in result["warnings"]
    assert f"sessiond: {warning}" in peer.logged()


def test_a_reviewed_summary_kept_over_a_hooks_compaction_is_told(
    tmp_path: Path, peer: _Peer
) -> None:
    _initialize(peer, ["session_before_compact"])
    session_id, _ = _generated(tmp_path, peer)
    # The hook answers as a generated struct would: every optional field null.
    compaction = {
        "summary": "the hook's summary",
        "firstKeptEntryId": "whatever",
        "tokensBefore": 1,
        "details": None,
        "shortSummary": None,
        "preserveData": None,
    }
    done = peer.call(
        "compaction/run",
        {
            "sessionId": session_id,
            "summary": "Reviewed by the user.",
            "settings": {"compaction": {"keepRecentTokens": 200}},
            "workDoneToken": None,
            "customInstructions": None,
            "firstKeptEntryId": None,
        },
        answer={"cancel": None, "compaction": compaction},
    )
    assert "result" in done, done
    assert [m["method"] for m in peer.asked] == ["hooks/session_before_compact"]
    entry = done["result"]["entry"]
    assert entry["summary"].startswith("Reviewed by the user.")
    problem = (
        'client "go-client" (connection 1): hooks/session_before_compact returned a '
        "compaction; the reviewed summary was kept instead"
    )
    assert entry["details"]["hookProblems"] == [problem]
    assert f"sessiond: hook answer ignored: {problem}" in peer.logged()
