"""Reading a session file into the index, without decoding message bodies.

The file is read in chunks (so a 200 MB session never sits in memory whole);
each line is decoded only as an envelope (type, id, parentId, timestamp, and
the role of a message), which msgspec does without building the body. Small
metadata entries (labels, names) are decoded fully because the index needs
them. What cannot be read is classified, never silently dropped: a torn last
line, damaged lines in the middle, invalid UTF-8, blank lines, duplicate ids.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import msgspec

from sessiond.core.decode import NotAnEntry, decode_entry
from sessiond.core.entries import (
    CURRENT_SESSION_VERSION,
    SessionHeader,
    UnknownEntry,
)
from sessiond.errors import InvalidSessionFileError, StorageError

from .records import EntryRecord
from .recovery import DamagedLine, RecoveryReport, TornTail, preview_of

CHUNK_SIZE: Final = 8 * 1024 * 1024
_BOM: Final = b"\xef\xbb\xbf"
_WHITESPACE: Final = b" \t\r\n"
# Entries the index decodes whole: small, and needed for labels and the name.
_EAGER_TYPES: Final = frozenset({"label", "session_info"})


class _MessageEnvelope(msgspec.Struct):
    role: str | None = None


class _Envelope(msgspec.Struct, rename="camel"):
    type: str | None = None
    id: str | None = None
    parent_id: str | None = None
    timestamp: str | None = None
    message: _MessageEnvelope | None = None


_ENVELOPE_DECODER: Final = msgspec.json.Decoder(_Envelope)


@dataclass
class ScanResult:
    header: SessionHeader
    header_data: dict[str, Any]
    version: int
    records: list[EntryRecord] = field(default_factory=list)
    report: RecoveryReport = field(default_factory=RecoveryReport)
    # The unfinished last line, if any: bytes to save aside before cutting them off.
    torn_bytes: bytes | None = None
    size: int = 0
    ends_with_newline: bool = True


def read_session_bytes(path: Path) -> tuple[int, Iterator[bytes]]:
    """Open ``path`` for scanning: its size and an iterator of chunks."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InvalidSessionFileError(
            f"{path}: no such session file", reason="notFound", path=str(path)
        ) from None
    except IsADirectoryError:
        raise InvalidSessionFileError(
            f"{path}: is a directory, not a session file", reason="notAFile", path=str(path)
        ) from None
    except OSError as exc:
        raise StorageError(f"cannot open {path}: {exc.strerror}", path=str(path)) from None
    status = os.fstat(fd)
    if not stat.S_ISREG(status.st_mode):
        os.close(fd)
        raise InvalidSessionFileError(
            f"{path}: is not a regular file, so not a session file",
            reason="notAFile",
            path=str(path),
        )
    size = status.st_size

    def chunks() -> Iterator[bytes]:
        try:
            while chunk := os.read(fd, CHUNK_SIZE):
                yield chunk
        finally:
            os.close(fd)

    return size, chunks()


def scan(path: Path, chunks: Iterator[bytes], size: int) -> ScanResult:
    """Index a session from its bytes. Raises ``InvalidSessionFileError`` for a bad header."""
    scanner = _Scanner(path)
    carry = b""
    base = 0
    for chunk in chunks:
        data = carry + chunk if carry else chunk
        end = data.rfind(b"\n") + 1
        if end == 0:
            carry = data
            continue
        scanner.feed(data, end, base)
        carry = data[end:]
        base += end
    return scanner.finish(carry, base, size)


class _Scanner:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.line_no = 0
        self.result: ScanResult | None = None
        self.report = RecoveryReport()
        self.records: list[EntryRecord] = []
        self.seen: set[str] = set()

    # -- lines

    def feed(self, data: bytes, end: int, base: int) -> None:
        """Handle the complete lines ``data[:end]`` found at file offset ``base``."""
        invalid = _invalid_utf8_line_starts(data, end)
        view = memoryview(data)
        pos = 0
        find = data.find
        while pos < end:
            newline = find(b"\n", pos, end)
            self.line_no += 1
            self._line(view[pos:newline], base + pos, pos in invalid)
            pos = newline + 1

    def finish(self, tail: bytes, base: int, size: int) -> ScanResult:
        """Handle the last line if it has no newline, and return the result."""
        ends_with_newline = not tail
        torn: bytes | None = None
        if tail:
            self.line_no += 1
            if not tail.strip(_WHITESPACE):
                self.report.blank_lines += 1
            elif self.result is not None and not _is_json(tail):
                # Unfinished: a crash mid-write, or zeros left by the filesystem.
                torn = tail
                self.report.torn_tail = TornTail(
                    offset=base, length=len(tail), saved_to=None, preview=preview_of(tail)
                )
            else:
                # A complete line that only lacks its newline (the next append adds it).
                self.report.missing_final_newline = True
                self._line(memoryview(tail), base, not _valid_utf8(tail))
        if self.result is None:
            if size == 0:
                raise InvalidSessionFileError(
                    f"{self.path}: the file is empty (a session file starts with a header line)",
                    reason="empty",
                    path=str(self.path),
                )
            raise InvalidSessionFileError(
                f"{self.path}: no session header (the file holds only blank lines)",
                reason="notASessionFile",
                path=str(self.path),
            )
        result = self.result
        result.records = self.records
        result.report = self.report
        result.torn_bytes = torn
        result.size = size
        result.ends_with_newline = ends_with_newline
        return result

    def _line(self, line: memoryview, offset: int, bad_utf8: bool) -> None:
        if not line or line[0] != 0x7B:  # "{": the fast path
            stripped = bytes(line).strip(_WHITESPACE)
            if not stripped:
                self.report.blank_lines += 1
                return
            if offset == 0 and bytes(line[:3]) == _BOM:
                self.report.byte_order_mark = True
                line = line[3:]
                offset += 3
        if self.result is None:
            self._header(line)
            return
        if self.result.version < CURRENT_SESSION_VERSION:
            return  # entries of an old file are read by the migration, not indexed here
        if bad_utf8:
            self.report.invalid_utf8_lines.append(self.line_no)
            self._entry(_repair_utf8(line), offset, len(line), repaired=True)
        else:
            self._entry(line, offset, len(line), repaired=False)

    def _entry(self, line: memoryview | bytes, offset: int, length: int, *, repaired: bool) -> None:
        envelope: _Envelope | None
        try:
            envelope = _ENVELOPE_DECODER.decode(line)
        except msgspec.ValidationError:
            envelope = _loose_envelope(line)
        except msgspec.DecodeError as exc:
            self._damaged(line, offset, length, f"not valid JSON ({exc})")
            return
        if envelope is None or envelope.id is None:
            self._damaged(line, offset, length, "not an entry (no string id)")
            return
        if envelope.type == "session":
            self._damaged(line, offset, length, "a second session header")
            return
        record = EntryRecord(
            envelope.id,
            envelope.parent_id,
            envelope.type or "",
            envelope.message.role if envelope.message is not None else None,
            envelope.timestamp or "",
            offset,
            length,
        )
        record.utf8_repaired = repaired
        if record.type in _EAGER_TYPES:
            try:
                record.entry = decode_entry(line)
            except (msgspec.DecodeError, NotAnEntry):
                record.entry = None
            if isinstance(record.entry, UnknownEntry):
                self.report.unreadable_entries.append(record.id)
        if record.id in self.seen:
            self.report.duplicate_ids.append(record.id)
        self.seen.add(record.id)
        self.records.append(record)

    def _damaged(self, line: memoryview | bytes, offset: int, length: int, reason: str) -> None:
        self.report.damaged_lines.append(
            DamagedLine(
                line=self.line_no,
                offset=offset,
                length=length,
                reason=reason,
                preview=preview_of(bytes(line)),
            )
        )

    # -- the header

    def _header(self, line: memoryview) -> None:
        raw = bytes(line)
        where = f"{self.path}"
        if not _valid_utf8(raw):
            raise InvalidSessionFileError(
                f"{where}: not valid UTF-8 text in the first line; this is not a session file",
                reason="invalidUtf8",
                path=str(self.path),
            )
        try:
            data = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            raise InvalidSessionFileError(
                f"{where}: the first line is not JSON, so this is not a session file "
                f"(it starts with {preview_of(raw, 40)!r})",
                reason="notASessionFile",
                path=str(self.path),
            ) from None
        if not isinstance(data, dict) or data.get("type") != "session":
            found = data.get("type") if isinstance(data, dict) else type(data).__name__
            raise InvalidSessionFileError(
                f"{where}: the first line is not a session header "
                f'(expected "type":"session", found {found!r})',
                reason="notASessionFile",
                path=str(self.path),
            )
        version = data.get("version", 1)
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise InvalidSessionFileError(
                f"{where}: the header's version {version!r} is not a version number",
                reason="invalidHeader",
                path=str(self.path),
            )
        if version > CURRENT_SESSION_VERSION:
            raise InvalidSessionFileError(
                f"{where}: session format version {version} is newer than this sessiond "
                f"understands (up to {CURRENT_SESSION_VERSION}); upgrade sessiond",
                reason="unsupportedVersion",
                path=str(self.path),
                version=version,
            )
        if not isinstance(data.get("id"), str):
            raise InvalidSessionFileError(
                f"{where}: the session header has no string id",
                reason="invalidHeader",
                path=str(self.path),
            )
        try:
            header = msgspec.convert(
                {"timestamp": "", **data, "version": version}, SessionHeader, strict=False
            )
        except msgspec.ValidationError as exc:
            raise InvalidSessionFileError(
                f"{where}: the session header is malformed ({exc})",
                reason="invalidHeader",
                path=str(self.path),
            ) from None
        self.result = ScanResult(header=header, header_data=data, version=version)


def _loose_envelope(line: memoryview | bytes) -> _Envelope | None:
    """The envelope of a line whose fields have unexpected types (read as pi would)."""
    try:
        data = msgspec.json.decode(line)
    except msgspec.DecodeError:
        return None
    if not isinstance(data, dict):
        return None

    def text(key: str) -> str | None:
        value = data.get(key)
        return value if isinstance(value, str) else None

    message = data.get("message")
    role = message.get("role") if isinstance(message, dict) else None
    return _Envelope(
        type=text("type"),
        id=text("id"),
        parent_id=text("parentId"),
        timestamp=text("timestamp"),
        message=_MessageEnvelope(role if isinstance(role, str) else None)
        if isinstance(message, dict)
        else None,
    )


def _is_json(data: bytes) -> bool:
    try:
        msgspec.json.decode(data)
    except msgspec.DecodeError:
        return False
    return True


def _valid_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _repair_utf8(line: memoryview) -> bytes:
    return bytes(line).decode("utf-8", "replace").encode("utf-8")


def _invalid_utf8_line_starts(data: bytes, end: int) -> set[int]:
    """Offsets (in ``data``) of the lines in ``data[:end]`` that are not valid UTF-8."""
    bad: set[int] = set()
    view = memoryview(data)  # no copies of an 8 MB chunk just to validate it
    start = 0
    while start < end:
        try:
            str(view[start:end], "utf-8")
        except UnicodeDecodeError as exc:
            error_at = start + exc.start
            line_start = data.rfind(b"\n", 0, error_at) + 1
            bad.add(line_start)
            start = data.find(b"\n", error_at, end) + 1
            if start == 0:
                break
            continue
        break
    return bad
