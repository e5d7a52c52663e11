"""The one ordered writer of a connection: frames go out in the order they were queued.

While the connection handles one batch of received bytes the answers it produces are
held and written together at the end (one system call instead of one per answer);
otherwise a frame is written as soon as it is sent.
"""

from __future__ import annotations

from collections.abc import Callable

from sessiond.jsonrpc.header_framing import encode_frame

# Above this a frame is never joined with others, so it is not copied twice.
_DIRECT_WRITE_BYTES = 64 * 1024


class FrameWriter:
    """Encodes message bodies as frames and writes them, holding them back on request."""

    def __init__(self, write: Callable[[bytes], None]) -> None:
        self._write = write
        self._queued: list[bytes] = []
        # Bytes queued while holding, not yet handed to the transport.
        self.held_bytes = 0
        self._holding = False
        self._closed = False

    def send(self, body: bytes) -> None:
        """Send one message body (UTF-8 JSON) as a frame."""
        if self._closed:
            return
        if not self._holding:
            self._write(encode_frame(body))
        elif len(body) >= _DIRECT_WRITE_BYTES:
            self.flush()
            self._write(encode_frame(body))
        else:
            frame = encode_frame(body)
            self._queued.append(frame)
            self.held_bytes += len(frame)

    def hold(self) -> None:
        """Queue instead of writing, until ``release``."""
        self._holding = True

    def release(self) -> None:
        self._holding = False
        self.flush()

    def flush(self) -> None:
        queued = self._queued
        if not queued or self._closed:
            return
        self._queued = []
        self.held_bytes = 0
        self._write(queued[0] if len(queued) == 1 else b"".join(queued))

    def close(self) -> None:
        """Send what is queued, then drop everything after."""
        self.flush()
        self._closed = True

    def abandon(self) -> None:
        """The transport is gone: drop what is queued and everything after."""
        self._queued = []
        self.held_bytes = 0
        self._closed = True
