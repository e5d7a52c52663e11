"""The client's framing: what the daemon sends is read whole; a broken frame is named."""

from __future__ import annotations

import asyncio

import pytest

from sessiond_client.errors import ProtocolError
from sessiond_client.framing import encode_frame, read_frame


def _reader(*chunks: bytes, eof: bool = True) -> asyncio.StreamReader:
    reader = asyncio.StreamReader()
    for chunk in chunks:
        reader.feed_data(chunk)
    if eof:
        reader.feed_eof()
    return reader


async def test_frames_in_a_row_and_a_clean_end() -> None:
    body = '{"text":"héllo ✓"}'.encode()
    frame = encode_frame(body)
    assert frame.startswith(b"Content-Length: %d\r\n\r\n" % len(body))  # bytes, not chars
    reader = _reader(frame + frame[:7], frame[7:])
    assert await read_frame(reader) == body
    assert await read_frame(reader) == body
    assert await read_frame(reader) is None


async def test_header_names_are_case_insensitive_and_others_ignored() -> None:
    reader = _reader(
        b"content-type: application/vscode-jsonrpc; charset=utf-8\r\n"
        b"CONTENT-LENGTH:   2  \r\n\r\n{}"
        b"Content-Length: 2\n\n[]"
    )
    assert await read_frame(reader) == b"{}"
    assert await read_frame(reader) == b"[]"


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"Content-Type: x\r\n\r\n{}", "no Content-Length"),
        (b"Content-Length: 12abc\r\n\r\n{}", "invalid Content-Length"),
        (b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}", "conflicting"),
        (b"garbage without colon\r\n\r\n", "malformed message header line"),
        (b" Content-Length: 2\r\n\r\n{}", "malformed message header line"),
        (b"Content-Length: 10\r\n\r\n{}", "ended after 2 of 10 announced bytes"),
        (b"Content-Length: 2\r\n", "in the middle of a message header"),
        (b"Content-Length: 99999999999\r\n\r\n", "exceeds the limit"),
        (b"X-Long: " + b"a" * 9000 + b"\r\n\r\n", "longer than"),
    ],
)
async def test_malformed_frames_are_rejected_by_name(data: bytes, problem: str) -> None:
    with pytest.raises(ProtocolError, match=problem):
        await read_frame(_reader(data), max_frame_bytes=1 << 20)
