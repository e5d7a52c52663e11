"""What a ``SessionStore`` is built from: an existing file read and locked, or a new
session's path, header and lock."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import msgspec

from sessiond.core.entries import CURRENT_SESSION_VERSION, SessionHeader
from sessiond.core.title_slot import TitleSlot
from sessiond.errors import ConflictError
from sessiond.paths import check_session_id, default_session_dir, iso_now, session_file_name
from sessiond.settings import StorageSettings

from .fileio import path_error
from .ids import new_session_id
from .lock import SessionLock
from .opening import lock_existing, read_session
from .safe_files import check_regular_or_absent, make_private_directories
from .scan_result import ScanResult
from .title_line import starting_slot

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class StoreParts:
    """A session's identity and what was read of its file (None: a new session)."""

    path: Path
    header: SessionHeader
    header_line: bytes
    scan_result: ScanResult | None
    storage: StorageSettings
    readonly: bool
    lock: SessionLock | None
    # A read-only open of an old version reads its migrated copy (an anonymous temporary
    # file) in place of the file.
    source_fd: int | None
    clock: Clock
    # A new oh-my-pi session's title line (a fork of one): the file starts with it.
    title_slot: TitleSlot | None = None

    def release(self) -> None:
        """Give back what was taken (a store could not be built from the parts)."""
        if self.source_fd is not None:
            os.close(self.source_fd)
        if self.lock is not None:
            self.lock.release()


def existing_parts(
    path: Path, storage: StorageSettings, *, readonly: bool, clock: Clock
) -> StoreParts:
    """An existing session file read (``opening``), locked unless ``readonly``."""
    lock = None if readonly else lock_existing(path)
    try:
        read = read_session(path, readonly=readonly, use_index=storage.persistent_index)
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    result = read.result
    return StoreParts(
        path=path,
        header=result.header,
        header_line=msgspec.json.encode(result.header_data),
        scan_result=result,
        storage=storage,
        readonly=readonly,
        lock=lock,
        source_fd=read.source_fd,
        clock=clock,
    )


def new_parts(
    cwd: str,
    *,
    session_dir: str | os.PathLike[str] | None,
    path: str | os.PathLike[str] | None,
    session_id: str | None,
    parent_session: str | None,
    storage: StorageSettings,
    clock: Clock,
    title_of: TitleSlot | None,
) -> StoreParts:
    """A new session: its header, its path (checked, its directory made) and its lock."""
    session_id = check_session_id(session_id) if session_id else new_session_id()
    created = iso_now(clock())
    file_path = _new_session_path(cwd, created, session_id, storage, session_dir, path)
    header = SessionHeader(
        version=CURRENT_SESSION_VERSION,
        id=session_id,
        timestamp=created,
        cwd=cwd,
        parent_session=parent_session,
        title=(title_of.title or None) if title_of is not None else None,
        title_source=title_of.source if title_of is not None else None,
    )
    lock = SessionLock(file_path)
    lock.acquire()
    return StoreParts(
        path=file_path,
        header=header,
        header_line=msgspec.json.encode(header),
        scan_result=None,
        storage=storage,
        readonly=False,
        lock=lock,
        source_fd=None,
        clock=clock,
        title_slot=(
            starting_slot(title_of.title, title_of.source, created)
            if title_of is not None
            else None
        ),
    )


def _new_session_path(
    cwd: str,
    created: str,
    session_id: str,
    storage: StorageSettings,
    session_dir: str | os.PathLike[str] | None,
    path: str | os.PathLike[str] | None,
) -> Path:
    """``path``, or pi's name for the session in ``session_dir`` (default: the one for
    ``cwd``), with its directory made (0700). A link, FIFO or directory at the path is
    refused (not replaced later), and so is a non-empty file: open that instead."""
    if path is not None:
        file_path = Path(path).absolute()
    else:
        directory = (
            Path(session_dir)
            if session_dir is not None
            else default_session_dir(cwd, storage.session_dir)
        )
        file_path = directory.absolute() / session_file_name(created, session_id)
    try:
        taken = check_regular_or_absent(file_path) and file_path.stat().st_size > 0
    except (OSError, ValueError) as exc:
        raise path_error("create", file_path, exc) from None
    if taken:
        raise ConflictError(
            f"{file_path} already exists; open it instead of creating a session there",
            path=str(file_path),
        )
    try:
        make_private_directories(file_path.parent)
    except (OSError, ValueError) as exc:
        raise path_error("create the session directory", file_path.parent, exc) from None
    return file_path
