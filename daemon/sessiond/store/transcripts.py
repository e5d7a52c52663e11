"""Importing another agent's transcript file as a new pi session file.

The transcript is read as untrusted input: opened without following a symbolic link
in its last component and only if it is a regular file (``safe_files``), gunzipped
when it starts with gzip's magic bytes, split into lines of at most
``MAX_LINE_BYTES`` and at most ``MAX_TRANSCRIPT_BYTES`` in all (a small gzip file can
unpack to far more), with a clear error naming the line for anything else. The
session is written like every new session: a temporary file, fsynced, renamed into
place, mode 0600; nothing is left behind when the import fails.
"""

from __future__ import annotations

import gzip
import io
import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Final, Protocol

from sessiond.core.encoding import to_json
from sessiond.core.entries import CURRENT_SESSION_VERSION, Entry, SessionHeader
from sessiond.errors import InvalidParamsError, InvalidSessionFileError

from .claude_code import ClaudeCodeReader, ImportStats
from .fileio import atomic_write, create_whole, path_error
from .ids import new_session_id
from .lines import MAX_LINE_BYTES
from .safe_files import check_regular_or_absent, open_regular

# A transcript is a few to a few hundred megabytes; more than this (after gunzip) is
# refused rather than written out.
MAX_TRANSCRIPT_BYTES: Final = 4 * 1024 * 1024 * 1024
_GZIP_MAGIC: Final = b"\x1f\x8b"


class _Readable(Protocol):
    def readline(self, size: int = -1, /) -> bytes: ...


_READ_SIZE: Final = 1024 * 1024


def transcript_lines(
    path: Path,
    *,
    max_line_bytes: int = MAX_LINE_BYTES,
    max_total_bytes: int = MAX_TRANSCRIPT_BYTES,
) -> Iterator[tuple[int, bytes]]:
    """The non-blank lines of a transcript (plain or gzip), numbered from 1; an error for
    a line longer than ``max_line_bytes`` or more than ``max_total_bytes`` in all."""
    try:
        fd = open_regular(path, os.O_RDONLY, what="transcript")
    except FileNotFoundError:
        raise InvalidSessionFileError(
            f"{path}: no such transcript", reason="notFound", path=str(path)
        ) from None
    except (OSError, ValueError) as exc:
        raise path_error("open", path, exc) from None
    with os.fdopen(fd, "rb") as raw:
        head = raw.peek(2)[:2] if isinstance(raw, io.BufferedReader) else b""
        stream: _Readable = gzip.GzipFile(fileobj=raw) if head == _GZIP_MAGIC else raw
        try:
            yield from _lines(stream, path, max_line_bytes, max_total_bytes)
        except (OSError, EOFError, zlib.error) as exc:
            if head != _GZIP_MAGIC:
                raise
            raise InvalidSessionFileError(
                f"{path}: the gzip data is damaged ({exc})",
                reason="invalidTranscript",
                path=str(path),
            ) from None


def _lines(
    stream: _Readable, path: Path, max_line_bytes: int, max_total_bytes: int
) -> Iterator[tuple[int, bytes]]:
    total = 0
    number = 0
    while True:
        line = stream.readline(max_line_bytes + 1)
        if not line:
            return
        number += 1
        total += len(line)
        if total > max_total_bytes:
            raise InvalidSessionFileError(
                f"{path}: the transcript is longer than {_size(max_total_bytes)}",
                reason="tooLarge",
                path=str(path),
            )
        if len(line) > max_line_bytes and not line.endswith(b"\n"):
            raise InvalidSessionFileError(
                f"{path}: line {number} is longer than {_size(max_line_bytes)}",
                reason="lineTooLong",
                path=str(path),
                line=number,
            )
        if line.strip():
            yield number, line


def _size(count: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= size:
            return f"{count / size:g} {unit}"
    return f"{count} bytes"


def import_claude_code(source: Path, target: Path, *, overwrite: bool = False) -> ImportStats:
    """Convert the Claude Code transcript at ``source`` into a new pi session at ``target``."""
    if check_regular_or_absent(target, what="session file") and not overwrite:
        raise InvalidParamsError(
            f"{target} exists; choose another output file or allow replacing it",
            path=str(target),
        )
    reader = ClaudeCodeReader()
    entries = reader.entries(transcript_lines(source))
    first = next(entries, None)
    if first is None:
        raise InvalidSessionFileError(
            f"{source}: no conversation found (is it a Claude Code transcript?)",
            reason="emptyTranscript",
            path=str(source),
        )
    header = session_header(reader.stats)
    # Unless asked to replace it, a file that appears at ``target`` while the transcript is
    # read is left as it is (``conflict``): the session is linked into place, not renamed.
    write = atomic_write if overwrite else create_whole
    write(target, _session_lines(header, first, entries))
    return reader.stats


def session_header(stats: ImportStats) -> SessionHeader:
    return SessionHeader(
        version=CURRENT_SESSION_VERSION,
        id=new_session_id(),
        timestamp=stats.first_timestamp or "1970-01-01T00:00:00.000Z",
        cwd=stats.cwd,
    )


def _session_lines(header: SessionHeader, first: Entry, rest: Iterator[Entry]) -> Iterator[bytes]:
    yield to_json(header) + b"\n"
    yield to_json(first) + b"\n"
    for entry in rest:
        yield to_json(entry) + b"\n"
