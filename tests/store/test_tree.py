"""pi's tree-traversal, label and session-id tests, replayed on the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessiond.core.entries import BranchSummaryEntry, LabelEntry
from sessiond.errors import NotFoundError
from sessiond.store.session import SessionStore

from .helpers import assistant, user


def chain(store: SessionStore, count: int) -> list[str]:
    ids = []
    for index in range(count):
        body = user(f"u{index}") if index % 2 == 0 else assistant(f"a{index}")
        ids.append(store.append(body).id)
    return ids


def test_append_chains_parent_ids_and_moves_the_leaf(store: SessionStore):
    assert store.leaf_id is None
    first = store.append(user("one"))
    assert first.parent_id is None and store.leaf_id == first.id
    second = store.append(assistant())
    assert second.parent_id == first.id and store.leaf_id == second.id
    thinking = store.append({"type": "thinking_level_change", "thinkingLevel": "high"})
    model = store.append({"type": "model_change", "provider": "openai", "modelId": "gpt-4"})
    assert thinking.parent_id == second.id and model.parent_id == thinking.id
    custom = store.append({"type": "custom", "customType": "ext", "data": {"a": 1}})
    assert custom.parent_id == model.id and store.leaf_id == custom.id
    assert len(first.id) == 8 and all(c in "0123456789abcdef" for c in first.id)


def test_get_branch_paths(store: SessionStore):
    assert store.get_branch() == []
    ids = chain(store, 4)
    assert [e.id for e in store.get_branch()] == ids
    assert [e.id for e in store.get_branch(ids[1])] == ids[:2]


def test_branch_moves_leaf_and_new_appends_fork(store: SessionStore):
    ids = chain(store, 3)
    store.branch(ids[1])
    assert store.leaf_id == ids[1]
    forked = store.append(user("other way"))
    assert forked.parent_id == ids[1]
    children = store.get_children(ids[1])
    assert [c.id for c in children] == [ids[2], forked.id]
    tree = store.get_tree()
    assert len(tree) == 1
    node = tree[0].children[0]
    assert node.record.id == ids[1] and [c.record.id for c in node.children] == [ids[2], forked.id]


def test_three_branches_at_one_point(store: SessionStore):
    root = store.append(user("root")).id
    for name in ("a", "b", "c"):
        store.branch(root)
        store.append(user(name))
    assert len(store.get_tree()[0].children) == 3


def test_branch_unknown_id_raises_pis_message(store: SessionStore):
    with pytest.raises(NotFoundError, match=r"^Entry nonexistent not found$"):
        store.branch("nonexistent")


def test_reset_leaf_starts_a_new_root(store: SessionStore):
    chain(store, 2)
    store.reset_leaf()
    assert store.leaf_id is None
    root = store.append(user("again"))
    assert root.parent_id is None
    assert len(store.get_tree()) == 2


def test_branch_with_summary(store: SessionStore):
    ids = chain(store, 4)
    summary = store.branch_with_summary(
        ids[1], "explored things", {"readFiles": ["a"], "modifiedFiles": []}
    )
    assert isinstance(summary, BranchSummaryEntry)
    # pi 1.6: fromId is the leaf the summary comes from (0.73.1 wrote the new position)
    assert summary.parent_id == ids[1] and summary.from_id == ids[3] and store.leaf_id == summary.id
    root_summary = store.branch_with_summary(None, "from the top", from_extension=True)
    assert root_summary.parent_id is None and root_summary.from_id == summary.id
    store.reset_leaf()
    assert store.branch_with_summary(None, "nothing before").from_id == "root"
    assert root_summary.made_by_extension
    with pytest.raises(NotFoundError):
        store.branch_with_summary("missing", "x")


def test_get_entry_and_leaf(store: SessionStore):
    assert store.get_entry("nope") is None
    entry = store.append(user("x"))
    assert store.get_entry(entry.id) == entry


def test_context_follows_current_branch_only(store: SessionStore):
    one = store.append(user("msg1")).id
    two = store.append(assistant("msg2")).id
    store.append(user("msg3"))
    store.branch(two)
    store.append(user("msg4-branch"))
    context = store.build_context()
    assert [
        m.content if isinstance(m.content, str) else m.content[0].text for m in context.messages
    ] == ["msg1", "msg2", "msg4-branch"]
    assert store.build_context(one).entry_ids == [one]


def test_children_sorted_by_timestamp_not_file_order(tmp_path: Path):
    lines = [
        '{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/"}',
        '{"type":"message","id":"r","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"r","timestamp":1}}',
        '{"type":"message","id":"late","parentId":"r","timestamp":"2026-01-01T00:00:09.000Z","message":{"role":"user","content":"l","timestamp":1}}',
        '{"type":"message","id":"early","parentId":"r","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"user","content":"e","timestamp":1}}',
        '{"type":"message","id":"self","parentId":"self","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"user","content":"s","timestamp":1}}',
        '{"type":"message","id":"orphan","parentId":"gone","timestamp":"2026-01-01T00:00:04.000Z","message":{"role":"user","content":"o","timestamp":1}}',
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with SessionStore.open(path, readonly=True) as store:
        roots = store.get_tree()
        assert [node.record.id for node in roots] == ["r", "self", "orphan"]
        assert [c.record.id for c in roots[0].children] == ["early", "late"]
        assert store.leaf_id == "orphan"
        assert store.get_children("self") == []


# --- labels (13.12)


def test_labels_set_clear_last_wins(store: SessionStore):
    target = store.append(user("x")).id
    entry = store.append_label(target, "first")
    assert isinstance(entry, LabelEntry) and entry.target_id == target and entry.label == "first"
    assert store.leaf_id == entry.id  # labels move the leaf, as in pi
    store.append_label(target, "second")
    assert store.get_label(target) == "second"
    store.append_label(target, None)
    assert store.get_label(target) is None
    store.append_label(target, "third")
    store.append_label(target, "")
    assert store.get_label(target) is None


def test_labels_in_tree_nodes_and_not_in_context(store: SessionStore):
    target = store.append(user("x")).id
    store.append_label(target, "checkpoint")
    assert store.get_tree()[0].label == "checkpoint"
    assert len(store.build_context().messages) == 1


def test_label_unknown_target(store: SessionStore):
    with pytest.raises(NotFoundError, match=r"^Entry non-existent not found$"):
        store.append_label("non-existent", "x")


def test_labels_survive_reopen(store: SessionStore):
    target = store.append(user("x")).id
    store.append(assistant())
    store.append_label(target, "kept")
    store.set_name("  Named  ")
    store.close()
    with SessionStore.open(store.path, readonly=True) as reopened:
        assert reopened.get_label(target) == "kept"
        assert reopened.name == "Named"


# --- session ids (13.15)


def test_custom_session_id_in_header_and_file_name(session_dir: Path):
    with SessionStore.create("/p", session_dir=session_dir, session_id="my-id") as store:
        assert store.session_id == "my-id" and store.path.name.endswith("_my-id.jsonl")
        store.append(user("x"))
        store.write_now()
        assert '"id":"my-id"' in store.path.read_text().splitlines()[0]
    with SessionStore.create("/p", session_dir=session_dir) as other:
        assert len(other.session_id) == 36 and other.session_id != "my-id"


def test_file_name_and_directory_follow_pi(tmp_path: Path):
    from sessiond.settings import StorageSettings

    storage = StorageSettings(session_dir=str(tmp_path))
    with SessionStore.create("/home/u/my:proj", storage=storage) as store:
        assert store.path.parent == tmp_path / "--home-u-my-proj--"
        stamp, _, rest = store.path.name.partition("_")
        assert ":" not in stamp and "." not in stamp and stamp.endswith("Z")
        assert rest == f"{store.session_id}.jsonl"


@pytest.mark.parametrize("bad", ["../../etc/x", "a/b", ".hidden", "", "x" * 200, "a..b", "sp ace"])
def test_session_ids_cannot_escape_the_directory(session_dir: Path, bad: str):
    from sessiond.errors import InvalidParamsError

    if bad == "":
        # an empty id means "make one"
        with SessionStore.create("/p", session_dir=session_dir, session_id=bad) as store:
            assert store.session_id
        return
    with pytest.raises(InvalidParamsError, match="invalid session id"):
        SessionStore.create("/p", session_dir=session_dir, session_id=bad)
    assert not any(session_dir.parent.rglob("*.lock"))


def test_allowed_roots(tmp_path: Path):
    from sessiond.errors import NotAllowedError
    from sessiond.paths import check_allowed

    inside = tmp_path / "sessions" / "a.jsonl"
    assert check_allowed(inside, [str(tmp_path / "sessions")]) == inside
    assert check_allowed(Path("/etc/passwd"), None) == Path("/etc/passwd")
    with pytest.raises(NotAllowedError):
        check_allowed(
            tmp_path / "sessions" / ".." / "elsewhere.jsonl", [str(tmp_path / "sessions")]
        )
    link = tmp_path / "sessions" / "link"
    (tmp_path / "sessions").mkdir()
    link.symlink_to("/etc")
    with pytest.raises(NotAllowedError):
        check_allowed(link / "passwd", [str(tmp_path / "sessions")])
