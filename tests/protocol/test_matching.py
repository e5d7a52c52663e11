"""The example placeholder rules themselves: a matcher that accepted anything would prove nothing."""

from __future__ import annotations

import pytest

from .matching import Bindings, Mismatch
from .replay import kind_of
from .wire import FrameReader, encode_frame


def test_variables_bind_on_first_sight_and_must_agree_later() -> None:
    bindings = Bindings()
    bindings.match({"id": "<entry>"}, {"id": "abc123"})
    assert bindings["entry"] == "abc123"
    bindings.match(["<entry>"], ["abc123"])
    with pytest.raises(Mismatch, match="was bound to"):
        bindings.match("<entry>", "other")


def test_type_wildcards() -> None:
    bindings = Bindings()
    bindings.match(
        [
            "<any>",
            "<string>",
            "<integer>",
            "<number>",
            "<boolean>",
            "<object>",
            "<array>",
            "<null>",
        ],
        [None, "s", 3, 2.5, False, {}, [], None],
    )
    bindings.match("<timestamp>", "2026-01-02T03:04:05.678Z")
    for expected, actual in [
        ("<integer>", True),
        ("<integer>", 1.5),
        ("<string>", 1),
        ("<boolean>", 0),
        ("<timestamp>", "2026-01-02 03:04:05"),
    ]:
        with pytest.raises(Mismatch):
            bindings.match(expected, actual)


def test_objects_are_exact_unless_partial() -> None:
    bindings = Bindings()
    with pytest.raises(Mismatch, match="unexpected keys"):
        bindings.match({"a": 1}, {"a": 1, "b": 2})
    with pytest.raises(Mismatch, match="missing keys"):
        bindings.match({"a": 1, "...": "..."}, {"b": 2})
    bindings.match({"a": 1, "...": "..."}, {"a": 1, "b": 2})


def test_scalars_compare_as_json() -> None:
    bindings = Bindings()
    bindings.match(1, 1.0)
    with pytest.raises(Mismatch):
        bindings.match(1, True)
    with pytest.raises(Mismatch):
        bindings.match(False, 0)
    with pytest.raises(Mismatch):
        bindings.match([1, 2], [1])


def test_regex_and_embedded_variables() -> None:
    bindings = Bindings({"tmp": "/tmp/x"})
    bindings.match("<re:^Summary \\d+$>", "Summary 12")
    with pytest.raises(Mismatch):
        bindings.match("<re:^Summary \\d+$>", "Summary twelve")
    bindings.match("<tmp>/s.jsonl", "/tmp/x/s.jsonl")
    with pytest.raises(Mismatch):
        bindings.match("<tmp>/s.jsonl", "/tmp/y/s.jsonl")
    # Unbound names inside text are literal text (summaries contain <summary> tags).
    bindings.match("<summary>\nhi\n</summary>", "<summary>\nhi\n</summary>")


def test_substitution_of_sent_messages() -> None:
    bindings = Bindings({"tmp": "/tmp/x", "sessionId": "s-1", "count": 3})
    sent = bindings.substitute(
        {
            "sessionId": "<sessionId>",
            "path": "<tmp>/a.jsonl",
            "n": "<count>",
            "big": "<repeat:3:ab>",
        }
    )
    assert sent == {"sessionId": "s-1", "path": "/tmp/x/a.jsonl", "n": 3, "big": "ababab"}
    with pytest.raises(AssertionError, match="before it was bound"):
        bindings.substitute({"id": "<unbound>"})


def test_message_kinds() -> None:
    assert kind_of({"jsonrpc": "2.0", "id": 1, "result": None}) == "response"
    assert kind_of({"jsonrpc": "2.0", "id": 1, "method": "llm/complete"}) == "request"
    assert kind_of({"jsonrpc": "2.0", "method": "session/changed"}) == "notification"
    assert kind_of([]) == "batch"


def test_frame_reader_splits_and_waits_for_whole_frames() -> None:
    reader = FrameReader()
    data = encode_frame(b'{"a":1}') + encode_frame('{"b":"é"}'.encode())
    assert reader.feed(data[:5]) == []
    assert reader.feed(data[5:-2]) == [b'{"a":1}']
    assert reader.feed(data[-2:]) == ['{"b":"é"}'.encode()]
