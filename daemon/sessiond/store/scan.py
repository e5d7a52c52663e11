"""Reading a session file into the index, without decoding message bodies.

The file is read in chunks (a 200 MB session never sits in memory whole).
Each line is decoded straight into its index record: msgspec reads the few
fields the record has and skips the rest of the line, validating it as JSON
as it goes, all in C. Lines that do not decode that way take a slow path that
classifies them: the header, blank lines, damaged lines, odd field types,
invalid UTF-8. Nothing is silently dropped.

UTF-8 inside skipped fields is not checked here (checking a 200 MB file costs
seconds); the store checks each line when it first uses its body.
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
from sessiond.core.entries import CURRENT_SESSION_VERSION, SessionHeader, UnknownEntry
from sessiond.core.jsjson import replace_lone_surrogates
from sessiond.errors import InvalidSessionFileError, StorageError

from .records import EntryRecord, MessageRole
from .recovery import DamagedLine, RecoveryReport, TornTail, preview_of

CHUNK_SIZE: Final = 8 * 1024 * 1024
_BOM: Final = b"\xef\xbb\xbf"
_WHITESPACE: Final = b" \t\r\n"
# Entries the index decodes whole: small, and needed for labels and the name.
EAGER_TYPES: Final = frozenset({"label", "session_info"})
_RECORD_DECODER: Final = msgspec.json.Decoder(EntryRecord)


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
    # Lines already in hand that the store decodes at once (metadata, repaired UTF-8).
    eager_lines: dict[int, bytes] = field(default_factory=dict)


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

    def chunks() -> Iterator[bytes]:
        try:
            while chunk := os.read(fd, CHUNK_SIZE):
                yield chunk
        finally:
            os.close(fd)

    return status.st_size, chunks()


def scan(path: Path, chunks: Iterator[bytes], size: int) -> ScanResult:
    """Index a session from its bytes. Raises ``InvalidSessionFileError`` for a bad header."""
    scanner = _Scanner(path)
    carry = b""
    base = 0  # file offset of chunk[0]
    for chunk in chunks:
        start = 0
        if carry:
            # Only the line that spans two chunks is copied, never a whole chunk.
            first = chunk.find(b"\n")
            if first < 0:
                carry += chunk
                base += len(chunk)
                continue
            joined = carry + chunk[: first + 1]
            scanner.feed(joined, 0, len(joined), base - len(carry))
            start = first + 1
        end = chunk.rfind(b"\n") + 1
        if end > start:
            scanner.feed(chunk, start, end, base)
        carry = chunk[max(end, start) :]
        base += len(chunk)
    return scanner.finish(carry, base - len(carry), size)


class _Scanner:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.line_no = 0
        self.result: ScanResult | None = None
        self.report = RecoveryReport()
        self.records: list[EntryRecord] = []
        self.eager_lines: dict[int, bytes] = {}

    def feed(self, data: bytes, pos: int, end: int, base: int) -> None:
        """Handle the complete lines ``data[pos:end]``; ``data[0]`` is at file offset ``base``."""
        view = memoryview(data)
        find = data.find
        while self.result is None and pos < end:  # the header comes first
            newline = find(b"\n", pos, end)
            self.line_no += 1
            self._slow_line(view[pos:newline], base + pos)
            pos = newline + 1
        if self.result is None or self.result.version < CURRENT_SESSION_VERSION:
            # An old file's entries are read by the migration, not indexed here.
            self.line_no += data.count(b"\n", pos, end)
            return
        # The hot loop: one C-level decode per line builds the record.
        decode = _RECORD_DECODER.decode
        records = self.records
        append = records.append
        line_no = self.line_no
        seq = len(records)
        while pos < end:
            newline = find(b"\n", pos, end)
            line_no += 1
            try:
                record = decode(view[pos:newline])
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
                self.line_no = line_no
                self._slow_line(view[pos:newline], base + pos)
                seq = len(records)
            else:
                record.offset = base + pos
                record.length = newline - pos
                record.seq = seq
                seq += 1
                append(record)
            pos = newline + 1
        self.line_no = line_no

    def finish(self, tail: bytes, base: int, size: int) -> ScanResult:
        """Handle the last line if it has no newline, and return the result."""
        torn: bytes | None = None
        if tail:
            if not tail.strip(_WHITESPACE):
                self.line_no += 1
                self.report.blank_lines += 1
            elif self.result is not None and not _is_json(tail):
                # Unfinished: a crash mid-write, or zeros left by the filesystem.
                self.line_no += 1
                torn = tail
                self.report.torn_tail = TornTail(
                    offset=base, length=len(tail), saved_to=None, preview=preview_of(tail)
                )
            else:
                # A complete line that only lacks its newline (the next append adds it).
                self.report.missing_final_newline = True
                self.feed(tail + b"\n", 0, len(tail) + 1, base)
                for record in self.records[-1:]:
                    if record.offset == base:
                        record.length = len(tail)
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
        result.ends_with_newline = not tail
        result.eager_lines = self.eager_lines
        return result

    def _slow_line(self, line: memoryview, offset: int) -> None:
        """A line the fast path could not take: blank, header, damaged, odd types."""
        raw = bytes(line)
        length = len(raw)
        if not raw.strip(_WHITESPACE):
            self.report.blank_lines += 1
            return
        if offset == 0 and raw[:3] == _BOM:
            self.report.byte_order_mark = True
            raw = raw[3:]
        if self.result is None:
            self._header(raw)
            return
        if self.result.version < CURRENT_SESSION_VERSION:
            return
        repaired = False
        if not _valid_utf8(raw):
            # pi reads such a line with replacement characters; so does sessiond.
            self.report.invalid_utf8_lines.append(self.line_no)
            raw = raw.decode("utf-8", "replace").encode("utf-8")
            repaired = True
        record: EntryRecord | None
        try:
            record = _RECORD_DECODER.decode(raw)
        except msgspec.ValidationError:
            record = _loose_record(raw)
        except msgspec.DecodeError as exc:
            readable = replace_lone_surrogates(raw)
            record = None if readable is raw else _record_or_none(readable)
            if record is None:
                self._damaged(raw, offset, length, f"not valid JSON ({exc})")
                return
            # pi reads a lone surrogate escape; sessiond reads U+FFFD in its place.
            self.report.lone_surrogate_entries.append(record.id)
            raw, repaired = readable, True
        except RecursionError:
            self._damaged(raw, offset, length, "nested too deeply to read")
            return
        if record is None:
            self._damaged(raw, offset, length, "not an entry (no string id)")
            return
        record.offset = offset
        record.length = length
        record.seq = len(self.records)
        record.utf8_state = 2 if repaired else 1
        self.eager_lines[offset] = raw
        self.records.append(record)

    def _damaged(self, line: bytes, offset: int, length: int, reason: str) -> None:
        self.report.damaged_lines.append(
            DamagedLine(
                line=self.line_no,
                offset=offset,
                length=length,
                reason=reason,
                preview=preview_of(line),
            )
        )

    def _header(self, raw: bytes) -> None:
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


def decode_metadata(record: EntryRecord, line: bytes, report: RecoveryReport) -> None:
    """Decode a label or name entry whole (the index needs its values)."""
    try:
        record.entry = decode_entry(line)
    except (msgspec.DecodeError, NotAnEntry, RecursionError):
        record.entry = None
    if isinstance(record.entry, UnknownEntry):
        report.unreadable_entries.append(record.id)


def _loose_record(line: bytes) -> EntryRecord | None:
    """The record of a line whose fields have unexpected types (read as pi would)."""
    try:
        data = msgspec.json.decode(line)
    except (msgspec.DecodeError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        return None

    def text(key: str) -> str | None:
        value = data.get(key)
        return value if isinstance(value, str) else None

    message = data.get("message")
    role = message.get("role") if isinstance(message, dict) else None
    return EntryRecord(
        id=data["id"],
        type=text("type") or "",
        parent_id=text("parentId"),
        timestamp=text("timestamp") or "",
        message=MessageRole(role if isinstance(role, str) else None)
        if isinstance(message, dict)
        else None,
    )


def _is_json(data: bytes) -> bool:
    try:
        msgspec.json.decode(data)
    except msgspec.DecodeError:
        return False
    except RecursionError:
        return True  # too deep to tell: keep it as a (damaged) line rather than cut it off
    return True


def _record_or_none(raw: bytes) -> EntryRecord | None:
    try:
        return _RECORD_DECODER.decode(raw)
    except msgspec.ValidationError:
        return _loose_record(raw)
    except (msgspec.DecodeError, RecursionError):
        return None


def _valid_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
