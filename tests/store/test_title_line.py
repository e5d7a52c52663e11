"""oh-my-pi's title line in the store: opening, the index, following, renaming, rewrites."""

from __future__ import annotations

import json
import os
from pathlib import Path

import msgspec
import pytest

from sessiond.core.entries import SessionInfoEntry, TitleChangeEntry
from sessiond.core.messages import CustomMessage, UserMessage
from sessiond.core.title_slot import TITLE_SLOT_BYTES, serialize_title_slot
from sessiond.errors import InvalidEntryError, InvalidParamsError, InvalidSessionFileError
from sessiond.settings import StorageSettings
from sessiond.store.opening import read_session
from sessiond.store.rewriting import rewrite_title
from sessiond.store.session import SessionStore

from .helpers import assistant, omp_entry, omp_file, user

MESSAGE = {"role": "user", "content": "hello", "timestamp": 1}
ANSWER = assistant("hi")["message"]


def two_turns(path: Path, **options: object) -> Path:
    return omp_file(
        path,
        [
            omp_entry("message", "aaaa0001", None, message=MESSAGE),
            omp_entry("message", "aaaa0002", "aaaa0001", message=ANSWER),
        ],
        **options,  # type: ignore[arg-type]
    )


def test_an_oh_my_pi_file_opens_with_its_name_and_dialect(tmp_path: Path):
    path = two_turns(tmp_path / "s.jsonl", title="Fix the slug")
    with SessionStore.open(path, readonly=True) as store:
        assert store.dialect.name == "oh-my-pi"
        assert store.name == "Fix the slug"
        assert store.header.id.startswith("0190")
        assert store.leaf_id == "aaaa0002"
        assert store.records()[0].offset > TITLE_SLOT_BYTES
        first = store.build_context().messages[0]
        assert isinstance(first, UserMessage) and first.content == "hello"


def test_an_empty_title_is_no_name(tmp_path: Path):
    with SessionStore.open(two_turns(tmp_path / "s.jsonl", title=""), readonly=True) as store:
        assert store.name is None


@pytest.mark.parametrize(
    ("first", "says"),
    [
        ({"type": "title", "v": 2, "title": "x", "updatedAt": "t", "pad": ""}, '"v" is not 1'),
        ({"type": "title", "v": 1, "title": 3, "updatedAt": "t", "pad": ""}, '"title"'),
        ({"type": "title", "v": 1, "title": "x", "pad": ""}, '"updatedAt"'),
        ({"type": "title", "v": 1, "title": "x", "updatedAt": "t"}, '"pad"'),
        (
            {"type": "title", "v": 1, "title": "x", "source": "bot", "updatedAt": "t", "pad": ""},
            '"source"',
        ),
        (
            {"type": "title", "v": 1, "title": "x", "source": None, "updatedAt": "t", "pad": ""},
            '"source" is null',
        ),
    ],
)
def test_a_bad_title_line_is_a_clear_error(tmp_path: Path, first: dict[str, object], says: str):
    path = tmp_path / "s.jsonl"
    header = {"type": "session", "version": 3, "id": "x", "timestamp": "t", "cwd": "/"}
    path.write_bytes(msgspec.json.encode(first) + b"\n" + msgspec.json.encode(header) + b"\n")
    with pytest.raises(InvalidSessionFileError) as caught:
        SessionStore.open(path, readonly=True)
    assert caught.value.details["reason"] == "invalidTitleLine"
    assert says in caught.value.message


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"\n" + serialize_title_slot("t", "user", "u"), "invalidTitleLine"),  # not first
        (serialize_title_slot("t", "user", "u") * 2, "invalidTitleLine"),  # twice
        (serialize_title_slot("t", "user", "u"), "notASessionFile"),  # no header after it
        (serialize_title_slot("t", "user", "u") + b'{"type":"message"}\n', "notASessionFile"),
    ],
)
def test_a_title_line_out_of_place_is_a_clear_error(tmp_path: Path, content: bytes, reason: str):
    path = tmp_path / "s.jsonl"
    path.write_bytes(content)
    with pytest.raises(InvalidSessionFileError) as caught:
        SessionStore.open(path, readonly=True)
    assert caught.value.details["reason"] == reason


def test_the_persistent_index_keeps_the_title_line_and_reads_it_afresh(tmp_path: Path):
    index = tmp_path / "index"
    path = two_turns(tmp_path / "s.jsonl", title="First")
    assert not read_session(path, readonly=True, index_dir=index).from_index
    # Another program renames the session in place (oh-my-pi's way), then appends.
    with open(path, "r+b") as handle:
        handle.write(serialize_title_slot("Second", "user", "2026-09-27T10:00:00.000Z"))
    line = omp_entry("message", "aaaa0003", "aaaa0002", message=MESSAGE)
    with open(path, "ab") as handle:
        handle.write(msgspec.json.encode(line) + b"\n")
    read = read_session(path, readonly=True, index_dir=index)
    assert read.from_index
    assert read.result.title_slot is not None and read.result.title_slot.title == "Second"
    assert [r.id for r in read.result.records] == ["aaaa0001", "aaaa0002", "aaaa0003"]


def test_the_index_is_not_used_when_the_title_line_changed_length(tmp_path: Path):
    index = tmp_path / "index"
    path = two_turns(tmp_path / "s.jsonl")
    read_session(path, readonly=True, index_dir=index)
    data = path.read_bytes()
    path.write_bytes(b'{"type":"title","v":1,"title":"x","updatedAt":"t","pad":""}\n' + data[256:])
    read = read_session(path, readonly=True, index_dir=index)
    assert not read.from_index
    assert read.result.title_slot is not None and read.result.title_slot.title == "x"


def test_renaming_writes_title_change_and_the_title_line_in_place(tmp_path: Path):
    path = two_turns(tmp_path / "s.jsonl", title="Old")
    before = path.read_bytes()
    with SessionStore.open(path) as store:
        entry = store.set_name("  New\tname \x07 now ")
        assert isinstance(entry, TitleChangeEntry)
        assert (entry.title, entry.source, entry.previous_title) == ("New name now", "user", "Old")
        assert store.name == "New name now"
        assert store.leaf_id == entry.id
        assert store.build_context().messages  # the view still reads the moved-on file
    after = path.read_bytes()
    assert after[:TITLE_SLOT_BYTES] == serialize_title_slot("New name now", "user", entry.timestamp)
    assert after[TITLE_SLOT_BYTES : len(before)] == before[TITLE_SLOT_BYTES:]
    line = json.loads(after[len(before) :])
    assert list(line) == ["type", "id", "parentId", "timestamp", "title", "source", "previousTitle"]
    with SessionStore.open(path, readonly=True) as reopened:
        assert reopened.name == "New name now"


def test_a_name_that_cleans_to_nothing_is_refused(tmp_path: Path):
    with (
        SessionStore.open(two_turns(tmp_path / "s.jsonl")) as store,
        pytest.raises(InvalidParamsError),
    ):
        store.set_name("\x01\x02  ")


def test_renaming_a_title_line_of_another_length_rewrites_the_file(tmp_path: Path):
    path = tmp_path / "s.jsonl"
    short = b'{"type":"title","v":1,"title":"x","updatedAt":"t","pad":""}\n'
    body = two_turns(tmp_path / "model.jsonl").read_bytes()[TITLE_SLOT_BYTES:]
    path.write_bytes(short + body)
    with SessionStore.open(path) as store:
        store.set_name("Longer")
        store.append(user("after the rename"))
        context = store.build_context()
        assert [m.content for m in context.messages if isinstance(m, UserMessage)] == [
            "hello",
            "after the rename",
        ]
    data = path.read_bytes()
    assert data[:TITLE_SLOT_BYTES].startswith(b'{"type":"title","v":1,"title":"Longer"')
    assert data[TITLE_SLOT_BYTES : TITLE_SLOT_BYTES + len(body)] == body
    with SessionStore.open(path, readonly=True) as reopened:
        assert reopened.name == "Longer" and reopened.entry_count == 4


def test_a_rename_by_rewrite_can_be_left_for_a_worker_thread(tmp_path: Path):
    """A daemon renames in two steps: the ``title_change`` entry now, the rewrite of the
    file later (in a worker thread, alone on the file); what was appended between them is
    kept, and the name changes when the rewrite is taken."""
    path = tmp_path / "s.jsonl"
    short = b'{"type":"title","v":1,"title":"x","updatedAt":"t","pad":""}\n'
    body = two_turns(tmp_path / "model.jsonl").read_bytes()[TITLE_SLOT_BYTES:]
    path.write_bytes(short + body)
    with SessionStore.open(path) as store:
        store.set_name("Later", rewrite_apart=True)
        assert store.title_pending and store.name == "x"
        assert path.read_bytes().startswith(short)
        store.append(user("between the two"))
        plan = store.plan_title()
        assert plan is not None and not store.title_pending
        store.take_title(plan, rewrite_title(plan))
        assert store.name == "Later" and store.plan_title() is None
        store.append(user("after the rename"))
        assert store.follow() is None
        records = [(r.id, r.offset, r.length) for r in store.records()]
    data = path.read_bytes()
    assert data[:TITLE_SLOT_BYTES].startswith(b'{"type":"title","v":1,"title":"Later"')
    with SessionStore.open(path, readonly=True) as reopened:
        assert reopened.name == "Later"
        assert [(r.id, r.offset, r.length) for r in reopened.records()] == records
        texts = [m.content for m in reopened.build_context().messages if isinstance(m, UserMessage)]
        assert texts == ["hello", "between the two", "after the rename"]


def test_another_programs_rename_is_followed(tmp_path: Path):
    path = two_turns(tmp_path / "s.jsonl", title="Old")
    with SessionStore.open(path) as store:
        change = omp_entry("title_change", "aaaa0003", "aaaa0002", title="Theirs", source="user")
        with open(path, "ab") as handle:
            handle.write(msgspec.json.encode(change) + b"\n")
        with open(path, "r+b") as handle:
            handle.write(serialize_title_slot("Theirs", "user", "2026-09-27T10:00:00.000Z"))
        followed = store.follow()
        assert followed is not None and followed.reason == "fileAppended"
        assert store.name == "Theirs"
        store.append(user("mine"))
    with SessionStore.open(path, readonly=True) as reopened:
        assert reopened.name == "Theirs" and reopened.entry_count == 4


def test_pruning_rewrites_keep_the_title_line(tmp_path: Path):
    path = two_turns(tmp_path / "s.jsonl", title="Kept")
    first = path.read_bytes()[:TITLE_SLOT_BYTES]
    with SessionStore.open(path) as store:
        store.rewrite_entries(
            {"aaaa0001": omp_entry("message", "aaaa0001", None, message={**MESSAGE, "x": 1})}
        )
        assert store.name == "Kept"
        store.append(user("after"))
    assert path.read_bytes()[:TITLE_SLOT_BYTES] == first
    with SessionStore.open(path, readonly=True) as reopened:
        assert reopened.entry_count == 3


def test_a_fork_of_an_oh_my_pi_session_is_one(tmp_path: Path):
    path = two_turns(tmp_path / "s.jsonl", title="Forked")
    with SessionStore.open(path) as store, store.fork("aaaa0002") as fork:
        assert fork.dialect.name == "oh-my-pi" and fork.name == "Forked"
        fork_path = fork.path
    with SessionStore.open(fork_path, readonly=True) as reopened:
        assert reopened.dialect.name == "oh-my-pi" and reopened.name == "Forked"
        assert reopened.header.title == "Forked" and reopened.header.title_source == "user"
        assert [r.id for r in reopened.records()] == ["aaaa0001", "aaaa0002"]


def test_each_dialect_takes_its_own_entry_types(tmp_path: Path):
    with SessionStore.open(two_turns(tmp_path / "s.jsonl")) as omp:
        omp.append({"type": "reset_boundary"})
        for refused in (
            {"type": "session_info", "name": "x"},
            {"type": "title_change", "title": "x", "source": "user"},
        ):
            with pytest.raises(InvalidEntryError) as caught:
                omp.append(refused)
            assert caught.value.details["reason"] == "wrongDialect"
    pi = SessionStore.create("/p", session_dir=tmp_path / "pi")
    with pi:
        pi.append(user("hi"))
        with pytest.raises(InvalidEntryError):
            pi.append({"type": "reset_boundary"})
        assert isinstance(pi.set_name("pi name"), SessionInfoEntry)


def test_opening_never_follows_a_title_line_into_the_header(tmp_path: Path):
    """A title line whose JSON hides a newline-free header in its padding is still only a
    title line: the header must be a line of its own."""
    path = tmp_path / "s.jsonl"
    pad = ' {"type":"session"}'
    slot = {"type": "title", "v": 1, "title": "x", "updatedAt": "t", "pad": pad}
    path.write_bytes(msgspec.json.encode(slot) + b"\n")
    with pytest.raises(InvalidSessionFileError):
        SessionStore.open(path, readonly=True)
    assert os.path.getsize(path) > 0


def test_reading_a_persisted_index_without_the_dialect_is_impossible(tmp_path: Path):
    """A closed store's index keeps the title line's length; a reopen through it is
    still oh-my-pi's file."""
    path = two_turns(tmp_path / "s.jsonl", title="Indexed")
    storage = StorageSettings()
    with SessionStore.open(path, storage=storage) as store:
        store.append(user("more"))
    with SessionStore.open(path, readonly=True, storage=storage) as reopened:
        assert reopened.dialect.name == "oh-my-pi" and reopened.name == "Indexed"


def test_recovery_on_an_oh_my_pi_file_keeps_the_title_line(tmp_path: Path):
    path = two_turns(tmp_path / "s.jsonl", title="Kept")
    first = path.read_bytes()[:TITLE_SLOT_BYTES]
    with open(path, "ab") as handle:
        handle.write(b"{not json}\n" + b'{"type":"message","id":"torn"')
    with SessionStore.open(path) as store:
        report = store.recovery
        assert report.torn_tail is not None and report.torn_tail.saved_to
        # lines: the title line, the header, two entries, then the damaged one
        assert [d.line for d in report.damaged_lines] == [5]
        assert store.name == "Kept" and store.entry_count == 2
        store.append(user("after the repair"))
    assert path.read_bytes()[:TITLE_SLOT_BYTES] == first
    with SessionStore.open(path, readonly=True) as reopened:
        assert reopened.entry_count == 3 and reopened.name == "Kept"


def test_an_old_version_behind_a_title_line_migrates_and_keeps_it(tmp_path: Path):
    path = tmp_path / "s.jsonl"
    slot = serialize_title_slot("Old format", "auto", "2026-09-27T09:00:00.000Z")
    header = {"type": "session", "version": 2, "id": "x", "timestamp": "t", "cwd": "/"}
    line = omp_entry(
        "message",
        "aaaa0001",
        None,
        message={"role": "hookMessage", "customType": "c", "content": "hi", "display": True},
    )
    path.write_bytes(slot + msgspec.json.encode(header) + b"\n" + msgspec.json.encode(line) + b"\n")
    with SessionStore.open(path) as store:
        assert store.recovery.migrated_from_version == 2
        assert store.name == "Old format" and store.dialect.name == "oh-my-pi"
        assert isinstance(store.build_context().messages[0], CustomMessage)
    assert path.read_bytes()[:TITLE_SLOT_BYTES] == slot


def test_a_fork_renamed_before_it_is_written_starts_with_the_new_title(tmp_path: Path):
    path = two_turns(tmp_path / "s.jsonl", title="Original")
    with SessionStore.open(path) as store, store.fork("aaaa0001") as fork:
        assert not fork.persisted
        fork.set_name("Forked and renamed")
        fork.append(assistant("now it is written"))
        fork_path = fork.path
    with SessionStore.open(fork_path, readonly=True) as reopened:
        assert reopened.name == "Forked and renamed"
        assert [r.type for r in reopened.records()] == ["message", "title_change", "message"]
    assert fork_path.read_bytes()[:TITLE_SLOT_BYTES].startswith(
        b'{"type":"title","v":1,"title":"Forked and renamed"'
    )


def test_listing_names_an_oh_my_pi_session_by_its_title_line(tmp_path: Path):
    from sessiond.store.listing import list_sessions

    two_turns(tmp_path / "a.jsonl", title="Listed by its title")
    [summary] = list_sessions(tmp_path)
    assert summary.name == "Listed by its title"
    assert summary.first_message == "hello" and summary.entry_count == 2
