"""The bytes of one session file: its descriptors, reading lines, appending, fsync, size.

Writes keep the promises of ``fileio``: appends are one ``write()`` of whole lines on
an ``O_APPEND`` descriptor, a new file appears whole, rewrites are atomic.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Literal

from sessiond.errors import StorageError

from .fileio import AppendFile, create_whole
from .lines import read_chunks
from .records import EntryRecord
from .safe_files import open_regular
from .scan_result import ScanResult

FsyncPolicy = Literal["always", "batch", "never"]


class SessionFile:
    """The session file as the store holds it: where its known lines end, whether it is on
    disk yet, a descriptor to read it and one to append to it."""

    def __init__(
        self,
        path: Path,
        *,
        fsync: FsyncPolicy,
        persisted: bool,
        source_fd: int | None = None,
    ) -> None:
        self.path = path
        self._fsync = fsync
        self._persisted = persisted
        # A read-only open of an old version reads its migrated copy (an anonymous
        # temporary file) in place of the file.
        self._read_fd: int | None = source_fd
        self._append: AppendFile | None = None
        self._size = 0
        self._needs_newline = False
        # Lines of a session not yet on disk, in append order.
        self._unwritten: dict[str, bytes] = {}
        self._unwritten_order: list[EntryRecord] = []

    # -- where the known lines end

    @property
    def persisted(self) -> bool:
        """Whether the file exists on disk yet (pi writes it lazily)."""
        return self._persisted

    @property
    def size(self) -> int:
        """Where the lines the store knows end (the next append goes there)."""
        return self._size

    @property
    def unwritten_size(self) -> int:
        """Bytes of the lines held for a file not written yet (newlines included)."""
        return sum(len(line) + 1 for line in self._unwritten.values())

    def set_end(self, size: int, *, needs_newline: bool = False) -> None:
        """The known lines end at ``size``; ``needs_newline``: the last one has no newline
        yet (an append writes one first)."""
        self._size = size
        self._needs_newline = needs_newline

    def end_as_read(self, scan: ScanResult | None) -> None:
        """The known lines are those ``scan`` read (none: a new session, nothing written)."""
        if scan is None:
            self.set_end(0)
        else:
            self.set_end(scan.size, needs_newline=not scan.ends_with_newline)

    # -- reading

    def reader(self) -> int:
        """The descriptor to read the file through (opened on first use)."""
        if self._read_fd is None:
            try:
                self._read_fd = open_regular(self.path, os.O_RDONLY)
            except OSError as exc:
                raise StorageError(f"cannot read {self.path}: {exc.strerror}") from None
        return self._read_fd

    @property
    def open_reader(self) -> int | None:
        """The reading descriptor if one is open (None: nothing read since a rewrite)."""
        return self._read_fd

    def read(self, offset: int, length: int) -> bytes:
        return os.pread(self.reader(), length, offset)

    def read_between(self, start: int, end: int) -> Iterator[bytes]:
        return (chunk for _, chunk in read_chunks(self.reader(), start, end))

    def forget_reader(self) -> None:
        """Close the reading descriptor: the path may name another file now."""
        if self._read_fd is not None:
            os.close(self._read_fd)
            self._read_fd = None

    # -- a session not written yet

    def hold(self, lines: list[tuple[EntryRecord, bytes]]) -> None:
        """Keep lines for the file's first write (pi writes a session lazily)."""
        for record, line in lines:
            self._unwritten[record.id] = line
            self._unwritten_order.append(record)

    def unhold(self, count: int) -> None:
        """Forget the last ``count`` lines held (their write failed)."""
        for record in self._unwritten_order[-count:]:
            self._unwritten.pop(record.id, None)
        del self._unwritten_order[-count:]

    def unwritten_line(self, entry_id: str) -> bytes:
        return self._unwritten[entry_id]

    def replace_unwritten(self, entry_id: str, line: bytes) -> None:
        self._unwritten[entry_id] = line

    def write_held(self, first: bytes, header_line: bytes) -> list[EntryRecord]:
        """Create the file: ``first`` (a title line, or nothing), the header and the lines
        held, whole or not at all, never over a file put at the path meanwhile
        (``fileio.create_whole``). The records written, their offsets set."""
        chunks = [first, header_line, b"\n"]
        offset = len(first) + len(header_line) + 1
        offsets: list[int] = []
        for record in self._unwritten_order:
            line = self._unwritten[record.id]
            offsets.append(offset)
            chunks += [line, b"\n"]
            offset += len(line) + 1
        create_whole(self.path, chunks)
        written = self._unwritten_order
        for record, record_offset in zip(written, offsets, strict=True):
            record.offset = record_offset
        self._unwritten = {}
        self._unwritten_order = []
        self._size = offset
        self._needs_newline = False
        self._persisted = True
        self._append = AppendFile(self.path)
        return written

    # -- writing

    def append(self, lines: Iterable[bytes], *, sync: bool) -> tuple[bytes, list[int]]:
        """Append whole lines in one ``write()`` (after a newline, if the last line lacks
        one); fsynced if ``sync`` or the policy is ``always``. The bytes written and each
        line's offset, as if nobody else appended meanwhile (``appended_alone`` tells)."""
        chunks: list[bytes] = [b"\n"] if self._needs_newline else []
        offset = self._size + len(chunks)
        offsets: list[int] = []
        for line in lines:
            offsets.append(offset)
            offset += len(line) + 1
            chunks += [line, b"\n"]
        data = b"".join(chunks)
        if self._append is None:
            self._append = AppendFile(self.path)
        self._append.append(data, sync=sync or self._fsync == "always")
        self._size += len(data)
        self._needs_newline = False
        return data, offsets

    def appended_status(self) -> os.stat_result:
        """The file as the append descriptor sees it (after an append)."""
        assert self._append is not None
        return os.fstat(self._append.fd)

    def sync(self) -> None:
        """fsync appended lines (the "batch" policy calls this on a timer)."""
        if self._append is not None:
            self._append.sync()

    @property
    def needs_sync(self) -> bool:
        return self._append is not None and self._append.dirty

    def stop_appending(self) -> None:
        """Sync and close the append descriptor (a rewrite is about to replace the file)."""
        if self._append is not None:
            self._append.close()
            self._append = None

    def rewritten(self, size: int) -> None:
        """The file at the path was replaced by a rewrite ending at ``size``: descriptors of
        the old file go, one to append to the new one is opened."""
        self.forget_reader()
        self._size = size
        self._needs_newline = False
        self._append = AppendFile(self.path)

    def overwrite_start(self, line: bytes) -> None:
        """``line`` over the file's first bytes, in place (oh-my-pi's fixed-size title
        line); fsynced under the ``always`` policy."""
        try:
            fd = open_regular(self.path, os.O_WRONLY)
            try:
                written = os.pwrite(fd, line, 0)
                if written != len(line):
                    raise OSError(f"short write ({written} of {len(line)} bytes)")
                if self._fsync == "always":
                    os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise StorageError(
                f"cannot write the title line of {self.path}: {exc}", path=str(self.path)
            ) from None
