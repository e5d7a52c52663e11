"""The line-by-line half of a scan: each complete line of a session file classified
and indexed (``scan`` feeds it the file's chunks).

Each line's keys (``records.LineKeys``) are decoded in C: msgspec reads the few
fields the index needs and skips the rest of the line, validating it as JSON as it
goes. Lines that do not decode that way take a slow path that classifies them: the
header, blank lines, damaged lines, odd field types, invalid UTF-8. Nothing is
silently dropped. UTF-8 inside skipped fields is not checked here (checking a 200 MB
file costs seconds); the store checks each line when it first uses its body.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import msgspec

from sessiond.core.entries import CURRENT_SESSION_VERSION, SessionHeader
from sessiond.core.jsjson import replace_lone_surrogates
from sessiond.core.title_slot import (
    InvalidTitleSlot,
    TitleSlot,
    claims_title_slot,
    parse_title_slot,
)
from sessiond.errors import InvalidSessionFileError
from sessiond.wire.recovery import DamagedLine, RecoveryReport, TornTail, preview_of

from .budget import MemoryBudget
from .lines import MAX_LINE_BYTES, PartialLine
from .records import KEYS_DECODER, EntryRecord, LineKeys, keys_or_none, loose_keys, record_of
from .scan_result import ScanResult

_BOM: Final = b"\xef\xbb\xbf"
_WHITESPACE: Final = b" \t\r\n"
# The memory budget is checked every this many records (plus one) as well as per chunk,
# so that a chunk of tiny lines cannot overshoot it by much.
_BUDGET_EVERY: Final = 0x3FFF


class LineScanner:
    """Complete lines in, records and their damage report out."""

    def __init__(
        self,
        path: Path,
        budget: MemoryBudget,
        visit: Callable[[list[EntryRecord]], None] | None = None,
    ) -> None:
        self.path = path
        self.line_no = 0
        self.result: ScanResult | None = None
        self.report = RecoveryReport()
        self.records: list[EntryRecord] = []
        self.eager_lines: dict[int, bytes] = {}
        # The offset up to which complete lines have been fed.
        self.fed_to = 0
        self.title_slot: TitleSlot | None = None
        self._budget = budget
        self._visit = visit

    def chunk_done(self) -> None:
        """After each chunk: the records go to the visitor, or count against the budget."""
        if self._visit is not None:
            self._visit(self.records)
            self.records = []
            self.eager_lines.clear()
        self._budget.check(len(self.records), self.report)

    def feed(self, data: bytes | bytearray, pos: int, end: int, base: int) -> None:
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
        # The hot loop: one C-level decode per line reads its keys.
        decode = KEYS_DECODER.decode
        make = record_of
        records = self.records
        append = records.append
        line_no = self.line_no
        seq = len(records)
        while pos < end:
            newline = find(b"\n", pos, end)
            line_no += 1
            try:
                keys = decode(view[pos:newline])
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
                self.line_no = line_no
                self._slow_line(view[pos:newline], base + pos)
                seq = len(records)
            else:
                append(make(keys, base + pos, newline - pos, seq))
                seq += 1
                if not seq & _BUDGET_EVERY:
                    self._budget.check(len(records), self.report)
            pos = newline + 1
        self.line_no = line_no

    def spanning_line(self, line: PartialLine) -> None:
        """A line that ran over from one chunk into the next, now complete (its newline
        is not in ``line``)."""
        if line.data is None:
            self.line_no += 1
            self._over_long(line)
            return
        data = line.data
        data += b"\n"
        self.feed(data, 0, len(data), line.offset)

    def _over_long(self, line: PartialLine) -> None:
        """A line longer than ``MAX_LINE_BYTES`` in the middle: reported, never read."""
        if self.result is None:
            raise _over_long_first_line(self.path, line)
        if self.result.version < CURRENT_SESSION_VERSION:
            return  # the migration copies it through; the scan after it reports it
        nul = ", all NUL bytes" if line.nul_only else ""
        self.report.damaged_lines.append(
            DamagedLine(
                line=self.line_no,
                offset=line.offset,
                length=line.length,
                reason=f"longer than {MAX_LINE_BYTES} bytes, the most a line may have{nul}: "
                "left in place unread",
                preview=preview_of(line.head),
            )
        )

    def finish(self, tail: PartialLine | None, size: int) -> ScanResult:
        """Handle the last line if it has no newline, and return the result."""
        data = tail.data if tail is not None else None
        if tail is not None and data is None:
            self.line_no += 1
            if self.result is None:
                raise _over_long_first_line(self.path, tail)
            # Too long to be an entry, and unfinished: a torn tail (a crash, or a
            # filesystem's zeros). It is not held: the repair copies what it keeps.
            self.report.torn_tail = TornTail(
                offset=tail.offset,
                length=tail.length,
                saved_to=None,
                preview=preview_of(tail.head),
                all_nul=tail.nul_only,
            )
        elif tail is not None and data is not None:
            base = tail.offset
            if not data.strip(_WHITESPACE):
                self.line_no += 1
                self.report.blank_lines += 1
            elif self.result is not None and not _is_json(data):
                # Unfinished: a crash mid-write, or zeros left by the filesystem.
                self.line_no += 1
                self.report.torn_tail = TornTail(
                    offset=base,
                    length=len(data),
                    saved_to=None,
                    preview=preview_of(data),
                    all_nul=tail.nul_only,
                )
            else:
                # A complete line that only lacks its newline (the next append adds it).
                self.report.missing_final_newline = True
                data += b"\n"
                self.feed(data, 0, len(data), base)
                for record in self.records[-1:]:
                    if record.offset == base:
                        record.length = len(data) - 1
        self.chunk_done()
        if self.result is None:
            if size == 0:
                raise InvalidSessionFileError(
                    f"{self.path}: the file is empty (a session file starts with a header line)",
                    reason="empty",
                    path=str(self.path),
                )
            if self.title_slot is not None:
                raise InvalidSessionFileError(
                    f"{self.path}: an oh-my-pi title line and no session header after it",
                    reason="notASessionFile",
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
        result.size = size
        result.ends_with_newline = tail is None
        result.eager_lines = self.eager_lines
        result.line_count = self.line_no
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
            self._header(raw, offset, length)
            return
        if self.result.version < CURRENT_SESSION_VERSION:
            return
        repaired = False
        if not _valid_utf8(raw):
            # pi reads such a line with replacement characters; so does sessiond.
            self.report.invalid_utf8_lines.append(self.line_no)
            raw = raw.decode("utf-8", "replace").encode("utf-8")
            repaired = True
        keys: LineKeys | None
        try:
            keys = KEYS_DECODER.decode(raw)
        except msgspec.ValidationError:
            keys = loose_keys(raw)
        except msgspec.DecodeError as exc:
            readable = replace_lone_surrogates(raw)
            keys = None if readable is raw else keys_or_none(readable)
            if keys is None:
                self._damaged(raw, offset, length, f"not valid JSON ({exc})")
                return
            # pi reads a lone surrogate escape; sessiond reads U+FFFD in its place.
            self.report.lone_surrogate_entries.append(keys.id)
            raw, repaired = readable, True
        except RecursionError:
            self._damaged(raw, offset, length, "nested too deeply to read")
            return
        if keys is None:
            self._damaged(raw, offset, length, "not an entry (no string id)")
            return
        record = record_of(keys, offset, length, len(self.records))
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

    def _header(self, raw: bytes, offset: int, length: int) -> None:
        where = f"{self.path}"
        first = "the line after the title line" if self.title_slot is not None else "the first line"
        if not _valid_utf8(raw):
            raise InvalidSessionFileError(
                f"{where}: not valid UTF-8 text in {first}; this is not a session file",
                reason="invalidUtf8",
                path=str(self.path),
            )
        try:
            data = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            # The error never quotes the file: whoever asked may not be allowed to
            # read it (a private key named as a session must not come back in an error).
            raise InvalidSessionFileError(
                f"{where}: {first} is not JSON, so this is not a session file",
                reason="notASessionFile",
                path=str(self.path),
            ) from None
        if claims_title_slot(data):
            self._title_slot(data, offset, length)
            return
        if not isinstance(data, dict) or data.get("type") != "session":
            if not isinstance(data, dict):
                found = _json_kind(data)
            elif isinstance(data.get("type"), str):
                found = 'a different "type"'
            else:
                found = f'a "type" that is {_json_kind(data.get("type"))}'
            raise InvalidSessionFileError(
                f"{where}: {first} is not a session header "
                f'(expected "type":"session", found {found})',
                reason="notASessionFile",
                path=str(self.path),
            )
        version = data.get("version", 1)
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            small = isinstance(version, int) and not isinstance(version, bool) and version > -1000
            found = str(version) if small else _json_kind(version)
            raise InvalidSessionFileError(
                f"{where}: the header's version is not a version number (found {found})",
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
        self.result = ScanResult(
            header=header, header_data=data, version=version, title_slot=self.title_slot
        )

    def _title_slot(self, data: dict[str, Any], offset: int, length: int) -> None:
        """oh-my-pi's title line: only as the file's very first line, once."""
        if offset != 0 or self.title_slot is not None:
            raise InvalidSessionFileError(
                f"{self.path}: a title line (oh-my-pi's) that is not the file's first line; "
                "the session header must come first, or right after the title line",
                reason="invalidTitleLine",
                path=str(self.path),
            )
        try:
            self.title_slot = parse_title_slot(data, length + 1)
        except InvalidTitleSlot as exc:
            raise InvalidSessionFileError(
                f"{self.path}: the first line is an oh-my-pi title line, but not a valid one "
                f"({exc}), so this is not a session file oh-my-pi or sessiond can open",
                reason="invalidTitleLine",
                path=str(self.path),
            ) from None


def _json_kind(value: object) -> str:
    """What kind of JSON value ``value`` is, without quoting it."""
    if value is None:
        return "null or missing"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _over_long_first_line(path: Path, line: PartialLine) -> InvalidSessionFileError:
    return InvalidSessionFileError(
        f"{path}: the first line is {line.length} bytes long, more than any session header "
        f"(the most a line may have is {MAX_LINE_BYTES}), so this is not a session file",
        reason="notASessionFile",
        path=str(path),
    )


def _is_json(data: bytes | bytearray) -> bool:
    try:
        msgspec.json.decode(data)
    except msgspec.DecodeError:
        return False
    except RecursionError:
        return True  # too deep to tell: keep it as a (damaged) line rather than cut it off
    return True


def _valid_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
