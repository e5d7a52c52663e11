"""Every scenario in ``protocol/examples`` replayed against real daemon processes.

The replays are shared with the other tests of this folder (``conftest.replays``): each
example runs once per test run, in parallel threads.
"""

from __future__ import annotations

import json
from concurrent.futures import Future
from pathlib import Path

import pytest

from .conftest import EXAMPLES
from .replay import Transcript, kind_of, load_example
from .schema_validation import Checked, schema, transcript_problems

# The methods the examples must exercise at least once, besides what the router has.
SERVER_REQUESTS = {
    "hooks/session_before_compact",
    "hooks/session.compacting",
    "hooks/session_before_tree",
    "llm/complete",
}
NOTIFICATIONS = {
    "session/changed",
    "session/recovered",
    "compaction/started",
    "compaction/ended",
    "$/progress",
    "hooks/session_compact",
    "hooks/session_tree",
    "$/cancelRequest",
}


@pytest.mark.parametrize("example", EXAMPLES, ids=[path.stem for path in EXAMPLES])
def test_example(example: Path, replays: dict[str, Future[Transcript]]) -> None:
    replays[example.name].result(timeout=120)


@pytest.mark.parametrize("example", EXAMPLES, ids=[path.stem for path in EXAMPLES])
def test_example_follows_the_schema(example: Path, replays: dict[str, Future[Transcript]]) -> None:
    """What went over the wire, both ways, validates against protocol/schema.json: the
    params and result of every method the daemon answered, every notification and
    server request the daemon sent, and every answer the client gave to one."""
    transcript = replays[example.name].result(timeout=120)
    problems, checked = transcript_problems(transcript, example.stem)
    assert not problems, "\n".join(problems)
    assert checked > 0


def test_every_message_type_is_validated(replays: dict[str, Future[Transcript]]) -> None:
    """Across the examples, the daemon's real traffic holds every message of the schema's
    table, both ways, and each one's params and result validate against their named
    types (a message without params: null or none)."""
    checked = Checked()
    for example in EXAMPLES:
        transcript_problems(replays[example.name].result(timeout=120), example.stem, checked)
    wanted = set()
    for row in schema()["messages"]:
        wanted.add((row["method"], "params"))
        if row["kind"] == "request" and row["result"] != "NullResult":
            wanted.add((row["method"], "result"))
    missing = sorted(wanted - checked.parts)
    assert not missing, f"never validated against the real traffic: {missing}"


def _messages(kind: str) -> set[str]:
    """Method names of the messages of ``kind`` the examples exchange."""
    found: set[str] = set()
    for path in EXAMPLES:
        for step in load_example(path)["messages"]:
            message = step.get("message")
            if isinstance(message, dict) and kind_of(message) == kind:
                found.add(message["method"])
    return found


def test_there_are_examples() -> None:
    assert len(EXAMPLES) >= 20


def test_every_method_has_an_example() -> None:
    from sessiond.api.app import build_daemon
    from sessiond.api.daemon import Daemon
    from sessiond.settings import Settings

    router = build_daemon(Daemon(Settings(), [])).router
    sent = {
        message["method"]
        for path in EXAMPLES
        for step in load_example(path)["messages"]
        if step["direction"] == "send"
        and isinstance(message := step.get("message"), dict)
        and "method" in message
    }
    missing = set(router.requests) - sent
    assert not missing, f"methods without an example: {sorted(missing)}"


def test_every_notification_and_server_request_has_an_example() -> None:
    assert not NOTIFICATIONS - _messages("notification")
    assert not SERVER_REQUESTS - _messages("request")


def test_examples_are_well_formed() -> None:
    for path in EXAMPLES:
        data = load_example(path)
        assert isinstance(data.get("description"), str) and data["description"], path.name
        assert set(data) <= {
            "description",
            "daemons",
            "peers",
            "settingsFile",
            "files",
            "messages",
        }, path.name
        peers = data.get("peers", {"client": 0})
        for number, step in enumerate(data["messages"]):
            where = f"{path.name} step {number}"
            assert step["direction"] in ("send", "receive", "check"), where
            assert step.get("peer", next(iter(peers))) in peers, where
            if step["direction"] == "check":
                assert set(step) <= {"direction", "path", "exists", "mode", "jsonl", "comment"}, (
                    where
                )
                continue
            assert set(step) <= {"direction", "peer", "message", "raw", "comment"}, where
            assert ("message" in step) != ("raw" in step), where
            message = step.get("message")
            if step["direction"] == "receive" and isinstance(message, dict):
                assert message.get("jsonrpc") == "2.0", where
        # Re-encoding must not change the file: it is kept formatted by one rule.
        text = path.read_text(encoding="utf-8")
        assert text == json.dumps(data, indent=2, ensure_ascii=False) + "\n", (
            f"{path.name} is not formatted as json.dumps(indent=2) + newline"
        )
