"""Lines too long to be entries: scanned in linear time and bounded memory, never read.

A line longer than ``MAX_LINE_BYTES`` in the middle of a file is a damaged line left in
place; as the last line without a newline it is a torn tail, cut off with only its first
``MAX_LINE_BYTES`` kept aside. Big files here are sparse (``os.truncate`` past the end),
so they cost no disk and no time to write.
"""

from __future__ import annotations

import json
import os
import time
import tracemalloc
from pathlib import Path

import msgspec
import pytest

from sessiond.errors import InvalidEntryError, InvalidSessionFileError
from sessiond.store.lines import MAX_LINE_BYTES
from sessiond.store.scan import read_session_bytes, scan
from sessiond.store.session import SessionStore

from .helpers import assistant, user

MB = 1 << 20
TORN_START = b'{"type":"message","id":"cafebabe","message":{"role":"user","content":"'


def session(directory: Path) -> tuple[Path, list[str]]:
    """A small session on disk; its path and entry ids."""
    with SessionStore.create("/proj", session_dir=directory) as store:
        ids = [store.append(user("question")).id, store.append(assistant("answer")).id]
        return store.path, ids


def with_sparse_tail(path: Path, start: bytes, size: int) -> int:
    """Append ``start`` and then NUL bytes up to ``size`` bytes in all (a hole, not
    written); returns where the tail begins."""
    offset = path.stat().st_size
    with open(path, "ab") as handle:
        handle.write(start)
    os.truncate(path, offset + size)
    return offset


def test_a_long_last_line_is_scanned_in_linear_time(tmp_path: Path) -> None:
    # Gathering the line by concatenation took 21 s for 512 MB (quadratic), some 50 times
    # as long as reading the file. The scan is held to reading the same bytes, timed on
    # the same machine just before: a busy machine slows both.
    path, _ = session(tmp_path)
    with_sparse_tail(path, TORN_START, 512 * MB)
    started = time.monotonic()
    size, chunks = read_session_bytes(path)
    assert sum(len(chunk) for chunk in chunks) == size
    reading = time.monotonic() - started
    started = time.monotonic()
    size, chunks = read_session_bytes(path)
    result = scan(path, chunks, size)
    elapsed = time.monotonic() - started
    assert result.report.torn_tail is not None
    assert result.report.torn_tail.length == 512 * MB
    assert elapsed < 10 * reading + 1, f"scanning took {elapsed:.1f} s, reading {reading:.1f} s"


def test_a_long_last_line_is_scanned_in_bounded_memory(tmp_path: Path) -> None:
    path, ids = session(tmp_path)
    with_sparse_tail(path, TORN_START, 256 * MB)
    tracemalloc.start()
    try:
        size, chunks = read_session_bytes(path)
        result = scan(path, chunks, size)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [record.id for record in result.records] == ids
    assert peak < 2 * MAX_LINE_BYTES, f"{peak / MB:.0f} MB held to scan a 256 MB line"


def test_an_over_long_torn_tail_keeps_only_the_limit_aside(tmp_path: Path) -> None:
    path, ids = session(tmp_path)
    original = path.read_bytes()
    offset = with_sparse_tail(path, TORN_START, 200 * MB)
    with SessionStore.open(path) as store:
        torn = store.recovery.torn_tail
        assert torn is not None
        assert (torn.offset, torn.length) == (offset, 200 * MB)
        assert torn.saved_bytes == MAX_LINE_BYTES and not torn.all_nul
        assert torn.preview.startswith('{"type":"message","id":"cafebabe"')
        assert [record.id for record in store.records()] == ids
        saved = Path(torn.saved_to or "")
        store.append(user("after the repair"))
    assert saved.stat().st_size == MAX_LINE_BYTES
    with open(saved, "rb") as handle:
        head = handle.read(len(TORN_START) + 16)
    assert head == TORN_START + bytes(16)
    assert path.read_bytes().startswith(original)
    with SessionStore.open(path, readonly=True) as again:
        assert again.recovery.clean and again.entry_count == 3


def test_a_nul_tail_is_reported_as_all_nul_and_saved_whole(tmp_path: Path) -> None:
    path, _ = session(tmp_path)
    original = path.read_bytes()
    path.write_bytes(original + bytes(4096))
    with SessionStore.open(path) as store:
        torn = store.recovery.torn_tail
        assert torn is not None and torn.all_nul
        assert torn.saved_bytes == torn.length == 4096
        assert Path(torn.saved_to or "").read_bytes() == bytes(4096)
    assert path.read_bytes() == original


def test_a_read_only_open_reports_an_over_long_tail_and_changes_nothing(tmp_path: Path) -> None:
    path, ids = session(tmp_path)
    offset = with_sparse_tail(path, b"", 100 * MB)
    with SessionStore.open(path, readonly=True) as store:
        torn = store.recovery.torn_tail
        assert torn is not None and torn.all_nul
        assert (torn.offset, torn.length, torn.saved_to, torn.saved_bytes) == (
            offset,
            100 * MB,
            None,
            0,
        )
        assert [record.id for record in store.records()] == ids
    assert path.stat().st_size == offset + 100 * MB
    assert not list(tmp_path.glob("*.corrupt*"))


def test_an_over_long_line_in_the_middle_is_reported_and_left_in_place(tmp_path: Path) -> None:
    path, ids = session(tmp_path)
    # A valid entry, but longer than any line sessiond reads: damage, not an entry.
    long_line = (
        json.dumps(
            {"type": "message", "id": "toolong1", "parentId": ids[-1], "message": {"role": "user"}}
        ).encode()[:-2]
        + b',"content":"'
        + b"x" * (MAX_LINE_BYTES + 10)
        + b'"}}'
    )
    offset = path.stat().st_size
    with open(path, "ab") as handle:
        handle.write(long_line + b"\n")
    with SessionStore.open(path) as store:
        (damaged,) = store.recovery.damaged_lines
        assert (damaged.line, damaged.offset, damaged.length) == (4, offset, len(long_line))
        assert "longer than" in damaged.reason
        assert damaged.preview.startswith('{"type": "message", "id": "toolong1"')
        assert not store.has_entry("toolong1") and store.leaf_id == ids[-1]
        after = store.append(user("after the long line"))
    with open(path, "rb") as handle:
        handle.seek(offset)
        assert handle.read(len(long_line) + 1) == long_line + b"\n"
    with SessionStore.open(path, readonly=True) as again:
        assert again.leaf_id == after.id and len(again.recovery.damaged_lines) == 1


def test_a_first_line_longer_than_the_limit_is_not_a_session_file(tmp_path: Path) -> None:
    path = tmp_path / "huge.jsonl"
    start = b'{"type":"session","version":3,"id":"s","cwd":"/"'
    path.write_bytes(start + b" " * MAX_LINE_BYTES)
    with pytest.raises(InvalidSessionFileError) as caught:
        SessionStore.open(path, readonly=True)
    assert caught.value.details["reason"] == "notASessionFile"
    assert f"{len(start) + MAX_LINE_BYTES} bytes long" in caught.value.message


def test_an_entry_longer_than_the_limit_is_not_appended(tmp_path: Path) -> None:
    path, ids = session(tmp_path)
    size = path.stat().st_size
    with SessionStore.open(path) as store:
        with pytest.raises(InvalidEntryError) as caught:
            store.append(user("y" * MAX_LINE_BYTES))
        assert caught.value.details["reason"] == "tooLarge"
        assert store.leaf_id == ids[-1]
    assert path.stat().st_size == size


def test_migration_holds_no_more_than_a_few_chunks(tmp_path: Path) -> None:
    # A v1 file of 77 MB: the whole file as lines and parsed objects took 430 MB.
    text = "z" * 10_000
    lines = [json.dumps({"type": "session", "id": "old", "timestamp": "t", "cwd": "/p"})]
    lines += [
        json.dumps(
            {"type": "message", "timestamp": "t", "message": {"role": "user", "content": text}}
        )
        for _ in range(8000)
    ]
    data = ("\n".join(lines) + "\n").encode()
    path = tmp_path / "v1.jsonl"
    path.write_bytes(data)
    tracemalloc.start()
    try:
        store = SessionStore.open(path, readonly=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    with store:
        assert store.recovery.migrated_from_version == 1 and store.entry_count == 8000
        last = store.records()[-1]
        assert store.get_branch(last.id)[0].id == store.records()[0].id
        assert b'"content":"' + text.encode() + b'"}' in store.raw_line(last)
    assert path.read_bytes() == data
    assert peak < len(data) // 2, f"{peak / MB:.0f} MB held to migrate {len(data) / MB:.0f} MB"


def test_a_rewrite_copies_an_over_long_line_through_without_holding_it(tmp_path: Path) -> None:
    path, ids = session(tmp_path)
    offset = with_sparse_tail(path, b"", 100 * MB)
    with open(path, "ab") as handle:
        handle.write(b"\n")
    with SessionStore.open(path) as store:
        (damaged,) = store.recovery.damaged_lines
        assert (damaged.offset, damaged.length) == (offset, 100 * MB)
        after = store.append(user("after the long line"))
        replacement = msgspec.json.decode(store.raw_line(store.record(ids[0])))
        replacement["message"]["content"] = "rewritten"
        tracemalloc.start()
        try:
            store.rewrite_entries({ids[0]: replacement})
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert store.get_entry(after.id) == after
    assert peak < 2 * MAX_LINE_BYTES, f"{peak / MB:.0f} MB held to rewrite past a 100 MB line"
    with SessionStore.open(path, readonly=True) as again:
        assert [record.id for record in again.records()] == [*ids, after.id]
        assert b'"content":"rewritten"' in again.raw_line(again.record(ids[0]))
        (damaged,) = again.recovery.damaged_lines
        assert damaged.length == 100 * MB and "all NUL bytes" in damaged.reason
