"""Fuzzing the frame reader in-process: arbitrary bytes, split at arbitrary points.

Streams are built from pieces that are likely to confuse a ``Content-Length`` parser
(header fragments, wrong, huge, negative and conflicting lengths, frames cut short,
oversized frames, blank lines, random bytes) around valid frames, and fed in chunks of
arbitrary sizes. The reader must never raise, must never hold more than one frame's worth
of bytes, and must find its way back:

- damage followed by a blank line: the next frame is read;
- damage followed by two frames: the second is always read (the first may be lost only
  when the damage runs into its header: then it is part of a broken header block);
- valid frames alone, however split: exactly their bodies.

CI runs 1,500 streams per property (6,000 in all); SESSIOND_LONG=1 runs 100,000 each. The
hypothesis settings are derandomized, so a CI failure reproduces exactly.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from sessiond.jsonrpc.header_framing import (
    MAX_HEADER_BYTES,
    FrameError,
    FrameErrorKind,
    FrameParser,
    encode_frame,
)
from tests.proof.support import count, timeout_for

pytestmark = pytest.mark.timeout(timeout_for(240, 7200))

MAX_FRAME = 4096
# A frame being read, plus a header, plus the short tail kept for the header scans.
BUFFER_BOUND = MAX_FRAME + MAX_HEADER_BYTES + 512
FUZZ = settings(
    max_examples=count(1_500, 100_000),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)

HEADERISH = [
    b"Content-Length: ",
    b"content-length:",
    b"CONTENT-LENGTH:\t7",
    b"Content-Length: 5",
    b"Content-Length:",
    b"Content-",
    b"\r\n",
    b"\r\n\r\n",
    b"\n",
    b"\n\n",
    b"\r",
    b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n",
    b"Content-Length: 99999999\r\n\r\n",
    b"Content-Length: 123456789012345678901234567890\r\n\r\n",
    b"Content-Length: -1\r\n\r\n",
    b"Content-Length: 1e3\r\n\r\n",
    b"Content-Length: 3\r\nContent-Length: 4\r\n\r\n",
    b"Content-Length: 0\r\n\r\n",
    b"X-Nonsense\r\n\r\n",
    b": no name\r\n\r\n",
    b"{",
    b"}",
    b"]",
    b'"',
    b"\\",
    b'{"jsonrpc":"2.0","id":7,"method":"x"}',
    b"\x00" * 17,
    b"\xff\xfe",
]

WORDS = [
    "",
    "a",
    "héllo",
    "日本語",
    "\u2028",
    "\\",
    '\\"',
    "Content-Length: 5\r\n",
    "\r\n\r\n",
    "}",
    "😀",
    "\x00",
]


def _body(request_id: int, method: str, word: str, repeat: int) -> bytes:
    message = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {"text": word * repeat},
    }
    return json.dumps(message, ensure_ascii=repeat % 2 == 0).encode()


bodies = st.builds(
    _body,
    st.integers(-(2**31), 2**31),
    st.sampled_from(["session/append", "x", "", "日"]),
    st.sampled_from(WORDS),
    st.integers(0, 100),  # at most ~2.5 KB: under MAX_FRAME
)
piece = st.one_of(
    st.binary(max_size=48),
    st.sampled_from(HEADERISH),
    st.integers(0, 3 * MAX_FRAME).map(lambda n: b"Content-Length: %d\r\n\r\n" % n),
    st.builds(lambda body, cut: encode_frame(body)[:cut], bodies, st.integers(0, 120)),
    st.builds(
        lambda body, extra: b"Content-Length: %d\r\n\r\n" % (len(body) + extra) + body,
        bodies,
        st.integers(-30, 30),
    ),
    st.integers(MAX_FRAME + 1, 2 * MAX_FRAME).map(
        lambda n: b"Content-Length: %d\r\n\r\n" % n + b"x" * n
    ),
    st.integers(MAX_HEADER_BYTES - 100, MAX_HEADER_BYTES + 300).map(lambda n: b"g" * n),
)
damage = st.lists(piece, max_size=14).map(b"".join)
cuts = st.lists(st.integers(1, 700), max_size=40)


def feed(stream: bytes, sizes: list[int]) -> list[bytes | FrameError]:
    """Feed ``stream`` in chunks of ``sizes`` (then the rest), checking the buffer each time."""
    parser = FrameParser(MAX_FRAME)
    events: list[bytes | FrameError] = []
    position = 0
    for size in [*sizes, len(stream)]:
        chunk = stream[position : position + size]
        position += len(chunk)
        events += parser.feed(chunk)
        assert parser.buffered <= BUFFER_BOUND, parser.buffered
        if position >= len(stream):
            break
    for event in events:
        assert isinstance(event, bytes | FrameError)
        if isinstance(event, bytes):
            assert len(event) <= MAX_FRAME
    return events


def delivered(events: list[bytes | FrameError]) -> list[bytes]:
    return [event for event in events if isinstance(event, bytes)]


@FUZZ
@given(damage, bodies, cuts)
# Found by the long run: an oversized frame whose length runs one byte into the next header.
@example(b"Content-Length:8097\n\n" + b"g" * 8092, _body(0, "session/append", "", 0), [])
def test_damage_then_a_blank_line_then_a_frame(junk: bytes, body: bytes, sizes: list[int]) -> None:
    events = feed(junk + b"\r\n\r\n" + encode_frame(body), sizes)
    assert delivered(events)[-1:] == [body]


@FUZZ
@given(damage, bodies, bodies, cuts)
def test_damage_then_two_frames_the_second_is_always_read(
    junk: bytes, first: bytes, second: bytes, sizes: list[int]
) -> None:
    # A first frame whose own text quotes a whole header can be mistaken for the resync
    # point; test_damage_then_a_frame_quoting_a_header_then_a_frame covers the usual case.
    assume(b"content-length" not in first.lower())
    events = feed(junk + encode_frame(first) + encode_frame(second), sizes)
    got = delivered(events)
    assert got[-1:] == [second]
    if len(got) >= 2 and got[-2] != first:
        # the first frame was lost: then its header was read as part of the damage
        assert any(isinstance(e, FrameError) for e in events)


@FUZZ
@given(st.lists(st.one_of(damage, bodies.map(encode_frame)), max_size=5), cuts)
def test_anything_at_all_never_raises_and_stays_bounded(
    pieces: list[bytes], sizes: list[int]
) -> None:
    feed(b"".join(pieces), sizes)


@FUZZ
@given(st.lists(bodies, min_size=1, max_size=8), cuts)
def test_valid_frames_however_split_are_exactly_their_bodies(
    frames: list[bytes], sizes: list[int]
) -> None:
    assert feed(b"".join(encode_frame(body) for body in frames), sizes) == frames


def test_endless_input_without_a_header_is_not_kept() -> None:
    parser = FrameParser(MAX_FRAME)
    for n in range(count(400, 4000)):
        parser.feed(bytes([(n * 7 + k) % 251 for k in range(64 * 1024)]).replace(b"\n", b" "))
        assert parser.buffered <= BUFFER_BOUND
    assert delivered(parser.feed(encode_frame(b"{}") + encode_frame(b'{"a":1}')))[-1:] == [
        b'{"a":1}'
    ]


def test_an_endless_oversized_frame_is_skipped_not_kept() -> None:
    parser = FrameParser(MAX_FRAME)
    events = parser.feed(
        b'Content-Length: 999999999999\r\n\r\n{"jsonrpc":"2.0","id":42,"method":"m","params":"'
    )
    for _ in range(count(200, 2000)):
        events += parser.feed(b"y" * 65536)
        assert parser.buffered <= BUFFER_BOUND
    too_large = [e for e in events if isinstance(e, FrameError)]
    assert len(too_large) == 1 and too_large[0].request_id == 42
    assert delivered(parser.feed(b"\r\n" + encode_frame(b'{"b":2}'))) == [b'{"b":2}']


def test_damage_then_a_frame_quoting_a_header_then_a_frame() -> None:
    quoting = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "m", "params": {"text": "Content-Length: 5\r\n"}}
    ).encode()
    after = b'{"jsonrpc":"2.0","id":2,"method":"m"}'
    events = feed(b"Content-Length:" + encode_frame(quoting) + encode_frame(after), [])
    # the damage is skipped up to the real header, not to the quote inside the body
    assert delivered(events) == [quoting, after]
    assert [e.kind for e in events if isinstance(e, FrameError)] == [FrameErrorKind.GARBAGE]
