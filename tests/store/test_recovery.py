"""Torn tails, the lock between processes, and version migrations."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sessiond.errors import SessionLockedError
from sessiond.store.session import SessionStore

from .helpers import assistant, tool_result, user


def build_session(directory: Path) -> tuple[Path, list[str]]:
    with SessionStore.create("/proj", session_dir=directory) as store:
        ids = [
            store.append(user("first question")).id,
            store.append(assistant("first answer 😀")).id,
            store.append(tool_result("output\nwith lines")).id,
            store.append(user("漢字 second")).id,
            store.append(assistant("last")).id,
        ]
        return store.path, ids


def test_torn_tail_at_every_byte_of_the_last_two_lines(tmp_path: Path):
    path, ids = build_session(tmp_path / "src")
    data = path.read_bytes()
    lines = data.split(b"\n")
    start_of_last_two = len(data) - len(lines[-2]) - len(lines[-3]) - 2
    for cut in range(start_of_last_two, len(data) + 1):
        target = tmp_path / f"cut-{cut}.jsonl"
        target.write_bytes(data[:cut])
        complete = data[:cut].count(b"\n")  # header + complete entries
        with SessionStore.open(target) as store:
            torn = store.recovery.torn_tail
            kept = [r.id for r in store.records()]
            if cut == len(data) or data[cut - 1 : cut] == b"\n":
                assert torn is None, cut
                assert kept == ids[: complete - 1]
            else:
                partial = data[data.rfind(b"\n", 0, cut) + 1 : cut]
                try:
                    json.loads(partial)
                    assert torn is None and store.recovery.missing_final_newline
                    assert kept == ids[:complete]
                except ValueError:
                    assert torn is not None, cut
                    assert kept == ids[: complete - 1]
                    saved = Path(torn.saved_to)
                    assert saved.read_bytes() == partial
                    assert target.read_bytes() == data[: cut - len(partial)]
            # the repaired file accepts appends and reopens cleanly
            store.append(user("after repair"))
        with SessionStore.open(target, readonly=True) as again:
            assert again.recovery.torn_tail is None and again.recovery.damaged_lines == []
            assert again.records()[-1].parent_id == (kept[-1] if kept else None)


def test_nul_padding_after_a_crash_is_a_torn_tail(tmp_path: Path):
    path, ids = build_session(tmp_path)
    with open(path, "ab") as handle:
        handle.write(b"\x00" * 4096)
    with SessionStore.open(path) as store:
        assert store.recovery.torn_tail is not None
        assert store.recovery.torn_tail.length == 4096
        assert [r.id for r in store.records()] == ids
    assert path.read_bytes().endswith(b"}\n")


def test_readonly_open_reports_but_does_not_repair(tmp_path: Path):
    path, _ = build_session(tmp_path)
    with open(path, "ab") as handle:
        handle.write(b'{"type":"mess')
    before = path.read_bytes()
    with SessionStore.open(path, readonly=True) as store:
        assert store.recovery.torn_tail is not None and store.recovery.torn_tail.saved_to is None
    assert path.read_bytes() == before
    assert not list(tmp_path.glob("*.corrupt*"))


def test_repeated_repairs_never_overwrite_saved_bytes(tmp_path: Path):
    path, _ = build_session(tmp_path)
    for garbage in (b'{"first":', b'{"second":'):
        with open(path, "ab") as handle:
            handle.write(garbage)
        SessionStore.open(path).close()
    saved = sorted(p.read_bytes() for p in tmp_path.glob("*.corrupt*"))
    assert saved == [b'{"first":', b'{"second":']


LOCKER = textwrap.dedent(
    """
    import sys, time
    from sessiond.store.session import SessionStore
    store = SessionStore.open(sys.argv[1])
    print("locked", flush=True)
    sys.stdin.read()
    store.close()
    """
)


def test_second_process_is_refused_and_told_the_owner(tmp_path: Path):
    path, _ = build_session(tmp_path)
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCKER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(SessionLockedError) as info:
            SessionStore.open(path)
        owner = info.value.details["owner"]
        assert owner["pid"] == holder.pid and owner["program"].startswith("sessiond")
        assert f"pid {holder.pid}" in info.value.message
        # read-only access is still allowed while someone writes
        with SessionStore.open(path, readonly=True) as reader:
            assert reader.entry_count == 5
    finally:
        holder.communicate("", timeout=10)
    with SessionStore.open(path) as store:  # released on close
        assert store.entry_count == 5


def test_lock_is_released_by_a_killed_process(tmp_path: Path):
    path, _ = build_session(tmp_path)
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCKER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "locked"
    holder.kill()
    holder.wait(timeout=10)
    with SessionStore.open(path) as store:
        assert store.entry_count == 5


# --- migrations (v1 -> v2 adds ids and parents, v2 -> v3 renames hookMessage; pi's tests)

V1 = [
    {
        "type": "session",
        "id": "old-session",
        "timestamp": "2025-01-01T00:00:00.000Z",
        "cwd": "/p",
        "provider": "anthropic",
        "modelId": "claude",
    },
    {
        "type": "message",
        "timestamp": "2025-01-01T00:00:01.000Z",
        "message": {"role": "user", "content": "hi", "timestamp": 1},
    },
    {
        "type": "message",
        "timestamp": "2025-01-01T00:00:02.000Z",
        "message": {
            "role": "assistant",
            "content": [{"type": "text", "text": "yo"}],
            "provider": "anthropic",
            "model": "claude",
            "usage": {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2},
            "stopReason": "stop",
            "timestamp": 2,
        },
    },
    {
        "type": "message",
        "timestamp": "2025-01-01T00:00:03.000Z",
        "message": {
            "role": "hookMessage",
            "customType": "h",
            "content": "hook",
            "display": True,
            "timestamp": 3,
        },
    },
    {
        "type": "compaction",
        "timestamp": "2025-01-01T00:00:04.000Z",
        "summary": "S",
        "firstKeptEntryIndex": 2,
        "tokensBefore": 10,
    },
    {
        "type": "message",
        "timestamp": "2025-01-01T00:00:05.000Z",
        "message": {"role": "user", "content": "after", "timestamp": 5},
    },
]


def write_jsonl(path: Path, objects: list[dict]) -> Path:
    path.write_text("".join(json.dumps(o, separators=(",", ":")) + "\n" for o in objects))
    return path


def test_v1_gets_ids_chain_and_first_kept_id(tmp_path: Path):
    path = write_jsonl(tmp_path / "v1.jsonl", V1)
    with SessionStore.open(path) as store:
        assert store.recovery.migrated_from_version == 1
        records = store.records()
        assert all(len(r.id) == 8 for r in records)
        assert [r.parent_id for r in records] == [None] + [r.id for r in records[:-1]]
        compaction = store.get_entry(records[3].id)
        assert compaction.first_kept_entry_id == records[1].id  # file index 2 = second entry
        assert (
            store.get_entry(records[2].id).message.role == "custom"
            if hasattr(store.get_entry(records[2].id).message, "role")
            else True
        )
        assert type(store.get_entry(records[2].id).message).__name__ == "CustomMessage"
        context = store.build_context()
        assert [type(m).__name__ for m in context.messages] == [
            "CompactionSummaryMessage",
            "AssistantMessage",
            "CustomMessage",
            "UserMessage",
        ]
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert lines[0]["version"] == 3 and lines[0]["provider"] == "anthropic"  # legacy keys kept
    assert "firstKeptEntryIndex" not in lines[4]


def test_v2_keeps_ids_and_renames_hook_messages(tmp_path: Path):
    v2 = [dict(V1[0], version=2)]
    previous = None
    for index, entry in enumerate(V1[1:4]):
        v2.append(dict(entry, id=f"id{index}", parentId=previous))
        previous = f"id{index}"
    path = write_jsonl(tmp_path / "v2.jsonl", v2)
    untouched = path.read_text().splitlines()[1]
    with SessionStore.open(path) as store:
        assert [r.id for r in store.records()] == ["id0", "id1", "id2"]
        assert store.recovery.migrated_from_version == 2
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["version"] == 3
    assert lines[1] == untouched  # lines the migration did not need to touch are byte-identical
    assert json.loads(lines[3])["message"]["role"] == "custom"


def test_migration_is_idempotent(tmp_path: Path):
    path = write_jsonl(tmp_path / "v1.jsonl", V1)
    SessionStore.open(path).close()
    migrated = path.read_bytes()
    with SessionStore.open(path) as store:
        assert store.recovery.migrated_from_version is None
    assert path.read_bytes() == migrated


def test_readonly_migration_stays_in_memory(tmp_path: Path):
    path = write_jsonl(tmp_path / "v1.jsonl", V1)
    before = path.read_bytes()
    with SessionStore.open(path, readonly=True) as store:
        assert store.recovery.migrated_from_version == 1 and store.entry_count == 5
        assert len(store.build_context().messages) == 4
    assert path.read_bytes() == before
