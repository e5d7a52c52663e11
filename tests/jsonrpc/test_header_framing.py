"""The frame parser, fed raw bytes: every malformed case, and recovery after each."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from sessiond.jsonrpc.header_framing import (
    MAX_HEADER_BYTES,
    FrameError,
    FrameErrorKind,
    FrameParser,
    encode_frame,
)

BODY = b'{"jsonrpc":"2.0","id":1,"method":"echo","params":{"a":1}}'
NEXT = b'{"jsonrpc":"2.0","id":2,"method":"echo"}'


def frames(parser: FrameParser, data: bytes) -> list[bytes | FrameError]:
    return parser.feed(data)


def kinds(events: list[bytes | FrameError]) -> list[object]:
    return [e.kind if isinstance(e, FrameError) else e for e in events]


def feed_bytewise(parser: FrameParser, data: bytes) -> list[bytes | FrameError]:
    events: list[bytes | FrameError] = []
    for index in range(len(data)):
        events += parser.feed(data[index : index + 1])
    return events


def test_one_frame_and_then_another_in_the_same_read() -> None:
    parser = FrameParser()
    assert frames(parser, encode_frame(BODY) + encode_frame(NEXT)) == [BODY, NEXT]
    assert parser.buffered == 0


def test_split_byte_by_byte() -> None:
    parser = FrameParser()
    assert feed_bytewise(parser, encode_frame(BODY) + encode_frame(NEXT)) == [BODY, NEXT]


def test_length_counts_utf8_bytes_not_characters() -> None:
    body = json.dumps({"text": "héllo wörld ✓ 日本"}, ensure_ascii=False).encode()
    assert len(body) > len(body.decode())
    frame = encode_frame(body)
    assert frame.startswith(b"Content-Length: %d\r\n\r\n" % len(body))
    assert frames(FrameParser(), frame + encode_frame(NEXT)) == [body, NEXT]
    assert feed_bytewise(FrameParser(), frame) == [body]


def test_header_name_is_case_insensitive_and_extra_headers_are_ignored() -> None:
    data = (
        b"content-length: %d\r\n\r\n%b" % (len(BODY), BODY)
        + b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n"
        + b"CONTENT-LENGTH:%d\r\n\r\n%b" % (len(NEXT), NEXT)
        + b"Content-Length: %d\r\nContent-Type: x\r\n\r\n%b" % (len(BODY), BODY)
    )
    assert frames(FrameParser(), data) == [BODY, NEXT, BODY]


def test_bare_newlines_and_blank_lines_between_frames_are_accepted() -> None:
    data = b"Content-Length: %d\n\n%b\r\n\r\nContent-Length: %d\n\n%b" % (
        len(BODY),
        BODY,
        len(NEXT),
        NEXT,
    )
    assert frames(FrameParser(), data) == [BODY, NEXT]


def test_missing_content_length_is_reported_then_the_next_frame_is_read() -> None:
    events = frames(FrameParser(), b"Content-Type: x\r\n\r\n" + encode_frame(NEXT))
    assert kinds(events) == [FrameErrorKind.MISSING_LENGTH, NEXT]


def test_non_numeric_negative_and_absurd_lengths_are_invalid_headers() -> None:
    for value in (b"abc", b"-5", b"+5", b"1_0", b"99999999999999999999999"):
        parser = FrameParser()
        events = frames(parser, b"Content-Length: %b\r\n\r\n" % value + encode_frame(NEXT))
        assert kinds(events)[0] is FrameErrorKind.INVALID_HEADER, value
        assert events[-1] == NEXT, value
        assert value.decode()[:10] in events[0].message  # type: ignore[union-attr]


def test_conflicting_lengths_are_invalid() -> None:
    data = b"Content-Length: 5\r\nContent-Length: 6\r\n\r\n" + encode_frame(NEXT)
    assert kinds(frames(FrameParser(), data))[0] is FrameErrorKind.INVALID_HEADER


def test_too_short_length_gives_a_broken_body_then_resynchronises() -> None:
    data = b"Content-Length: %d\r\n\r\n%b" % (len(BODY) - 10, BODY) + encode_frame(NEXT)
    events = frames(FrameParser(), data)
    # The cut body is handed up (it will fail to parse), the rest is skipped as garbage.
    assert events[0] == BODY[:-10]
    assert kinds(events)[1:] == [FrameErrorKind.GARBAGE, NEXT]


def test_too_long_length_is_cut_where_the_next_header_starts() -> None:
    data = b"Content-Length: %d\r\n\r\n%b" % (len(BODY) + 30, BODY) + encode_frame(NEXT)
    for events in (frames(FrameParser(), data), feed_bytewise(FrameParser(), data)):
        assert kinds(events) == [FrameErrorKind.TRUNCATED, NEXT]


def test_too_long_length_ending_anywhere_in_the_next_header_is_cut() -> None:
    header = b"Content-Length: %d\r\n\r\n" % len(NEXT)
    for extra in range(1, len(header) + 1):
        data = b"Content-Length: %d\r\n\r\n%b" % (len(BODY) + extra, BODY) + encode_frame(NEXT)
        events = frames(FrameParser(), data)
        assert kinds(events) == [FrameErrorKind.TRUNCATED, NEXT], extra


def test_too_long_length_at_end_of_input_waits_for_more() -> None:
    parser = FrameParser()
    assert frames(parser, b"Content-Length: %d\r\n\r\n%b" % (len(BODY) + 5, BODY)) == []
    assert parser.buffered > 0
    assert kinds(frames(parser, encode_frame(NEXT))) == [FrameErrorKind.TRUNCATED, NEXT]


def test_garbage_between_frames_is_skipped() -> None:
    for garbage in (b"garbage", b"xx\r\nyy\r\n\r\n", b"}}}]", b"\x00\xff\xfe junk"):
        data = encode_frame(BODY) + garbage + encode_frame(NEXT)
        events = frames(FrameParser(), data)
        assert kinds(events) == [BODY, FrameErrorKind.GARBAGE, NEXT], garbage
        assert feed_bytewise(FrameParser(), data)[-1] == NEXT


def test_endless_garbage_without_a_header_is_not_kept() -> None:
    parser = FrameParser()
    events: list[bytes | FrameError] = []
    for _ in range(100):
        events += parser.feed(b"z" * 4096)
    assert events and all(isinstance(e, FrameError) for e in events)
    assert parser.buffered <= MAX_HEADER_BYTES + 4096
    after = frames(parser, encode_frame(NEXT))
    assert after[-1] == NEXT
    assert all(isinstance(e, FrameError) for e in after[:-1])


def test_endless_garbage_then_a_frame_is_found() -> None:
    parser = FrameParser()
    parser.feed(b"z" * 50_000)
    events = parser.feed(encode_frame(NEXT))
    assert events[-1] == NEXT


def test_oversized_frame_is_rejected_with_its_id_without_buffering_it() -> None:
    parser = FrameParser(max_frame_bytes=1000)
    body = b'{"jsonrpc":"2.0","id":7,"method":"big","params":{"x":"' + b"a" * 100_000 + b'"}}'
    frame = encode_frame(body)
    events: list[bytes | FrameError] = []
    largest_buffer = 0
    for offset in range(0, len(frame), 4096):
        events += parser.feed(frame[offset : offset + 4096])
        largest_buffer = max(largest_buffer, parser.buffered)
    events += parser.feed(encode_frame(NEXT))
    assert kinds(events) == [FrameErrorKind.TOO_LARGE, NEXT]
    error = events[0]
    assert isinstance(error, FrameError)
    assert error.request_id == 7
    assert "exceeds the limit of 1000 bytes" in error.message
    assert largest_buffer < 4096 + 200


def test_oversized_frame_id_string_and_unknown_id() -> None:
    parser = FrameParser(max_frame_bytes=10)
    with_string_id = b'{"jsonrpc":"2.0","method":"m","id":"abc","params":[1,2,3,4,5,6]}'
    events = parser.feed(encode_frame(with_string_id))
    assert isinstance(events[0], FrameError) and events[0].request_id == "abc"
    # An id after the params is not trusted (it may be a nested one).
    id_last = b'{"jsonrpc":"2.0","params":{"id":3,"pad":"xxxxxxxx"},"id":4,"method":"m"}'
    events = parser.feed(encode_frame(id_last))
    assert isinstance(events[0], FrameError) and events[0].request_id is None


def test_oversized_length_that_was_a_lie_resynchronises_on_the_next_header() -> None:
    parser = FrameParser(max_frame_bytes=1000)
    data = b"Content-Length: 50000000\r\n\r\n" + BODY + encode_frame(NEXT)
    assert kinds(parser.feed(data)) == [FrameErrorKind.TOO_LARGE, NEXT]


def test_header_text_inside_a_json_string_is_not_mistaken_for_a_header() -> None:
    tricky = json.dumps({"text": "Content-Length: 12\r\n\r\nhello"}).encode()
    pretty = json.dumps({"a": ["Content-Length: 3", 1], "b": {"c": 2}}, indent=2).encode()
    assert b"\n" in pretty
    data = encode_frame(tricky) + encode_frame(pretty) + encode_frame(NEXT)
    assert frames(FrameParser(), data) == [tricky, pretty, NEXT]
    assert feed_bytewise(FrameParser(), data) == [tricky, pretty, NEXT]


def test_zero_length_frame_is_an_empty_body() -> None:
    assert frames(FrameParser(), b"Content-Length: 0\r\n\r\n" + encode_frame(NEXT)) == [b"", NEXT]


@settings(max_examples=60, deadline=None)
@given(
    bodies=st.lists(
        st.dictionaries(st.text(max_size=8), st.text(max_size=40), max_size=4), min_size=1
    ),
    cuts=st.lists(st.integers(min_value=1, max_value=64), max_size=30),
)
def test_any_chunking_gives_back_exactly_the_bodies(
    bodies: list[dict[str, str]], cuts: list[int]
) -> None:
    encoded = [json.dumps(body, ensure_ascii=False).encode() for body in bodies]
    stream = b"".join(encode_frame(body) for body in encoded)
    parser = FrameParser()
    events: list[bytes | FrameError] = []
    position = 0
    for cut in cuts:
        events += parser.feed(stream[position : position + cut])
        position += cut
    events += parser.feed(stream[position:])
    assert events == encoded
    assert parser.buffered == 0


def test_a_body_with_trailing_whitespace_is_delivered_at_once() -> None:
    body = b'{"a": 1}\r\n'
    parser = FrameParser()
    assert parser.feed(encode_frame(body)) == [body]
    assert parser.feed(encode_frame(body) + encode_frame(NEXT)) == [body, NEXT]
