"""LSP ``Content-Length`` framing on asyncio streams.

The daemon is trusted, so there is no resynchronisation here: the first frame that
is not well formed raises ``ProtocolError`` saying exactly what was wrong, and the
connection is closed. Header names are case-insensitive; other headers
(``Content-Type``) are accepted and ignored.
"""

from __future__ import annotations

import asyncio

from .errors import ProtocolError

# Larger than any header block a JSON-RPC peer sends; beyond it the peer is not one.
MAX_HEADER_BYTES = 8 * 1024
# A session's entries can be large, but a length beyond this is a broken header.
DEFAULT_MAX_FRAME_BYTES = 1 << 30
_CONTENT_LENGTH = b"content-length"


def encode_frame(body: bytes) -> bytes:
    """One frame: the header counts bytes of the UTF-8 body, not characters."""
    return b"Content-Length: %d\r\n\r\n%b" % (len(body), body)


async def read_frame(
    reader: asyncio.StreamReader, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
) -> bytes | None:
    """The next frame's body, or None when the stream ends cleanly between frames."""
    length: int | None = None
    header_bytes = 0
    while True:
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            if header_bytes == 0 and not exc.partial:
                return None
            raise ProtocolError("the connection ended in the middle of a message header") from None
        except asyncio.LimitOverrunError:
            raise ProtocolError("a message header line is too long") from None
        header_bytes += len(line)
        if header_bytes > MAX_HEADER_BYTES:
            raise ProtocolError(f"a message header is longer than {MAX_HEADER_BYTES} bytes")
        line = line.removesuffix(b"\n").removesuffix(b"\r")
        if not line:
            break
        length = _header_length(line, length)
    if length is None:
        raise ProtocolError("a message header has no Content-Length")
    if length > max_frame_bytes:
        raise ProtocolError(
            f"a message of {length} bytes exceeds the limit of {max_frame_bytes} bytes"
        )
    try:
        return await reader.readexactly(length)
    except asyncio.IncompleteReadError as exc:
        raise ProtocolError(
            f"the connection ended after {len(exc.partial)} of {length} announced bytes"
        ) from None


def _header_length(line: bytes, length: int | None) -> int | None:
    """Check one header line; return the Content-Length known so far."""
    name, colon, value = line.partition(b":")
    if not colon or not name.strip() or name != name.strip():
        shown = line[:80].decode("utf-8", "replace")
        raise ProtocolError(f"malformed message header line {shown!r}")
    if name.lower() != _CONTENT_LENGTH:
        return length
    digits = value.strip()
    if not digits.isdigit() or len(digits) > 15:
        shown = digits[:40].decode("utf-8", "replace")
        raise ProtocolError(f"invalid Content-Length {shown!r}")
    if length is not None and int(digits) != length:
        raise ProtocolError("conflicting Content-Length headers")
    return int(digits)
