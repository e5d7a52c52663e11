"""The server's limits as units: admission of new connections, caps fitted to the open-file
limit, the rate limit of repeated log lines, and dropping a frame mid-way."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pytest

from sessiond.jsonrpc.admission import Admission
from sessiond.jsonrpc.connection_limits import ConnectionLimits, accept_fd_ceiling
from sessiond.jsonrpc.header_framing import FrameError, FrameErrorKind, FrameParser, encode_frame
from sessiond.jsonrpc.logs import RepeatFilter
from sessiond.jsonrpc.receive_budget import COUNTED_FROM_BYTES, ReceiveBudget


@dataclass
class Client:
    name: str
    authenticated: bool


def test_the_oldest_stranger_makes_room_for_a_newcomer() -> None:
    admission: Admission[Client] = Admission(ConnectionLimits(4, 2))
    strangers = [Client("s1", False), Client("s2", False)]
    verdict = admission.consider(strangers, needs_token=True)
    assert verdict.refusal is None and verdict.evict is strangers[0]
    # room among strangers: nobody goes
    assert admission.consider(strangers[:1], needs_token=True).evict is None


def test_the_reserve_is_kept_for_clients_with_the_token() -> None:
    admission: Admission[Client] = Admission(ConnectionLimits(4, 2))
    owners = [Client(f"o{i}", True) for i in range(3)]
    stranger = Client("s", False)
    # three owners and a stranger fill the cap: a newcomer replaces the stranger
    assert admission.consider([*owners, stranger], needs_token=True).evict is stranger
    # four owners: nobody to drop, the newcomer is refused
    full = [*owners, Client("o4", True)]
    verdict = admission.consider(full, needs_token=True)
    assert verdict.evict is None and verdict.refusal == "too many connections (4)"
    # a Unix-socket newcomer (no token) is refused only at the total cap
    assert admission.consider(owners, needs_token=False) == admission.consider(
        [], needs_token=False
    )
    assert admission.consider(full, needs_token=False).refusal is not None


def test_caps_are_fitted_to_the_open_file_limit() -> None:
    limits = ConnectionLimits(128, 16)
    assert limits.fitted_to(20_000) == limits
    small = limits.fitted_to(96)
    assert small.max_connections <= 96 - 64 and small.max_unauthenticated <= 16
    assert small.max_unauthenticated < small.max_connections
    # new sockets are refused below the limit, with room left for sessions and logs
    assert small.max_connections < accept_fd_ceiling(96) < 96
    with pytest.raises(ValueError):
        ConnectionLimits(8, 8)


def test_the_receive_budget_counts_only_big_unfinished_frames() -> None:
    budget = ReceiveBudget(3 * COUNTED_FROM_BYTES)
    a, b = object(), object()
    assert budget.hold(a, COUNTED_FROM_BYTES - 1) and budget.total == 0
    assert budget.hold(a, 2 * COUNTED_FROM_BYTES) and budget.hold(b, COUNTED_FROM_BYTES)
    assert not budget.hold(b, COUNTED_FROM_BYTES + 1)  # would go over: refused, not recorded
    assert budget.total == 3 * COUNTED_FROM_BYTES
    assert budget.hold(a, 10)  # a's frame completed
    assert budget.total == COUNTED_FROM_BYTES
    budget.release(b)
    assert budget.total == 0


def record(message: str, *args: object, level: int = logging.WARNING) -> logging.LogRecord:
    return logging.LogRecord("sessiond.jsonrpc", level, __file__, 1, message, args, None)


def test_repeated_log_lines_are_held_back_and_counted() -> None:
    now = [0.0]
    repeats = RepeatFilter(burst=3, window=60, clock=lambda: now[0])
    passed = [r for r in (record("junk from %s", i) for i in range(10)) if repeats.filter(r)]
    assert [r.getMessage()[:11] for r in passed] == ["junk from 0", "junk from 1", "junk from 2"]
    assert "suppressed for up to 60 s" in passed[-1].getMessage()
    # another kind is not affected, nor are DEBUG records
    assert repeats.filter(record("other %s", 1))
    assert all(repeats.filter(record("junk from %s", i, level=logging.DEBUG)) for i in range(9))
    now[0] = 61.0
    later = record("junk from %s", 99)
    assert repeats.filter(later)
    assert later.getMessage() == "junk from 99 [7 similar messages suppressed before this one]"


def test_a_frame_abandoned_mid_way_is_reported_with_its_id_and_skipped() -> None:
    parser = FrameParser()
    body = b'{"jsonrpc":"2.0","id":7,"method":"x","params":"' + b"y" * 5000 + b'"}'
    assert parser.feed(encode_frame(body)[:3000]) == []
    events = parser.abandon_frame("no room")
    assert len(events) == 1 and isinstance(events[0], FrameError)
    assert events[0].kind is FrameErrorKind.TOO_LARGE and events[0].request_id == 7
    assert events[0].message == f"Message of {len(body)} bytes refused: no room"
    assert parser.buffered < 200
    # the rest of that frame is skipped; the next one is read whole
    after = b'{"jsonrpc":"2.0","id":8,"method":"x"}'
    assert parser.feed(encode_frame(body)[3000:] + encode_frame(after)) == [after]
    assert parser.abandon_frame("nothing in progress") == []
