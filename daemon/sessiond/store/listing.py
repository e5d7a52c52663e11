"""Listing the sessions of a directory: pi's session picker data."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from sessiond.core.decode import NotAnEntry, decode_entry
from sessiond.core.entries import MessageEntry, SessionInfoEntry
from sessiond.core.messages import UserMessage, text_of_blocks
from sessiond.errors import InvalidSessionFileError

from .fileio import path_error
from .scan import file_chunks, open_session_file, scan


class SessionSummary(msgspec.Struct, rename="camel", kw_only=True, omit_defaults=True):
    path: str
    session_id: str
    cwd: str
    created: str
    # pi's rule: the time of the last user or assistant message; the file's
    # modification time when there is none.
    modified: str
    entry_count: int
    first_message: str
    name: str | None = None
    parent_session: str | None = None


def list_sessions(directory: Path) -> list[SessionSummary]:
    """Every readable session file in ``directory``, most recently modified first.

    Files that are not sessions (or not readable) are skipped: a listing
    should show what can be opened. Temporary and lock files never qualify, nor
    do symbolic links, FIFOs and devices (never opened, so never waited on).
    """
    summaries: list[SessionSummary] = []
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
    for path in candidates:
        try:
            summaries.append(summarize_session(path))
        except (InvalidSessionFileError, OSError):
            continue
    summaries.sort(key=lambda summary: summary.modified, reverse=True)
    return summaries


def _may_be_session(item: os.DirEntry[str]) -> bool:
    name = item.name
    return (
        name.endswith(".jsonl") and not name.startswith(".") and item.is_file(follow_symlinks=False)
    )


def summarize_session(path: Path) -> SessionSummary:
    """The listing's summary of one session file, read through one descriptor."""
    fd = open_session_file(path)
    try:
        status = os.fstat(fd)
        result = scan(path, file_chunks(fd), status.st_size)
        first_message = ""
        last_message_time: str | None = None
        name: str | None = None
        if result.title_slot is not None:
            # oh-my-pi's files: the title line names the session (session_info is inert).
            name = result.title_slot.title or None
        for record in result.records:
            if record.type == "session_info" and result.title_slot is None:
                # pi (0.73.1 and 1.6): the last session_info in the file names the session.
                try:
                    info = decode_entry(os.pread(fd, record.length, record.offset))
                except (msgspec.DecodeError, NotAnEntry):
                    continue
                if isinstance(info, SessionInfoEntry):
                    name = (info.name or "").strip() or None
            if record.type != "message" or record.role not in ("user", "assistant"):
                continue
            last_message_time = record.timestamp or last_message_time
            if first_message or record.role != "user":
                continue
            try:
                entry = decode_entry(os.pread(fd, record.length, record.offset))
            except (msgspec.DecodeError, NotAnEntry):
                continue
            if isinstance(entry, MessageEntry) and isinstance(entry.message, UserMessage):
                first_message = text_of_blocks(entry.message.content)
    finally:
        os.close(fd)
    modified = last_message_time or _mtime(status.st_mtime)
    return SessionSummary(
        path=str(path),
        session_id=result.header.id,
        cwd=result.header.cwd,
        created=result.header.timestamp,
        modified=modified,
        entry_count=len(result.records),
        first_message=first_message,
        name=name,
        parent_session=result.header.parent_session,
    )


def _mtime(seconds: float) -> str:
    from sessiond.paths import iso_now

    return iso_now(datetime.fromtimestamp(seconds, UTC))
