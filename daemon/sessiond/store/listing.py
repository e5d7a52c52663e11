"""Listing the sessions of a directory: pi's session picker data.

A listing is bounded by what it shows, not by what the files hold: each file is read
in memory that does not grow with it (its records are looked at and dropped as the scan
goes), each summary's text is cut (``MAX_TEXT_CHARS`` of the first message and the
name, ``MAX_FIELD_CHARS`` of a header's fields), and at most ``MAX_SESSIONS`` summaries,
the most recent, are kept. A directory of hard links to one huge session, or of huge
first messages, makes a short answer.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import msgspec

from sessiond.core.decode import NotAnEntry, decode_entry
from sessiond.core.entries import MessageEntry, SessionInfoEntry
from sessiond.core.messages import UserMessage, text_of_blocks
from sessiond.errors import InvalidSessionFileError, LimitExceededError
from sessiond.wire.listing import SessionSummary

from .fileio import path_error
from .records import EntryRecord
from .scan import file_chunks, open_session_file, scan

# The most of a first message or a name a summary carries (a picker shows one line).
MAX_TEXT_CHARS: Final = 500
# The most of a header's id, cwd, timestamp or parent a summary carries (no real one is
# longer than a path).
MAX_FIELD_CHARS: Final = 4096
# Summaries in one listing at most: the most recently modified.
MAX_SESSIONS: Final = 10_000
# User messages tried for the first message (one that does not read is skipped).
_FIRST_MESSAGE_TRIES: Final = 8


def list_sessions(directory: Path) -> list[SessionSummary]:
    """Every readable session file in ``directory``, most recently modified first (at most
    ``MAX_SESSIONS`` of them).

    Files that are not sessions (or not readable) are skipped: a listing
    should show what can be opened. Temporary and lock files never qualify, nor
    do symbolic links, FIFOs and devices (never opened, so never waited on).
    """
    try:
        with os.scandir(directory) as scanned:
            candidates = sorted(
                (Path(item.path) for item in scanned if _may_be_session(item)),
                key=lambda path: path.name,
            )
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise path_error("list", directory, exc) from None
    return heapq.nlargest(
        MAX_SESSIONS, _summaries(candidates), key=lambda summary: summary.modified
    )


def _summaries(paths: list[Path]) -> Iterator[SessionSummary]:
    for path in paths:
        try:
            yield summarize_session(path)
        except (InvalidSessionFileError, LimitExceededError, OSError):
            continue


def _may_be_session(item: os.DirEntry[str]) -> bool:
    name = item.name
    return (
        name.endswith(".jsonl") and not name.startswith(".") and item.is_file(follow_symlinks=False)
    )


class _Seen:
    """What a listing needs of a file's records, taken as the scan hands them over."""

    def __init__(self) -> None:
        self.count = 0
        self.user_lines: list[tuple[int, int]] = []
        self.info_line: tuple[int, int] | None = None
        self.last_message_time: str | None = None

    def visit(self, records: list[EntryRecord]) -> None:
        self.count += len(records)
        for record in records:
            if record.type == "session_info":
                # pi (0.73.1 and 1.6): the last session_info in the file names the session.
                self.info_line = (record.offset, record.length)
            if record.type != "message" or record.role not in ("user", "assistant"):
                continue
            self.last_message_time = record.timestamp or self.last_message_time
            if record.role == "user" and len(self.user_lines) < _FIRST_MESSAGE_TRIES:
                self.user_lines.append((record.offset, record.length))


def summarize_session(path: Path) -> SessionSummary:
    """The listing's summary of one session file, read through one descriptor."""
    fd = open_session_file(path)
    try:
        status = os.fstat(fd)
        seen = _Seen()
        result = scan(path, file_chunks(fd), status.st_size, visit=seen.visit)
        name: str | None = None
        if result.title_slot is not None:
            # oh-my-pi's files: the title line names the session (session_info is inert).
            name = result.title_slot.title or None
        elif seen.info_line is not None:
            info = _entry_at(fd, *seen.info_line)
            if isinstance(info, SessionInfoEntry):
                name = (info.name or "").strip() or None
        first_message = ""
        for offset, length in seen.user_lines:
            entry = _entry_at(fd, offset, length)
            if isinstance(entry, MessageEntry) and isinstance(entry.message, UserMessage):
                first_message = text_of_blocks(entry.message.content)
                break
    finally:
        os.close(fd)
    header = result.header
    return SessionSummary(
        path=str(path),
        session_id=_cut(header.id, MAX_FIELD_CHARS),
        cwd=_cut(header.cwd, MAX_FIELD_CHARS),
        created=_cut(header.timestamp, MAX_FIELD_CHARS),
        modified=_cut(seen.last_message_time or _mtime(status.st_mtime), MAX_FIELD_CHARS),
        entry_count=seen.count,
        first_message=_cut(first_message, MAX_TEXT_CHARS),
        name=_cut(name, MAX_TEXT_CHARS) if name is not None else None,
        parent_session=_cut(header.parent_session, MAX_FIELD_CHARS)
        if header.parent_session is not None
        else None,
    )


def _entry_at(fd: int, offset: int, length: int) -> object:
    try:
        return decode_entry(os.pread(fd, length, offset))
    except (msgspec.DecodeError, NotAnEntry, RecursionError):
        return None


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _mtime(seconds: float) -> str:
    from sessiond.paths import iso_now

    return iso_now(datetime.fromtimestamp(seconds, UTC))
