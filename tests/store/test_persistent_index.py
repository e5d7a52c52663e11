"""The persistent index: a reopen reads it and scans only what was appended, and no way
the file can change behind it changes a result."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from sessiond.errors import FileChangedError
from sessiond.settings import StorageSettings
from sessiond.store import index_file
from sessiond.store.opening import read_session
from sessiond.store.session import SessionStore
from sessiond_testkit.generate_session import generate

from .helpers import assistant, stored_line, user

NO_INDEX = StorageSettings(persistent_index=False)


def _session(tmp_path: Path, entries: int = 400, name: str = "s.jsonl") -> Path:
    path = tmp_path / name
    generate(path, entries, branchy=True, compactions=True, seed=5)
    _settle()
    return path


def _view(path: Path, **options: Any) -> dict[str, Any]:
    """Everything an open yields that a client can see, for comparing two opens."""
    with SessionStore.open(path, readonly=True, **options) as store:
        return {
            "records": [
                (r.id, r.type, r.parent_id, r.timestamp, r.role, r.offset, r.length)
                for r in store.records()
            ],
            "leaf": store.leaf_id,
            "labels": dict(store.labels),
            "name": store.name,
            "context": msgspec.json.encode(store.build_context().messages),
            "report": msgspec.json.encode(store.recovery),
        }


def _from_index(path: Path) -> bool:
    read = read_session(path, readonly=True)
    return read.from_index


def _settle() -> None:
    """Let a timestamp tick pass since the file's last change, so that an index written
    now is not racy (see test_a_racy_index_is_not_trusted_for_an_unchanged_size)."""
    time.sleep(0.05)


def test_a_reopen_reads_the_index_and_sees_exactly_what_a_scan_sees(tmp_path: Path) -> None:
    path = _session(tmp_path)
    assert not _from_index(path)  # the first open scans, and leaves an index
    assert index_file.index_path_for(path).exists()
    _settle()
    assert _from_index(path)
    assert _view(path) == _view(path, storage=NO_INDEX)


def test_the_index_lives_in_the_cache_directory_not_beside_the_session(tmp_path: Path) -> None:
    path = _session(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    _view(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    index = index_file.index_path_for(path)
    assert index.parent == Path(os.environ["XDG_CACHE_HOME"]) / "sessiond" / "index"
    assert index.stat().st_mode & 0o777 == 0o600


def test_lines_appended_since_are_scanned_on_top_of_the_index(tmp_path: Path) -> None:
    path = _session(tmp_path)
    _view(path)
    _settle()
    leaf = _view(path)["leaf"]
    with path.open("ab") as handle:
        handle.write(stored_line("aaaa0001", leaf, "one more"))
        handle.write(stored_line("aaaa0002", "aaaa0001", "and another"))
    assert _from_index(path)
    seen = _view(path)
    assert seen["leaf"] == "aaaa0002"
    assert seen == _view(path, storage=NO_INDEX)


def _rows(index: Path) -> bytes:
    """The rows of an index file (what follows its metadata)."""
    data = index.read_bytes()[len(b"sessiond-index\n") :]
    return data[8 + int.from_bytes(data[:8], "little") :]


def test_an_index_brought_up_to_date_holds_what_one_written_whole_would(tmp_path: Path) -> None:
    """After an append, an open copies the rows it read and checked and encodes only the
    new lines': the index is the same as if the file had been scanned whole, and the next
    open trusts it (every check of a fresh index applies to it)."""
    path = _session(tmp_path)
    _view(path)
    _settle()
    index = index_file.index_path_for(path)
    first = _rows(index)
    leaf = _view(path)["leaf"]
    with path.open("ab") as handle:
        handle.write(stored_line("aaaa0001", leaf, "one more"))
        handle.write(stored_line("aaaa0002", "aaaa0001", "and another"))
    _settle()
    read = read_session(path, readonly=True)  # reads the index and the two lines, saves
    assert read.from_index and read.result.indexed_size == path.stat().st_size
    updated = _rows(index)
    assert updated != first and len(updated) > len(first)
    _settle()
    assert _from_index(path)
    assert _view(path) == _view(path, storage=NO_INDEX)
    index.unlink()
    assert not _from_index(path)  # scanned whole, and written whole
    assert _rows(index) == updated


def test_writable_opens_and_appends_keep_the_index_current(tmp_path: Path) -> None:
    path = _session(tmp_path)
    with SessionStore.open(path) as store:
        store.append(user("through the daemon"))
        store.append(assistant("answered"))
        # A figure measured while open is kept for the next open.
        store.leaf_view.estimate_context(_chars_estimator())
        _settle()
    read = read_session(path, readonly=True)
    assert read.from_index and read.result.indexed_size == path.stat().st_size
    assert any(r.tokens_chars is not None for r in read.result.records)
    assert _view(path) == _view(path, storage=NO_INDEX)


def test_closing_right_after_an_append_still_leaves_a_trusted_index(tmp_path: Path) -> None:
    """An index written in the tick of the last append would not be trusted; the store
    writes it a tick later instead, so the next open still reads it."""
    path = _session(tmp_path)
    with SessionStore.open(path) as store:
        store.append(user("the last word, just before closing"))
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        time.sleep(0.05)
        read = read_session(path, readonly=True, use_index=True)
        if read.from_index:
            break
    assert read.from_index and read.result.indexed_size == path.stat().st_size
    assert _view(path) == _view(path, storage=NO_INDEX)


def _chars_estimator() -> Any:
    from sessiond.tiktoken_offline import estimator

    return estimator("chars")


def _rewrite_in_place(path: Path, data: bytes) -> None:
    """What pi's writeFileSync does: truncate and write the same file (same inode)."""
    with path.open("r+b") as handle:
        handle.truncate(0)
        handle.write(data)


@pytest.mark.parametrize(
    "change",
    [
        "pi's in-place rewrite (shorter)",
        "an in-place rewrite that grew",
        "atomic replacement, same bytes",
        "atomic replacement, other bytes",
        "truncation",
        "an edited byte in the middle",
        "an edited byte in the middle, times put back",
        "an edited byte in the middle, then an append",
        "another file copied over it",
    ],
)
def test_no_change_behind_the_index_changes_a_result(tmp_path: Path, change: str) -> None:
    path = _session(tmp_path)
    other = _session(tmp_path, 420, "other.jsonl")
    _view(path)
    _settle()
    data = path.read_bytes()
    middle = len(data) // 2
    # A byte inside a JSON string in the middle, changed to another letter: same size.
    at = data.index(b'"text":"', middle) + len(b'"text":"')
    edited = data[:at] + (b"Q" if data[at : at + 1] != b"Q" else b"R") + data[at + 1 :]
    if change == "pi's in-place rewrite (shorter)":
        # Pruning shortens a tool output in the middle; every later line moves.
        _rewrite_in_place(path, data[:at] + data[at + 5 :])
    elif change == "an in-place rewrite that grew":
        # A rewrite that lengthens a line in the middle, then goes on with an append.
        _rewrite_in_place(
            path, data[:at] + b"longer " + data[at:] + stored_line("bbbb0001", "x", "+")
        )
    elif change == "atomic replacement, same bytes":
        (tmp_path / "new").write_bytes(data)
        os.replace(tmp_path / "new", path)
    elif change == "atomic replacement, other bytes":
        shutil.copyfile(other, tmp_path / "new")
        os.replace(tmp_path / "new", path)
    elif change == "truncation":
        os.truncate(path, data.rindex(b"\n", 0, middle) + 1)
    elif change == "an edited byte in the middle":
        _rewrite_in_place(path, edited)
    elif change == "an edited byte in the middle, times put back":
        status = path.stat()
        _rewrite_in_place(path, edited)
        os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))
    elif change == "an edited byte in the middle, then an append":
        # The sampled windows catch it when the edit falls in one; make sure it does.
        window = (len(data) - 64 * 1024) // 17
        at = data.index(b'"', window) + 1
        edited = data[:at] + (b"Q" if data[at : at + 1] != b"Q" else b"R") + data[at + 1 :]
        _rewrite_in_place(path, edited + stored_line("bbbb0001", "x", "more"))
    elif change == "another file copied over it":
        shutil.copyfile(other, path)
    assert not _from_index(path)
    assert _view(path) == _view(path, storage=NO_INDEX)


def test_an_index_copied_beside_a_copy_of_the_file_is_not_used(tmp_path: Path) -> None:
    path = _session(tmp_path)
    _view(path)
    _settle()
    copy = tmp_path / "copy.jsonl"
    shutil.copyfile(path, copy)
    shutil.copyfile(index_file.index_path_for(path), index_file.index_path_for(copy))
    assert not _from_index(copy)
    assert _view(copy) == _view(copy, storage=NO_INDEX)


@pytest.mark.parametrize(
    "damage", ["empty", "garbage", "cut in half", "records cut off", "a link", "a directory"]
)
def test_a_damaged_index_is_ignored_and_replaced(tmp_path: Path, damage: str) -> None:
    path = _session(tmp_path)
    _view(path)
    index = index_file.index_path_for(path)
    good = index.read_bytes()
    index.unlink()
    if damage == "empty":
        index.write_bytes(b"")
    elif damage == "garbage":
        index.write_bytes(os.urandom(5000))
    elif damage == "cut in half":
        index.write_bytes(good[: len(good) // 2])
    elif damage == "records cut off":
        index.write_bytes(good[:-100])
    elif damage == "a link":
        secret = tmp_path / "secret"
        secret.write_bytes(good)
        index.symlink_to(secret)
    elif damage == "a directory":
        index.mkdir()
    _settle()
    assert _view(path) == _view(path, storage=NO_INDEX)
    if damage == "a directory":
        return  # nothing can be written there; the open still worked
    if damage == "a link":
        assert (tmp_path / "secret").read_bytes() == good  # never written through
        return
    _settle()
    assert _from_index(path)  # rebuilt by the open that ignored it


def _meta(path: Path) -> index_file.IndexMeta:
    data = index_file.index_path_for(path).read_bytes()[len(b"sessiond-index\n") :]
    return msgspec.msgpack.decode(
        data[8 : 8 + int.from_bytes(data[:8], "little")], type=index_file.IndexMeta
    )


def test_a_line_found_changed_is_read_again_by_a_scan_not_from_the_index(tmp_path: Path) -> None:
    """The change the index cannot see (a same-length edit outside its windows, made
    together with an append): a reopen takes in the appended line only and writes the
    index anew, trusted. When the changed line is read, the file
    is read again line by line whatever that index says, so the retry sees the change,
    and the index is written anew from that scan."""
    path = tmp_path / "s.jsonl"
    with SessionStore.create("/p", path=path) as store:
        ids = [store.append(user(f"turn {turn} " + "word " * 800)).id for turn in range(60)]
        ids.append(store.append(assistant("the answer")).id)
    _settle()
    assert _from_index(path)
    windows = [(w.offset, w.offset + w.length) for w in _meta(path).windows]
    with SessionStore.open(path, readonly=True, storage=NO_INDEX) as store:
        target = next(
            record
            for record in store.records()[10:-10]
            if all(
                record.offset + record.length < start or record.offset > end
                for start, end in windows
            )
        )
    data = path.read_bytes()
    at = data.index(b"word ", target.offset)
    with path.open("r+b") as handle:
        handle.seek(at)
        handle.write(b"\x00")
    with path.open("ab") as handle:
        handle.write(stored_line("0appended", ids[-1], "more"))
    _settle()  # (a reopen within the tick would write an index not trusted later)
    with SessionStore.open(path) as store:
        assert _from_index(path)  # the index written at that open is trusted
        with pytest.raises(FileChangedError):
            store.raw_line(target)
        followed = store.follow()
        assert followed is not None and followed.reason == "fileRewritten"
        assert not store.has_entry(target.id)
        assert [line.offset for line in store.recovery.damaged_lines] == [target.offset]
        expected = [i for i in ids if i != target.id] + ["0appended"]
        assert [entry.id for entry in store.entries()] == expected
    assert _view(path) == _view(path, storage=NO_INDEX)


def test_a_racy_index_is_not_trusted_for_an_unchanged_size(tmp_path: Path) -> None:
    """An index written within a timestamp tick of the file's last change proves nothing
    when the size is unchanged: an edit in that tick would keep the same times."""
    path = _session(tmp_path)
    _view(path)
    meta = _meta(path)
    assert not index_file.is_racy(meta)  # written more than a tick after the file was made
    fine = 1_700_000_000_123_456_789
    racy = msgspec.structs.replace(meta, ctime_ns=fine, mtime_ns=fine, written_ns=fine + 5_000_000)
    assert index_file.is_racy(racy)
    settled = msgspec.structs.replace(racy, written_ns=fine + 30_000_000)
    assert not index_file.is_racy(settled)
    whole_seconds = 1_700_000_000_000_000_000
    coarse = msgspec.structs.replace(
        meta, ctime_ns=whole_seconds, mtime_ns=whole_seconds, written_ns=whole_seconds + 10**9
    )
    assert index_file.is_racy(coarse)  # a second later is within two whole-second ticks


def test_read_only_opens_never_write_the_session_and_skip_an_unwritable_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _session(tmp_path)
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the cache directory would be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))
    assert _view(path) == _view(path, storage=NO_INDEX)
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    assert blocked.read_text() == "a file where the cache directory would be"


def test_damage_reports_are_the_same_from_the_index(tmp_path: Path) -> None:
    path = _session(tmp_path)
    data = path.read_bytes().splitlines(keepends=True)
    header = data[0]
    data.insert(5, b"{not json\n")
    data.insert(9, b"\n")
    data.insert(12, header)  # a second header
    data.insert(15, data[14])  # a duplicate id
    path.write_bytes(b"".join(data))
    _settle()
    first = _view(path)
    assert _from_index(path)
    again = _view(path)
    assert again == first == _view(path, storage=NO_INDEX)
    report = msgspec.json.decode(again["report"])
    assert report["damagedLines"] and report["blankLines"] == 1 and report["duplicateIds"]
