"""LSP ``Content-Length`` framing: an incremental parser that survives bad input, and the encoder.

The parser is push-based (``feed`` whatever bytes arrived, get whole frames back) so that a
transport can hand it each read as it comes, without a coroutine per message. It never
loses its place for good: after a broken header, a wrong length or plain garbage it looks
for the next ``Content-Length:`` header and carries on. Every problem is reported as a
``FrameError`` so the connection can tell the client what went wrong.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024
# A header block (all header lines) longer than this is treated as garbage.
MAX_HEADER_BYTES = 8 * 1024
# How much of an oversized body is kept to find the request id in it.
_SNIFF_BYTES = 256
# The longest header line looked for inside a body; also what SKIP keeps of skipped bytes.
_SCAN_OVERLAP = 96
# A Content-Length with more digits than this is nonsense, not a size.
_MAX_LENGTH_DIGITS = 15

_HEADER_END = re.compile(rb"\r?\n\r?\n")
_HEADER_START = re.compile(rb"content-length[ \t]*:", re.IGNORECASE)
# A complete ``Content-Length: N`` line. It cannot occur inside a valid JSON body: outside a
# string the word is not a JSON token, and inside one a raw newline is not allowed. So when a
# body contains it, the announced length was too long and the next frame starts there.
_EMBEDDED_HEADER = re.compile(rb"content-length[ \t]*:[ \t]*\d+[ \t]*\r?\n", re.IGNORECASE)
# The end of the data is the start of a header line ("Conte", "Content-Length: 1"): wait.
_PARTIAL_HEADER = re.compile(
    rb"(?:c(?:o(?:n(?:t(?:e(?:n(?:t(?:-(?:l(?:e(?:n(?:g(?:t(?:h)?)?)?)?)?)?)?)?)?)?)?)?)?"
    rb"|content-length[ \t]*(?::[ \t]*\d*[ \t]*\r?)?)\Z",
    re.IGNORECASE,
)
_UNDECIDED = -1
# How a JSON-RPC body (an object or an array) ends: no header line can end with these, so a
# body ending so cannot have swallowed the start of the next header.
_BODY_ENDINGS = b"}]"
_TOKEN = re.compile(rb"[A-Za-z0-9!#$%&'*+.^_`|~-]+")
_FAST_PREFIX = b"Content-Length: "
# The request id of an oversized message, when it comes before anything but jsonrpc/method.
_LEADING_ID = re.compile(
    rb'\s*\{(?:\s*"(?:jsonrpc|method)"\s*:\s*"[^"\\]*"\s*,)*\s*"id"\s*:\s*(-?\d{1,18}|"[^"\\]*")'
)


class FrameErrorKind(Enum):
    GARBAGE = "garbage"
    INVALID_HEADER = "invalidHeader"
    MISSING_LENGTH = "missingLength"
    TRUNCATED = "truncated"
    TOO_LARGE = "tooLarge"


@dataclass(frozen=True, slots=True)
class FrameError:
    """A framing problem. ``request_id`` is set only for an oversized frame whose id was found."""

    kind: FrameErrorKind
    message: str
    request_id: int | str | None = None


class _State(Enum):
    HEADER = 1
    BODY = 2
    SKIP = 3


def encode_frame(body: bytes) -> bytes:
    """One frame for a UTF-8 JSON body (the length counts bytes, not characters)."""
    return b"Content-Length: %d\r\n\r\n%b" % (len(body), body)


class FrameParser:
    """Splits a byte stream into frame bodies, resynchronising after any damage."""

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        # Public: the connection lowers it before a TCP client has authenticated.
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._pos = 0
        self._state = _State.HEADER
        self._length = 0  # BODY: the announced length; SKIP: bytes still to drop
        self._scan_from = 0  # BODY/SKIP: where the embedded-header scan resumes
        self._sniff_pending = False
        self._oversize = 0
        self._refusal: str | None = None  # why an abandoned frame is skipped

    @property
    def buffered(self) -> int:
        """Bytes held back waiting for the rest of a frame."""
        return len(self._buf) - self._pos

    def abandon_frame(self, reason: str) -> list[bytes | FrameError]:
        """Stop receiving the frame in progress: skip the rest of it, as if it were too
        large, and report it (``TOO_LARGE`` saying ``reason``, with its id if found).

        Does nothing unless a frame's body is being received.
        """
        if self._state is not _State.BODY:
            return []
        self._state = _State.SKIP
        self._oversize = self._length
        self._sniff_pending = True
        self._refusal = f"Message of {self._length} bytes refused: {reason}"
        return self.feed(b"")

    def feed(self, data: bytes) -> list[bytes | FrameError]:
        """Add received bytes; return the complete bodies and the problems found, in order."""
        events: list[bytes | FrameError] = []
        buf = self._buf
        buf += data
        while True:
            state = self._state
            if state is _State.HEADER:
                # Fast path: a whole frame with the usual lone header and no newline in the body.
                pos = self._pos
                if buf.startswith(_FAST_PREFIX, pos):
                    header_end = buf.find(b"\r\n\r\n", pos + 16, pos + 40)
                    if header_end != -1:
                        digits = buf[pos + 16 : header_end]
                        if digits.isdigit():
                            start = header_end + 4
                            stop = start + int(digits)
                            if (
                                stop - start <= self.max_frame_bytes
                                and stop <= len(buf)
                                and buf[stop - 1] in _BODY_ENDINGS
                                and buf.find(b"\n", start, stop) == -1
                            ):
                                events.append(bytes(buf[start:stop]))
                                self._pos = stop
                                continue
                progressed = self._parse_header(events)
            elif state is _State.BODY:
                progressed = self._take_body(events)
            else:
                progressed = self._skip(events)
            if not progressed:
                break
        if self._pos:
            del self._buf[: self._pos]
            self._scan_from -= self._pos
            self._pos = 0
        return events

    # -- header -------------------------------------------------------------------------------

    def _parse_header(self, events: list[bytes | FrameError]) -> bool:
        buf = self._buf
        end = len(buf)
        pos = self._pos
        # Blank lines between frames are harmless; skip them without a word.
        while pos < end and buf[pos] in b"\r\n":
            pos += 1
        self._pos = pos
        if pos == end:
            return False
        match = _HEADER_END.search(buf, pos, min(end, pos + MAX_HEADER_BYTES + 4))
        if match is None:
            if end - pos > MAX_HEADER_BYTES:
                self._drop_garbage(events, end)
                return True
            return False
        block = bytes(buf[pos : match.start()])
        length, problem = _parse_header_block(block)
        if problem is not None:
            # Garbage glued to the front of a real header: drop the garbage, keep the header.
            # The real one is the first later header start that reads as a whole header:
            # an earlier one may be text quoted inside a damaged frame's body. A block
            # whose first line is a good header is a bad header block, not garbage.
            first_line = block.split(b"\n", 1)[0].rstrip(b"\r")
            start = None
            if _parse_header_block(first_line)[1] is not None:
                start = next(
                    (
                        found.start()
                        for found in _HEADER_START.finditer(block, 1)
                        if _parse_header_block(block[found.start() :])[1] is None
                    ),
                    None,
                )
            if start is not None:
                events.append(_garbage(start))
                self._pos = pos + start
                return True
            events.append(problem)
            self._pos = match.end()
            return True
        self._pos = match.end()
        self._scan_from = self._pos
        if length > self.max_frame_bytes:
            self._state = _State.SKIP
            self._length = length
            self._oversize = length
            self._sniff_pending = True
        else:
            self._state = _State.BODY
            self._length = length
        return True

    def _drop_garbage(self, events: list[bytes | FrameError], end: int) -> None:
        """Too much data without a header end: drop it, up to a header start if there is one."""
        pos = self._pos
        start = _HEADER_START.search(self._buf, pos + 1, end)
        # Keep a tail that may be the beginning of a header split across reads.
        cut = start.start() if start is not None else end - len(b"content-length:")
        events.append(_garbage(cut - pos))
        self._pos = cut

    # -- body ---------------------------------------------------------------------------------

    def _take_body(self, events: list[bytes | FrameError]) -> bool:
        buf = self._buf
        start = self._pos
        stop = start + self._length
        embedded = self._find_embedded_header(start, min(len(buf), stop))
        if embedded is None and len(buf) >= stop > start and buf[stop - 1] not in _BODY_ENDINGS:
            # Not how a message ends: maybe the next header began inside this "body".
            embedded = self._header_across_end(start, stop)
            if embedded == _UNDECIDED:
                self._scan_from = stop
                return False  # the rest of that header line decides
        if embedded is not None:
            events.append(
                FrameError(
                    FrameErrorKind.TRUNCATED,
                    f"Content-Length announced {self._length} bytes, but a new header began"
                    f" after {embedded - start}",
                )
            )
            self._pos = embedded
            self._state = _State.HEADER
            return True
        if len(buf) < stop:
            self._scan_from = len(buf)
            return False
        events.append(bytes(buf[start:stop]))
        self._pos = stop
        self._state = _State.HEADER
        return True

    def _header_across_end(self, start: int, stop: int) -> int | None:
        """A header line that starts before ``stop`` and ends after it; ``_UNDECIDED`` when
        the data ends in what may be the start of one."""
        buf = self._buf
        tail = max(start, stop - _SCAN_OVERLAP)
        across = _EMBEDDED_HEADER.search(buf, tail, min(len(buf), stop + _SCAN_OVERLAP))
        if across is not None and across.start() < stop:
            return across.start()
        partial = _PARTIAL_HEADER.search(buf, tail)
        if partial is not None and partial.start() < stop:
            return _UNDECIDED
        return None

    def _skip(self, events: list[bytes | FrameError]) -> bool:
        buf = self._buf
        start = self._pos
        available_end = min(len(buf), start + self._length)
        embedded = self._find_embedded_header(start, available_end)
        if self._sniff_pending:
            sniff_end = embedded if embedded is not None else available_end
            enough = min(_SNIFF_BYTES, self._length)
            if embedded is None and sniff_end - start < enough:
                return False
            head = buf[start:sniff_end]
            refusal, self._refusal = self._refusal, None
            if refusal is None:
                events.append(_too_large(self._oversize, self.max_frame_bytes, head))
            else:
                events.append(
                    FrameError(FrameErrorKind.TOO_LARGE, refusal, leading_request_id(head))
                )
            self._sniff_pending = False
        if embedded is not None:
            self._pos = embedded
            self._state = _State.HEADER
            return True
        if available_end - start >= self._length:
            stop = start + self._length
            if buf[stop - 1] not in _BODY_ENDINGS:
                # As in _take_body: the next header may have begun inside the skipped bytes.
                across = self._header_across_end(start, stop)
                if across == _UNDECIDED:
                    self._scan_from = stop
                    return False  # the rest of that header line decides
                if across is not None:
                    stop = across
            self._pos = stop
            self._state = _State.HEADER
            return True
        # Drop what arrived but keep a short tail for the embedded-header scan.
        drop = max(0, available_end - start - _SCAN_OVERLAP)
        self._pos = start + drop
        self._length -= drop
        self._scan_from = available_end
        return False

    def _find_embedded_header(self, start: int, end: int) -> int | None:
        """Where a ``Content-Length: N`` line starts in ``[start, end)``, if one does.

        Such a line ends in a raw newline, which compact JSON bodies do not contain, so
        only the few newlines found (by a fast ``find``) are examined with the regex.
        """
        buf = self._buf
        newline = buf.find(b"\n", max(self._scan_from, start), end)
        while newline != -1:
            match = _EMBEDDED_HEADER.search(buf, max(start, newline - _SCAN_OVERLAP), newline + 1)
            if match is not None:
                return match.start()
            newline = buf.find(b"\n", newline + 1, end)
        return None


def _parse_header_block(block: bytes) -> tuple[int, FrameError | None]:
    """The Content-Length of a header block (lines without the blank terminator line)."""
    if block.startswith(_FAST_PREFIX):
        digits = block[len(_FAST_PREFIX) :]
        if digits.isdigit() and len(digits) <= _MAX_LENGTH_DIGITS:
            return int(digits), None
    length: int | None = None
    for raw_line in block.split(b"\n"):
        line = raw_line.rstrip(b"\r")
        name, colon, value = line.partition(b":")
        name = name.strip()
        if not colon or not _TOKEN.fullmatch(name):
            return 0, _garbage(len(block))
        if name.lower() != b"content-length":
            continue
        digits = value.strip()
        if not digits.isdigit() or len(digits) > _MAX_LENGTH_DIGITS:
            shown = digits[:40].decode("ascii", "replace")
            return 0, FrameError(
                FrameErrorKind.INVALID_HEADER, f"Invalid Content-Length header value {shown!r}"
            )
        if length is not None and int(digits) != length:
            return 0, FrameError(
                FrameErrorKind.INVALID_HEADER, "Conflicting Content-Length headers"
            )
        length = int(digits)
    if length is None:
        return 0, FrameError(FrameErrorKind.MISSING_LENGTH, "Header without Content-Length")
    return length, None


def _garbage(count: int) -> FrameError:
    return FrameError(
        FrameErrorKind.GARBAGE, f"Skipped {count} bytes that are not a message header"
    )


def leading_request_id(head: bytes | bytearray) -> int | str | None:
    """The request id at the start of a message too big (or too deep) to decode, if it comes
    before anything but ``jsonrpc`` and ``method``."""
    match = _LEADING_ID.match(head)
    if match is None:
        return None
    token = match.group(1)
    return token[1:-1].decode("utf-8", "replace") if token[:1] == b'"' else int(token)


def _too_large(length: int, limit: int, head: bytes | bytearray) -> FrameError:
    request_id = leading_request_id(head)
    return FrameError(
        FrameErrorKind.TOO_LARGE,
        f"Message of {length} bytes exceeds the limit of {limit} bytes",
        request_id,
    )
