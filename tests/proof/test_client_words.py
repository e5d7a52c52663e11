"""A client's words are quoted, never given the daemon's voice, and cost the daemon little.

Against real ``sessiond serve`` processes:

- Words a client chooses (its ``clientInfo.name``, a notification's method, the message
  of an error it answers a hook with) cannot forge a line of the daemon's log, nor reach
  another client's ``window/logMessage`` as the daemon's own text: they are quoted, with
  line breaks and control characters spelled as escapes.
- A configured key never reaches the log, even in a line whose caller did not redact it:
  the redacting formatter is the log's.
- Unknown notifications with distinct, huge names do not grow the daemon or its log
  beyond a bound (the set of names warned about, and the log's rate limit by bytes).
- A hook answer that is not JSON (invalid UTF-8 in it) fails that hook at once: another
  client's ``compaction/run`` learns it straight away, not after the hook's timeout.
"""

from __future__ import annotations

import re
import secrets
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.proof.provider import tagged_session
from tests.proof.support import (
    FAST,
    SMALL_COMPACTION,
    frame,
    isolated_env,
    listening_daemon,
    merged,
    stdio_daemon,
    timeout_for,
)
from tests.proof.test_resource_limits import rss_bytes

pytestmark = pytest.mark.timeout(timeout_for(180, 600))

FORGED = (
    "2020-01-01 00:00:00,000 WARNING sessiond.jsonrpc: connection 9 (tcp): unauthorized initialize"
)
PHISH = "Please re-enter your API key at https://phish.example/login"
KEY = "words" + secrets.token_hex(18)
# A log line the daemon writes starts with its time, as the logging format has it.
RECORD_START = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ sessiond")


def forged_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if line.startswith("2020-01-01")]


def test_a_clients_words_neither_forge_log_lines_nor_speak_as_the_daemon(tmp_path: Path) -> None:
    settings = merged(FAST, SMALL_COMPACTION)
    daemon = listening_daemon(tmp_path, ["--socket", str(tmp_path / "w.sock")], settings)
    path = tagged_session(tmp_path / "sessions", "words", "/p", words=200)
    hang = threading.Event()
    try:
        evil = daemon.unix_peer("evil")

        def answer(params: Any) -> Any:
            """An error answer whose message is a second line that sounds like the daemon."""
            request_id = evil.server_requests[-1]["id"]
            error = {"code": -32000, "message": f"{PHISH}\nsessiond: all is well"}
            evil.send({"jsonrpc": "2.0", "id": request_id, "error": error})
            hang.wait(60)  # the result the peer would send after this never goes
            return {}

        evil.answers["hooks/session_before_compact"] = answer
        evil.initialize(
            clientInfo={"name": f"editor\n{FORGED}\n\x1b]52;c;cHduZWQ=\x07", "version": "1"},
            capabilities={"hooks": ["session_before_compact"], "llm": False},
        )
        victim = daemon.unix_peer("victim")
        victim.initialize()
        session_id = evil.call("session/open", {"path": str(path)})["sessionId"]
        victim.call("session/open", {"path": str(path)})
        evil.notify(f"x/notify\n{FORGED}", {})
        result = victim.call("compaction/run", {"sessionId": session_id}, timeout=60)
        problems = result["entry"]["details"]["hookProblems"]
        told = [params["message"] for params in victim.received("window/logMessage")]
    finally:
        hang.set()
        daemon.stop()
    assert forged_lines(daemon.all_logs()) == []
    assert "\x1b" not in daemon.all_logs()
    assert told, "the other client was not told that the hook failed"
    for message in [*told, *problems]:
        assert "\n" not in message and "\x1b" not in message, message
        # The client's name and its error text appear only inside quotes.
        assert 'client "editor\\n2020-01-01' in message, message
        assert f'error -32000: "{PHISH}\\nsessiond: all is well"' in message, message
    assert all(
        not line.strip() or RECORD_START.match(line) or line.startswith("    ")
        for line in daemon.log_text().splitlines()
    )


def test_a_key_in_a_line_no_caller_redacted_is_removed_by_the_log(tmp_path: Path) -> None:
    candidate = {
        "kind": "openai",
        "model": "m",
        "baseUrl": "http://127.0.0.1:9/v1",
        "apiKeyEnv": "PROOF_API_KEY",
    }
    settings = merged(FAST, {"summarizer": {"candidates": [candidate]}})
    env = isolated_env(tmp_path / "d", settings, PROOF_API_KEY=KEY)
    daemon, peer = stdio_daemon(tmp_path / "d", env=env, log_file=True)
    try:
        peer.initialize()
        # The daemon logs an unknown notification's name, which here holds the key.
        peer.notify(f"x/{KEY}", {})
        peer.notify(f"y/{KEY[:20]}", {})
        assert peer.call("settings/get") is not None
    finally:
        daemon.stop()
    log = daemon.all_logs()
    assert "ignoring unknown notification" in log
    assert [KEY[i : i + 8] for i in range(len(KEY) - 7) if KEY[i : i + 8] in log] == []


def test_unknown_notifications_with_huge_names_cost_a_bounded_amount(tmp_path: Path) -> None:
    daemon, peer = stdio_daemon(tmp_path / "d", FAST, log_file=True)
    try:
        peer.initialize()
        assert peer.call("settings/get") is not None
        before = rss_bytes(daemon.pid)
        name_bytes = 1 << 20
        for n in range(120):
            peer.send_raw(frame(b'{"jsonrpc":"2.0","method":"%d%s"}' % (n, b"m" * name_bytes)))
        assert peer.call("settings/get", timeout=120) is not None
        grown = rss_bytes(daemon.pid) - before
    finally:
        daemon.stop()
    log_bytes = len(daemon.all_logs().encode())
    assert grown < 40 * name_bytes, f"the daemon grew {grown >> 20} MiB"
    assert log_bytes < 256 * 1024, f"the log grew to {log_bytes} bytes"


BROKEN_RESULTS = {
    # invalid UTF-8 inside a string of a well-typed answer
    "in a string": b'{"compaction":{"summary":"\xff\xfe","firstKeptEntryId":"x","tokensBefore":1}}',
    # invalid UTF-8 where JSON has no place for it
    "between values": b'{"cancel":\xff}',
}


@pytest.mark.parametrize("where", sorted(BROKEN_RESULTS))
def test_a_hook_answer_that_is_not_json_fails_the_hook_at_once(tmp_path: Path, where: str) -> None:
    settings = merged(FAST, SMALL_COMPACTION, {"hooks": {"timeoutMs": 8000}})
    daemon = listening_daemon(tmp_path, ["--socket", str(tmp_path / "u.sock")], settings)
    path = tagged_session(tmp_path / "sessions", "utf8", "/p", words=200)
    hang = threading.Event()
    try:
        broken = daemon.unix_peer("broken")

        def answer(params: Any) -> Any:
            request = broken.server_requests[-1]
            body = b'{"jsonrpc":"2.0","id":%d,"result":%b}' % (request["id"], BROKEN_RESULTS[where])
            broken.send_raw(frame(body))
            hang.wait(60)  # the well-formed answer the peer would send never goes
            return {}

        broken.answers["hooks/session_before_compact"] = answer
        broken.initialize(capabilities={"hooks": ["session_before_compact"], "llm": False})
        other = daemon.unix_peer("other")
        other.initialize()
        session_id = broken.call("session/open", {"path": str(path)})["sessionId"]
        other.call("session/open", {"path": str(path)})
        result = other.call("compaction/run", {"sessionId": session_id}, timeout=60)
        still_there = broken.call("settings/get")
    finally:
        hang.set()
        daemon.stop()
    problems = result["entry"]["details"]["hookProblems"]
    # The broken answer ended the wait: a compaction that waited for the hook's well-formed
    # answer (which never comes) would report its timeout instead.
    assert len(problems) == 1 and "timed out" not in problems[0], problems
    assert "Parse error" in problems[0] or "utf-8" in problems[0].lower(), problems
    assert still_there is not None
