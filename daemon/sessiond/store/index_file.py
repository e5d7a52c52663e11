"""The persistent index: what a scan of a session file found, kept for the next open.

Where it lives, when it is trusted and what it cannot see: ``protocol/behaviour.md``,
"The persistent index". Here: its format (magic bytes, metadata, one fixed-size row per
line), its checks against the file, and writing it. It is renamed into place but not
fsynced (that cost a quarter of an update's time): a crash of the machine may leave a
torn index, which fails its checks like any damaged one, and the file is scanned.
"""

from __future__ import annotations

import contextlib
import hashlib
import operator
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import msgspec

from sessiond._version import __version__
from sessiond.core.entries import SessionHeader
from sessiond.core.title_slot import (
    InvalidTitleSlot,
    TitleSlot,
    claims_title_slot,
    parse_title_slot,
)
from sessiond.errors import SessiondError
from sessiond.wire.recovery import RecoveryReport

from .fileio import atomic_write
from .records import EntryRecord, MessageRole
from .safe_files import make_private_directories, open_regular
from .scan_result import ScanResult

# 2: estimates follow pi 1.6 (images in user messages, system messages, zero usage).
# 3: the length of oh-my-pi's title line before the header.
FORMAT: Final = 3
_MAGIC: Final = b"sessiond-index\n"
_WINDOW: Final = 4096
_WINDOWS: Final = 16
_TAIL: Final = 64 * 1024
# A timestamp tick: how close the file's last change and the index's writing may be
# before an unchanged stat proves nothing. Linux stamps files from a clock that moves in
# jiffies (10 ms at most); filesystems with whole-second times get two seconds.
_FINE_TICK_NS: Final = 25_000_000
_COARSE_TICK_NS: Final = 2_000_000_000
# Index files kept in the cache; the least recently written go first.
MAX_INDEX_FILES: Final = 256
# An index is at most this big (about 800 bytes a line would be absurd): a bigger
# file in the cache directory is not read.
_MAX_INDEX_BYTES: Final = 1 << 30


class Window(msgspec.Struct, array_like=True):
    offset: int
    length: int
    digest: bytes


class IndexMeta(msgspec.Struct, kw_only=True):
    format: int
    sessiond: str
    path: str
    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int
    written_ns: int
    line_count: int
    version: int
    header: bytes  # the header line's JSON
    windows: list[Window]
    report: RecoveryReport
    # The length of oh-my-pi's title line before the header (0: none); the windows
    # start after it.
    title_slot_length: int = 0


@dataclass
class FileIdentity:
    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, status: os.stat_result) -> FileIdentity:
        return cls(
            status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns
        )


_meta_decoder: Final = msgspec.msgpack.Decoder(IndexMeta)
_rows_decoder: Final = msgspec.msgpack.Decoder(list[EntryRecord])
_rows_encoder: Final = msgspec.msgpack.Encoder()
_header_decoder: Final = msgspec.json.Decoder(dict[str, object])


def index_directory() -> Path:
    from sessiond.paths import cache_dir

    return cache_dir() / "index"


def index_path_for(session_path: Path, directory: Path | None = None) -> Path:
    key = hashlib.blake2b(os.fsencode(session_path), digest_size=16).hexdigest()
    return (directory or index_directory()) / f"{key}.idx"


@dataclass
class IndexedRows:
    """The rows of a trusted index as they were read: the first ``count`` records of the
    result it was loaded into, encoded (the msgpack array's items, without its header)."""

    count: int
    items: memoryview


@dataclass
class LoadedIndex:
    result: ScanResult
    rows: IndexedRows


def load(session_path: Path, fd: int, directory: Path | None = None) -> LoadedIndex | None:
    """The scan result the index holds for the file open on ``fd``, if the index is
    trustworthy (see the module's docstring); None otherwise. Never raises for a bad
    index: it is only a cache."""
    try:
        return _load(session_path, fd, index_path_for(session_path, directory))
    except (OSError, ValueError, SessiondError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def _load(session_path: Path, fd: int, index_path: Path) -> LoadedIndex | None:
    try:
        index_fd = open_regular(index_path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        if os.fstat(index_fd).st_size > _MAX_INDEX_BYTES:
            return None
        with os.fdopen(os.dup(index_fd), "rb") as handle:
            data = handle.read()
    finally:
        os.close(index_fd)
    if not data.startswith(_MAGIC):
        return None
    view = memoryview(data)[len(_MAGIC) :]
    meta_length = int.from_bytes(view[:8], "little")
    meta = _meta_decoder.decode(view[8 : 8 + meta_length])
    status = os.fstat(fd)
    if not _describes(meta, session_path, status, fd):
        return None
    title_slot = _title_slot(fd, meta.title_slot_length)
    if meta.title_slot_length and title_slot is None:
        return None
    rows = view[8 + meta_length :]
    # Each row holds its record's place in file order (``seq``), written as it was found;
    # a path walk only takes it as a hint and checks it, so it is not counted again here.
    records = _rows_decoder.decode(rows)
    header_data = _header_decoder.decode(meta.header)
    header = msgspec.convert(
        {"timestamp": "", **header_data, "version": meta.version}, SessionHeader, strict=False
    )
    result = ScanResult(
        header=header,
        header_data=header_data,
        version=meta.version,
        records=list(records),
        report=meta.report,
        size=meta.size,
        ends_with_newline=True,
        line_count=meta.line_count,
        title_slot=title_slot,
    )
    return LoadedIndex(result, IndexedRows(len(records), rows[_array_header_length(rows) :]))


def _array_header_length(encoded: memoryview | bytes) -> int:
    """The length of the header of the msgpack array ``encoded`` starts with."""
    first = encoded[0]
    if 0x90 <= first <= 0x9F:  # fixarray
        return 1
    if first == 0xDC:  # array 16
        return 3
    if first == 0xDD:  # array 32
        return 5
    raise ValueError("not a msgpack array")


def _array_header(count: int) -> bytes:
    if count < 16:
        return bytes([0x90 | count])
    if count < 1 << 16:
        return b"\xdc" + count.to_bytes(2, "big")
    return b"\xdd" + count.to_bytes(4, "big")


def _title_slot(fd: int, length: int) -> TitleSlot | None:
    """The title line as it is now (a rename rewrites it in place), if it is still one of
    ``length`` bytes."""
    if length <= 0:
        return None
    line = os.pread(fd, length, 0)
    if len(line) != length or not line.endswith(b"\n"):
        return None
    try:
        value = msgspec.json.decode(line[:-1])
        return parse_title_slot(value, length) if claims_title_slot(value) else None
    except (msgspec.DecodeError, InvalidTitleSlot, RecursionError):
        return None


def _describes(meta: IndexMeta, session_path: Path, status: os.stat_result, fd: int) -> bool:
    if meta.format != FORMAT or meta.sessiond != __version__ or meta.path != str(session_path):
        return False
    if (status.st_dev, status.st_ino) != (meta.device, meta.inode):
        return False
    if status.st_size < meta.size or meta.size == 0:
        return False
    if status.st_size == meta.size:
        same_times = (status.st_mtime_ns, status.st_ctime_ns) == (meta.mtime_ns, meta.ctime_ns)
        if not same_times or is_racy(meta):
            return False
    if os.pread(fd, 1, meta.size - 1) != b"\n":
        return False
    if meta.title_slot_length >= meta.size:
        return False
    return all(_digest(fd, w.offset, w.length) == w.digest for w in meta.windows)


def is_racy(meta: IndexMeta) -> bool:
    """Whether the index was written within a timestamp tick of the file's last change
    (an edit in that tick could keep the same times)."""
    return meta.written_ns - max(meta.ctime_ns, meta.mtime_ns) < _tick(meta.mtime_ns, meta.ctime_ns)


def _tick(mtime_ns: int, ctime_ns: int) -> int:
    coarse = ctime_ns % 1_000_000_000 == 0 and mtime_ns % 1_000_000_000 == 0
    return _COARSE_TICK_NS if coarse else _FINE_TICK_NS


def seconds_until_trusted(status: os.stat_result) -> float:
    """How long to wait before an index of the file in this state would not be racy."""
    changed = max(status.st_mtime_ns, status.st_ctime_ns)
    due = changed + _tick(status.st_mtime_ns, status.st_ctime_ns)
    return max(0.0, (due - time.time_ns()) / 1e9)


def save_at_path(session_path: Path, result: ScanResult, header_line: bytes) -> bool:
    """``save`` for a file that is no longer open (after a session closed)."""
    try:
        fd = open_regular(session_path, os.O_RDONLY)
    except (OSError, SessiondError):
        return False
    try:
        return save(session_path, fd, result, header_line)
    finally:
        os.close(fd)


def _digest(fd: int, offset: int, length: int) -> bytes:
    return hashlib.blake2b(os.pread(fd, length, offset), digest_size=16).digest()


def _windows(size: int, start: int) -> list[tuple[int, int]]:
    """The fingerprinted ranges of a file of ``size`` bytes whose lines start at ``start``
    (after a title line): their start (the header), windows spread evenly over them, and
    the last 64 KiB."""
    ranges = [(start, min(size - start, _WINDOW))]
    if size - start > _TAIL + _WINDOW:
        step = (size - start - _TAIL) // (_WINDOWS + 1)
        ranges += [(start + step * (n + 1), _WINDOW) for n in range(_WINDOWS)]
    tail_start = max(start, size - _TAIL)
    ranges.append((tail_start, size - tail_start))
    return ranges


def save(
    session_path: Path,
    fd: int,
    result: ScanResult,
    header_line: bytes,
    directory: Path | None = None,
    *,
    indexed: IndexedRows | None = None,
) -> bool:
    """Write the index of ``result`` (a scan of the whole file open on ``fd``, ending
    with a newline) atomically. Returns whether it was written: a cache directory that
    cannot be written is not an error.

    ``indexed``: the rows of the index ``result`` was loaded from, when its first
    ``indexed.count`` records are still exactly the ones those rows hold (an open that
    scanned what was appended and changed nothing else): they are copied, not encoded."""
    if result.size == 0 or not result.ends_with_newline:
        return False
    try:
        status = os.fstat(fd)
        if status.st_size != result.size or not stat.S_ISREG(status.st_mode):
            return False  # the file moved on since: the next open scans
        index_dir = directory or index_directory()
        make_private_directories(index_dir)
        slot_length = result.title_slot.length if result.title_slot is not None else 0
        meta = IndexMeta(
            format=FORMAT,
            sessiond=__version__,
            path=str(session_path),
            device=status.st_dev,
            inode=status.st_ino,
            size=result.size,
            mtime_ns=status.st_mtime_ns,
            ctime_ns=status.st_ctime_ns,
            written_ns=time.time_ns(),
            line_count=result.line_count,
            version=result.version,
            header=header_line,
            windows=[
                Window(offset, length, _digest(fd, offset, length))
                for offset, length in _windows(result.size, slot_length)
            ],
            title_slot_length=slot_length,
            # What the next open finds, not what this one repaired.
            report=msgspec.structs.replace(
                result.report, torn_tail=None, migrated_from_version=None
            ),
        )
        encoded_meta = msgspec.msgpack.encode(meta)
        target = index_path_for(session_path, index_dir)
        head = [_MAGIC, len(encoded_meta).to_bytes(8, "little"), encoded_meta]
        # Not fsynced: after a crash a torn index fails its checks and the file is scanned.
        atomic_write(target, [*head, *_encoded_rows(result.records, indexed)], durable=False)
        _prune(index_dir, keep=target)
    except (OSError, ValueError, msgspec.EncodeError, SessiondError):
        return False  # a cache must never fail the open it speeds up
    return True


def _encoded_rows(records: list[EntryRecord], indexed: IndexedRows | None) -> list[bytes]:
    """The rows as one msgpack array: the items of ``indexed`` as they are, then the
    rest encoded."""
    if indexed is None or not 0 < indexed.count <= len(records):
        return [_encode_records(records)]
    rest = _encode_records(records[indexed.count :])
    items = memoryview(rest)[_array_header_length(rest) :]
    return [_array_header(len(records)), bytes(indexed.items), bytes(items)]


_decoded_entry: Final = operator.attrgetter("entry")


def _encode_records(records: list[EntryRecord]) -> bytes:
    # Records are arrays of their fields, encoded in C; but a decoded entry the store keeps
    # on a record (metadata it has read) is no part of a row, so the rows of a list that
    # holds one are built field by field (the same bytes, five times slower).
    if any(map(_decoded_entry, records)):
        return _rows_encoder.encode([_row(record) for record in records])
    return _rows_encoder.encode(records)


def _row(
    record: EntryRecord,
) -> tuple[
    str, str, str | None, str, MessageRole | None, int, int, int, None, int | None, int | None, int
]:
    # The decoded entry is not kept: it is re-read from the file when needed.
    return (
        record.id,
        record.type,
        record.parent_id,
        record.timestamp,
        record.message,
        record.offset,
        record.length,
        record.seq,
        None,
        record.tokens_chars,
        record.tokens_tiktoken,
        record.utf8_state,
    )


def _prune(directory: Path, keep: Path) -> None:
    """Keep the cache bounded: drop the least recently written indexes past the limit."""
    with contextlib.suppress(OSError):
        entries = [entry for entry in os.scandir(directory) if entry.name.endswith(".idx")]
        if len(entries) <= MAX_INDEX_FILES:
            return
        entries.sort(key=lambda entry: entry.stat(follow_symlinks=False).st_mtime_ns)
        for entry in entries[: len(entries) - MAX_INDEX_FILES]:
            if entry.path != str(keep):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
