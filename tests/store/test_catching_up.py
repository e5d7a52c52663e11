"""Reading others' changes apart from the store (``catching_up``), and the in-place limit.

A daemon reads what another program changed in a worker thread: ``plan`` (one stat),
``read_changes`` (any amount of file work, nothing of the store touched), ``take_changes``
(memory only). Where the store is used, at most ``inline_follow_bytes`` of changes are
read; more is ``CatchUpNeeded``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sessiond.settings import StorageSettings
from sessiond.store.catching_up import read_changes
from sessiond.store.foreign_writes import CatchUpNeeded
from sessiond.store.session import SessionStore

from .helpers import assistant, stored_line, user

NO_INDEX = StorageSettings(persistent_index=False)


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    created = SessionStore.create(str(tmp_path), path=tmp_path / "s.jsonl", storage=NO_INDEX)
    created.append(user("first question"))
    created.append(assistant("first answer"))
    return created


def _appended_by_others(store: SessionStore, count: int, size: int) -> list[str]:
    ids, parent, lines = [], store.leaf_id, []
    for n in range(count):
        entry_id = f"other{n:03d}"
        lines.append(stored_line(entry_id, parent, "x" * size))
        ids.append(entry_id)
        parent = entry_id
    with store.path.open("ab") as handle:
        handle.write(b"".join(lines))
    return ids


def test_changes_read_apart_are_taken_in_as_a_follow_would(store: SessionStore) -> None:
    ids = _appended_by_others(store, 3, 100)
    plan = store.plan_changes()
    assert plan is not None and plan.verdict == "grew"
    taken = store.take_changes(read_changes(plan))
    assert taken is not None and taken.appended_ids == ids
    assert store.leaf_id == ids[-1]
    assert store.plan_changes() is None


def test_changes_read_for_a_store_that_moved_on_are_not_taken(store: SessionStore) -> None:
    _appended_by_others(store, 1, 100)
    plan = store.plan_changes()
    assert plan is not None
    changes = read_changes(plan)
    store.follow()  # the store took them in meanwhile (and so moved on)
    count = store.entry_count
    assert store.take_changes(changes) is None
    assert store.entry_count == count


def test_a_replaced_file_is_read_again_apart(store: SessionStore, tmp_path: Path) -> None:
    other = tmp_path / "other.jsonl"
    with SessionStore.create(str(tmp_path), path=other, storage=NO_INDEX) as replacement:
        replacement.append(user("a different session"))
        replacement.append(assistant("indeed"))
        replacement.append(user("three"))
    os.replace(other, store.path)
    plan = store.plan_changes()
    assert plan is not None and plan.verdict == "replaced"
    taken = store.take_changes(read_changes(plan))
    assert taken is not None and taken.reason == "fileRewritten"
    assert store.entry_count == 3


def test_in_place_no_more_than_the_limit_is_read(store: SessionStore) -> None:
    store.inline_follow_bytes = 1024
    _appended_by_others(store, 1, 100)
    assert store.follow() is not None  # small: read in place
    _appended_by_others(store, 4, 1000)
    with pytest.raises(CatchUpNeeded):
        store.append(user("mine"))
    with pytest.raises(CatchUpNeeded):
        store.follow()
    plan = store.plan_changes()
    assert plan is not None
    store.take_changes(read_changes(plan))
    written = store.append(user("mine"))
    assert store.record(written.id).parent_id == "other003"
    store.close()
