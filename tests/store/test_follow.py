"""Following a session file that another program writes while the store holds it."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from sessiond.errors import BusyError, ConflictError, FileChangedError
from sessiond.settings import StorageSettings
from sessiond.store import file_watch
from sessiond.store.catching_up import line_numbers, read_changes
from sessiond.store.records import EntryRecord
from sessiond.store.session import SessionStore

from .helpers import assistant, stored_line, user

NO_INDEX = StorageSettings(persistent_index=False)


def _other_program_appends(path: Path, data: bytes) -> None:
    with path.open("ab") as handle:
        handle.write(data)


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    created = SessionStore.create(str(tmp_path), path=tmp_path / "s.jsonl")
    created.append(user("first question"))
    created.append(assistant("first answer"))
    return created


def _assert_matches_a_fresh_open(store: SessionStore) -> None:
    """What the store holds is what a new open of the file finds."""
    with SessionStore.open(store.path, readonly=True, storage=NO_INDEX) as fresh:
        assert [(r.id, r.parent_id, r.offset, r.length) for r in fresh.records()] == [
            (r.id, r.parent_id, r.offset, r.length) for r in store.records()
        ]
        assert fresh.recovery.torn_tail is None and not fresh.recovery.damaged_lines


def test_nothing_changed_costs_nothing_and_says_nothing(store: SessionStore) -> None:
    assert store.follow() is None
    os.utime(store.path)  # a touch changes the times, not the lines
    assert store.follow() is None


def test_lines_another_program_appends_are_taken_in(store: SessionStore) -> None:
    leaf = store.leaf_id
    _other_program_appends(
        store.path,
        stored_line("0the0001", leaf, "from pi") + stored_line("0the0002", "0the0001", "again"),
    )
    followed = store.follow()
    assert followed is not None
    assert followed.reason == "fileAppended"
    assert followed.appended_ids == ["0the0001", "0the0002"]
    assert store.leaf_id == "0the0002"
    assert [m.content for m in store.build_context().messages[-2:]] == ["from pi", "again"]  # type: ignore[union-attr]
    # The next append through the store goes under the other program's last entry.
    entry = store.append(user("mine"))
    assert entry.parent_id == "0the0002"
    _assert_matches_a_fresh_open(store)


def test_an_append_looks_at_the_file_first(store: SessionStore) -> None:
    leaf = store.leaf_id
    _other_program_appends(store.path, stored_line("0the0001", leaf, "from pi"))
    entry = store.append(user("mine"))  # no follow() in between
    assert entry.parent_id == "0the0001"
    _assert_matches_a_fresh_open(store)


def test_an_expected_leaf_that_moved_is_a_conflict(store: SessionStore) -> None:
    leaf = store.leaf_id
    _other_program_appends(store.path, stored_line("0the0001", leaf, "from pi"))
    with pytest.raises(ConflictError):
        store.append_entries([user("mine")], expected_leaf_id=leaf)
    store.follow()
    # Naming the new leaf works.
    store.append_entries([user("mine")], expected_leaf_id="0the0001")
    _assert_matches_a_fresh_open(store)


def test_an_unfinished_line_is_waited_for_not_cut(store: SessionStore) -> None:
    leaf = store.leaf_id
    line = stored_line("0the0001", leaf, "being written")
    _other_program_appends(store.path, line[:30])
    assert store.follow() is None
    with pytest.raises(BusyError) as raised:
        store.append(user("mine"))
    assert raised.value.details["reason"] == "fileBeingWritten"
    assert store.path.read_bytes().endswith(line[:30])  # left alone
    _other_program_appends(store.path, line[30:])
    followed = store.follow()
    assert followed is not None and followed.appended_ids == ["0the0001"]
    assert store.append(user("mine")).parent_id == "0the0001"
    _assert_matches_a_fresh_open(store)


def test_a_line_left_unfinished_past_the_grace_is_cut_off_when_appending(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_watch, "UNFINISHED_GRACE_S", 0.0)
    leaf = store.leaf_id
    torn = stored_line("0the0001", leaf, "its writer crashed")[:40]
    _other_program_appends(store.path, torn)
    store.follow()
    entry = store.append(user("mine"))
    assert entry.parent_id == leaf
    saved = store.path.with_name(store.path.name + ".corrupt")
    assert saved.read_bytes() == torn
    assert store.recovery.torn_tail is not None and store.recovery.torn_tail.saved_to == str(saved)
    _assert_matches_a_fresh_open(store)


def test_a_replacement_with_invalid_utf8_on_the_path_is_read_as_an_open_reads_it(
    store: SessionStore,
) -> None:
    """The reread is made ready in a worker thread; its lines are read back there as the
    store reads them, so bytes that are not UTF-8 are read as pi reads them, not refused."""
    header, question, answer = store.path.read_bytes().split(b"\n")[:3]
    damaged = answer.replace(b'"first answer"', b'"first \xff answer"', 1)
    assert damaged != answer
    temporary = store.path.with_name("tmp")
    temporary.write_bytes(b"\n".join([header, question, damaged]) + b"\n")
    os.replace(temporary, store.path)
    followed = store.follow()
    assert followed is not None and followed.reason == "fileRewritten"
    last = store.records()[-1]
    assert last.id in store.recovery.invalid_utf8_entries
    assert store.get_branch()[-1].id == last.id


@pytest.mark.parametrize("how", ["atomic replacement", "in-place rewrite", "truncation"])
def test_a_replaced_or_rewritten_file_is_read_again(store: SessionStore, how: str) -> None:
    data = store.path.read_bytes()
    header = data.split(b"\n", 1)[0] + b"\n"
    other = (
        header
        + stored_line("0new0001", None, "rewritten by pi")
        + stored_line("0new0002", "0new0001", "x")
    )
    if how == "atomic replacement":
        temporary = store.path.with_name("tmp")
        temporary.write_bytes(other)
        os.replace(temporary, store.path)
    elif how == "in-place rewrite":
        with store.path.open("r+b") as handle:
            handle.truncate(0)
            handle.write(other + b" " * (len(data) - len(other) + 100) + b"\n")
    else:
        os.truncate(store.path, len(header))
    followed = store.follow()
    assert followed is not None and followed.reason == "fileRewritten"
    expected = [] if how == "truncation" else ["0new0001", "0new0002"]
    assert [r.id for r in store.records()] == expected
    entry = store.append(user("after the rewrite"))
    assert entry.parent_id == (expected[-1] if expected else None)
    _assert_matches_a_fresh_open(store)


def _overwrite(path: Path, offset: int, data: bytes) -> None:
    with path.open("r+b") as handle:
        handle.seek(offset)
        handle.write(data)


def test_a_reread_begun_before_a_line_was_found_changed_does_not_answer_for_it(
    tmp_path: Path,
) -> None:
    """The retry after ``fileChanged`` sees the change, whatever was being read then: a
    whole read planned and done before the line was found changed (a catch-up in a worker
    thread) may have passed that line before it changed, so taking it leaves the
    suspicion standing, and the next look reads the file again."""
    store = SessionStore.create(str(tmp_path), path=tmp_path / "s.jsonl", storage=NO_INDEX)
    ids = [store.append(user(f"turn {turn} " + "word " * 200)).id for turn in range(12)]
    ids.append(store.append(assistant("the last answer " + "word " * 200)).id)
    data = store.path.read_bytes()
    # Another program changes the last line in place: the look sees it (its last bytes).
    last = data.rindex(b"word ")
    _overwrite(store.path, last, b"Word ")
    plan = store.plan_changes()
    assert plan is not None and plan.verdict == "replaced"
    changes = read_changes(plan)  # the worker's whole read, done
    # Then it overwrites a middle line, where no look can see it; a client reads it.
    middle = ids[3]
    at = data.index(b"word ", store.record(middle).offset)
    _overwrite(store.path, at, b"\x00")
    with pytest.raises(FileChangedError):
        store.raw_line(store.record(middle))
    taken = store.take_changes(changes)  # the catch-up ends
    assert taken is not None and taken.reason == "fileRewritten"
    assert store.has_entry(middle)  # that read saw the line as it was
    followed = store.follow()  # the retry's look
    assert followed is not None and followed.reason == "fileRewritten"
    assert not store.has_entry(middle)
    start = store.path.read_bytes().rindex(b"\n", 0, at) + 1
    assert [line.offset for line in store.recovery.damaged_lines] == [start]
    assert [entry.id for entry in store.entries()] == [i for i in ids if i != middle]
    assert store.follow() is None
    store.close()


def test_a_second_session_header_another_program_appends_is_numbered_on_from_the_known_end(
    store: SessionStore,
) -> None:
    data = store.path.read_bytes()
    header = data.split(b"\n", 1)[0] + b"\n"
    known = data.count(b"\n")
    leaf = store.leaf_id
    _other_program_appends(
        store.path,
        stored_line("0the0001", leaf, "a") + header + stored_line("0the0002", "0the0001", "b"),
    )
    followed = store.follow()  # in place: a few bytes
    assert followed is not None and followed.appended_ids == ["0the0001", "0the0002"]
    [damaged] = store.recovery.damaged_lines
    assert damaged.reason == "a second session header"
    assert (damaged.line, damaged.offset) == (
        known + 2,
        len(data) + len(stored_line("0the0001", leaf, "a")),
    )


def test_line_numbers_go_on_from_a_known_place_without_reading_before_it(tmp_path: Path) -> None:
    path = tmp_path / "f"
    # Before byte 1000: what the caller already counted (not lines at all, here).
    path.write_bytes(b"\0" * 1000 + b"one\ntwo\nthree\n")
    records = [
        EntryRecord(id=name, type="session", parent_id=None, timestamp="", offset=offset, length=3)
        for name, offset in (("a", 1000), ("c", 1008))
    ]
    fd = os.open(path, os.O_RDONLY)
    try:
        assert line_numbers(fd, records, 1000, 41) == [42, 44]
    finally:
        os.close(fd)


def test_two_writers_at_once_never_damage_the_file_or_the_index(tmp_path: Path) -> None:
    """Another program appends whole lines in a tight loop while the store appends: every
    line stays whole, and the store's index matches the file exactly afterwards."""
    store = SessionStore.create(str(tmp_path), path=tmp_path / "s.jsonl")
    store.append(user("q"))
    store.append(assistant("a"))
    root = store.leaf_id
    stop = threading.Event()

    def other_program() -> None:
        fd = os.open(store.path, os.O_WRONLY | os.O_APPEND)
        try:
            for n in range(100_000):
                if stop.is_set():
                    return
                os.write(fd, stored_line(f"{n:08x}", root, "other"))
        finally:
            os.close(fd)

    writer = threading.Thread(target=other_program)
    writer.start()
    mine: list[str] = []
    try:
        for n in range(400):
            try:
                mine.append(store.append(user(f"mine {n}")).id)
            except BusyError:
                continue  # caught the other program between its bytes; try the next
    finally:
        stop.set()
        writer.join()
    store.follow()
    _assert_matches_a_fresh_open(store)
    assert all(store.has_entry(entry_id) for entry_id in mine)
    store.close()
