"""Splitting a session file into lines in linear time, never holding an over-long one.

A session file is read in chunks. A line that spans chunks is gathered in a
``PartialLine``; once it grows past ``MAX_LINE_BYTES`` its bytes are dropped and
only its offset, its length, its first bytes (for a preview) and whether it is all
NUL bytes are kept, so neither time nor memory depends on how long a line is.

``MAX_LINE_BYTES`` is the longest line sessiond reads. pi's lines are at most a few
megabytes (a pasted image is the biggest thing one holds) and sessiond refuses to
append a longer one, so a longer line is damage (a disk that handed back garbage, a
sparse file of zeros) or hostile input: the scan reports it and skips it, a rewrite
copies it through untouched, and a torn last line that long is cut off with only its
first ``MAX_LINE_BYTES`` kept in the ``.corrupt`` file.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Final

# The longest line (without its newline) that is read as a line. As big as the
# largest message the daemon accepts by default (64 MiB), so any entry a client can
# send in one request fits.
MAX_LINE_BYTES: Final = 64 * 1024 * 1024
READ_SIZE: Final = 8 * 1024 * 1024
# Enough of an over-long line for its preview (``preview_of`` shows 80 bytes and "...").
_HEAD_BYTES: Final = 81

_nuls: bytes = b""


def all_nul(data: bytes | bytearray | memoryview) -> bool:
    """Whether ``data`` is nothing but NUL bytes (a memcmp, not a loop in Python)."""
    global _nuls  # noqa: PLW0603 - zeros made once, at the first use
    if len(data) > len(_nuls):
        _nuls = bytes(max(len(data), READ_SIZE))
    return _nuls.startswith(data)


class PartialLine:
    """A line being gathered across chunks, from its first byte up to its newline."""

    __slots__ = ("data", "head", "length", "nul_only", "offset")

    def __init__(self, offset: int = 0) -> None:
        self.offset = offset
        self.length = 0
        # The bytes so far; None once the line is longer than MAX_LINE_BYTES.
        self.data: bytearray | None = bytearray()
        self.head = b""
        self.nul_only = True

    def extend(self, piece: bytes | memoryview) -> None:
        if not piece:
            return
        if self.nul_only and not all_nul(piece):
            self.nul_only = False
        self.length += len(piece)
        data = self.data
        if data is None:
            return
        if self.length > MAX_LINE_BYTES:
            self.head = bytes(data[:_HEAD_BYTES])
            if len(self.head) < _HEAD_BYTES:
                self.head += bytes(piece[: _HEAD_BYTES - len(self.head)])
            self.data = None
            return
        data += piece


Line = tuple[int, bytes | None, int]
"""A line's offset, its bytes without the newline (None when it is longer than
``MAX_LINE_BYTES``) and its length."""


def read_lines(fd: int, end: int) -> Iterator[Line]:
    """The lines of the first ``end`` bytes of the file open on ``fd`` (the last one may
    lack its newline)."""
    partial: PartialLine | None = None
    for base, chunk in read_chunks(fd, 0, end):
        pos = 0
        if partial is not None:
            newline = chunk.find(b"\n")
            if newline < 0:
                partial.extend(chunk)
                continue
            partial.extend(memoryview(chunk)[:newline])
            yield _finished(partial)
            partial = None
            pos = newline + 1
        find = chunk.find
        while (newline := find(b"\n", pos)) >= 0:
            yield base + pos, chunk[pos:newline], newline - pos
            pos = newline + 1
        if pos < len(chunk):
            partial = PartialLine(base + pos)
            partial.extend(memoryview(chunk)[pos:])
    if partial is not None:
        yield _finished(partial)


def _finished(partial: PartialLine) -> Line:
    data = None if partial.data is None else bytes(partial.data)
    return partial.offset, data, partial.length


def read_chunks(fd: int, start: int, end: int) -> Iterator[tuple[int, bytes]]:
    """The bytes from ``start`` to ``end`` of the file open on ``fd``, with each chunk's
    offset; stops early if the file is shorter."""
    position = start
    while position < end:
        chunk = os.pread(fd, min(READ_SIZE, end - position), position)
        if not chunk:
            return
        yield position, chunk
        position += len(chunk)
