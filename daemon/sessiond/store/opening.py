"""Reading a session file for an open: index or scan, repair, migration.

An open takes the persistent index when one describes the file (``index_file``) and
scans only what was appended since; otherwise it scans the whole file and leaves an
index for the next open. Either way the result is the same as a full scan's.

Writable opens then cut a torn last line off into a ``.corrupt`` file and migrate an
old version by an atomic rewrite. Read-only opens change nothing: a torn tail is only
reported, and a migration goes to an anonymous temporary file read in the file's
place. Memory stays bounded by the longest line read (``lines.MAX_LINE_BYTES``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import msgspec

from sessiond.core.entries import CURRENT_SESSION_VERSION
from sessiond.errors import InvalidSessionFileError, StorageError

from . import index_file
from .budget import MemoryBudget
from .fileio import atomic_write, path_error, save_aside, write_all
from .ids import new_entry_id
from .lines import MAX_LINE_BYTES, read_chunks, read_lines
from .lock import SessionLock
from .migrate import Migration
from .safe_files import check_regular_or_absent, open_regular
from .scan import (
    file_chunks,
    open_session_file,
    read_session_bytes,
    scan,
    scan_rest,
)
from .scan_result import ScanResult


def lock_existing(path: Path) -> SessionLock:
    """The lock of an existing session file, for a writable open. A link or a FIFO at the
    path is refused before a lock file is made beside it (the open after the lock
    checks again, on the descriptor)."""
    try:
        exists = check_regular_or_absent(path)
    except (OSError, ValueError) as exc:
        raise path_error("open", path, exc) from None
    if not exists:
        raise InvalidSessionFileError(
            f"{path}: no such session file", reason="notFound", path=str(path)
        )
    lock = SessionLock(path)
    lock.acquire()
    return lock


@dataclass
class ReadSession:
    """What an open read: the scan's result and, for a read-only open of an old version,
    the migrated copy to read in the file's place."""

    result: ScanResult
    source_fd: int | None
    from_index: bool


def read_session(
    path: Path,
    *,
    readonly: bool,
    use_index: bool = True,
    index_dir: Path | None = None,
    trust_index: bool = True,
) -> ReadSession:
    """The file read (from the persistent index and what was appended since, or scanned),
    and the index brought up to date. ``trust_index=False``: every line is scanned, and
    the index written anew (a line was found changed where the index cannot see it)."""
    fd = open_session_file(path)
    try:
        result, indexed = _index_or_scan(path, fd, use_index and trust_index, index_dir)
        if result.report.torn_tail is not None and not readonly:
            repair_torn_tail(path, result)
        source_fd: int | None = None
        if result.version < CURRENT_SESSION_VERSION:
            result, source_fd = _migrate(path, result, readonly)
            if not readonly and use_index and _save_index(path, result, index_dir):
                result.indexed_size = result.size
        elif (
            use_index
            and result.indexed_size != result.size
            and index_file.save(path, fd, result, _header_line(result), index_dir, indexed=indexed)
        ):
            result.indexed_size = result.size
        return ReadSession(result=result, source_fd=source_fd, from_index=indexed is not None)
    finally:
        os.close(fd)


def _index_or_scan(
    path: Path, fd: int, use_index: bool, index_dir: Path | None
) -> tuple[ScanResult, index_file.IndexedRows | None]:
    """The file's scan result, and the rows of the index it started from (None: no index
    was trusted, the whole file was scanned). The result's first records are those rows'."""
    size = os.fstat(fd).st_size
    loaded = index_file.load(path, fd, index_dir) if use_index else None
    if loaded is None:
        os.lseek(fd, 0, os.SEEK_SET)
        return scan(path, file_chunks(fd), size), None
    known = loaded.result
    known.indexed_size = known.size
    # An index holds what a scan found, so the same bound applies (an index written by an
    # older sessiond may describe a file that bound refuses).
    MemoryBudget(path, size).check(len(known.records), known.report)
    if size == known.size:
        return known, loaded.rows
    os.lseek(fd, known.size, os.SEEK_SET)
    result = scan_rest(path, known, file_chunks(fd), size)
    result.indexed_size = known.size
    return result, loaded.rows


def _header_line(result: ScanResult) -> bytes:
    return msgspec.json.encode(result.header_data)


def _save_index(path: Path, result: ScanResult, index_dir: Path | None) -> bool:
    try:
        fd = open_regular(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        return index_file.save(path, fd, result, _header_line(result), index_dir)
    finally:
        os.close(fd)


def repair_torn_tail(path: Path, result: ScanResult) -> None:
    """Cut the torn last line off, after saving it aside: all of it, or the first
    ``MAX_LINE_BYTES`` of a longer one (copied in chunks; NUL runs become holes)."""
    report = result.report.torn_tail
    assert report is not None
    saved_bytes = 0

    def kept(fd: int) -> Iterator[bytes]:
        nonlocal saved_bytes
        end = report.offset + min(report.length, MAX_LINE_BYTES)
        for _, chunk in read_chunks(fd, report.offset, end):
            saved_bytes += len(chunk)
            yield chunk

    try:
        fd = open_regular(path, os.O_RDWR)
        try:
            saved = save_aside(path, kept(fd))
            os.ftruncate(fd, report.offset)
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise StorageError(
            f"cannot cut the torn last line off {path}: {exc.strerror}", path=str(path)
        ) from None
    report.saved_to = str(saved)
    report.saved_bytes = saved_bytes
    result.size = report.offset
    result.ends_with_newline = True


def _migrate(path: Path, result: ScanResult, readonly: bool) -> tuple[ScanResult, int | None]:
    """Migrate an old version line by line (memory does not grow with the file).

    Writable: an atomic rewrite of the file. Read-only: the file is left alone and
    the migrated copy goes to an anonymous temporary file, returned to be read in
    its place. A torn tail is no part of it: cut off before, or (read-only) only
    reported.
    """
    torn = result.report.torn_tail
    end = torn.offset if torn is not None else result.size
    source = open_session_file(path)
    copy: int | None = None
    try:
        migration = Migration(lambda used: new_entry_id(used.__contains__))
        from_version = migration.plan(data for _, data, _ in read_lines(source, end))
        migrated = _migrated_chunks(source, end, migration)
        if readonly:
            import tempfile  # only an old file's read-only open needs it

            with tempfile.TemporaryFile() as handle:
                copy = os.dup(handle.fileno())
            size = 0
            for chunk in migrated:
                write_all(copy, chunk)
                size += len(chunk)
            chunks: Iterable[bytes] = (chunk for _, chunk in read_chunks(copy, 0, size))
        else:
            atomic_write(path, migrated, mode=os.fstat(source).st_mode)
            size, chunks = read_session_bytes(path)
        rescanned = scan(path, chunks, size)
    except BaseException as exc:
        if copy is not None:
            os.close(copy)
        if isinstance(exc, OSError):
            raise StorageError(
                f"cannot migrate {path}: {exc.strerror or exc}", path=str(path)
            ) from None
        raise
    finally:
        os.close(source)
    report = rescanned.report
    report.migrated_from_version = from_version
    report.torn_tail = torn
    report.byte_order_mark = report.byte_order_mark or result.report.byte_order_mark
    return rescanned, copy


def _migrated_chunks(source: int, end: int, migration: Migration) -> Iterator[bytes]:
    """The migrated file, in chunks of about a megabyte; a line too long to read is
    copied through as it is."""
    pending: list[bytes] = []
    pending_size = 0
    for offset, line, length in read_lines(source, end):
        if line is None:
            if pending:
                yield b"".join(pending)
                pending, pending_size = [], 0
            for _, chunk in read_chunks(source, offset, offset + length):
                yield chunk
            yield b"\n"
            continue
        migrated = migration.rewrite(line)
        pending += (migrated, b"\n")
        pending_size += len(migrated) + 1
        if pending_size >= 1 << 20:
            yield b"".join(pending)
            pending, pending_size = [], 0
    if pending:
        yield b"".join(pending)
