"""Reading and writing session files: lazy writes, round trips, bad files, listing."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import msgspec
import pytest

from sessiond.core.entries import CompactionEntry, UnknownEntry
from sessiond.errors import ConflictError, InvalidEntryError, InvalidSessionFileError, NotFoundError
from sessiond.store.listing import list_sessions
from sessiond.store.session import SessionStore

from .helpers import assistant, tool_result, user

HEADER = '{"type":"session","version":3,"id":"sess-1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/work"}'


def line(entry_id: str, parent: str | None, text: str, role: str = "user", ts: int = 1) -> str:
    parent_json = json.dumps(parent)
    if role == "user":
        message = f'{{"role":"user","content":{json.dumps(text)},"timestamp":{ts}}}'
    else:
        message = (
            f'{{"role":"assistant","content":[{{"type":"text","text":{json.dumps(text)}}}],"api":"a",'
            '"provider":"anthropic","model":"claude","usage":{"input":10,"output":5,"cacheRead":0,'
            f'"cacheWrite":0,"totalTokens":15}},"stopReason":"stop","timestamp":{ts}}}'
        )
    return (
        f'{{"type":"message","id":"{entry_id}","parentId":{parent_json},'
        f'"timestamp":"2026-01-01T00:00:0{ts % 10}.000Z","message":{message}}}'
    )


def write(path: Path, *lines: str, newline: bool = True) -> Path:
    path.write_text("\n".join(lines) + ("\n" if newline else ""), encoding="utf-8")
    return path


# --- lazy first write (nothing on disk before the first assistant message, as pi)


def test_file_appears_with_first_assistant_message(store: SessionStore):
    store.append(user("hi"))
    store.append({"type": "thinking_level_change", "thinkingLevel": "low"})
    assert not store.path.exists() and not store.persisted
    store.append(assistant("hello"))
    assert store.persisted
    lines = store.path.read_text().splitlines()
    assert len(lines) == 4 and json.loads(lines[0])["type"] == "session"
    store.append(user("more"))
    assert len(store.path.read_text().splitlines()) == 5


def test_write_now_forces_the_file(store: SessionStore):
    store.append(user("draft"))
    store.write_now()
    assert store.persisted and len(store.path.read_text().splitlines()) == 2
    store.append(user("second"))
    assert len(store.path.read_text().splitlines()) == 3


def test_session_without_assistant_leaves_no_file(store: SessionStore):
    store.append(user("never answered"))
    store.close()
    assert not store.path.exists()
    assert not Path(str(store.path) + ".lock").exists()


def test_reopen_leaf_is_last_line_not_navigated_position(store: SessionStore):
    a = store.append(user("a")).id
    store.append(assistant())
    last = store.append(user("c")).id
    store.branch(a)
    store.close()
    with SessionStore.open(store.path) as reopened:
        assert reopened.leaf_id == last


def test_batch_is_one_chain_and_validated_whole(store: SessionStore):
    entries = store.append_entries([user("q"), assistant("a"), tool_result("r")])
    assert [e.parent_id for e in entries] == [None, entries[0].id, entries[1].id]
    before = store.path.read_bytes()
    with pytest.raises(InvalidEntryError, match=r"entries\[1\]"):
        store.append_entries([user("fine"), {"type": "message", "message": {"role": "user"}}])
    assert store.path.read_bytes() == before and store.leaf_id == entries[2].id


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ({"type": "bogus"}, "unknown entry type 'bogus'"),
        (
            {"type": "message", "id": "x", "message": {"role": "user", "content": "x"}},
            "`id` is assigned",
        ),
        (
            {
                "type": "message",
                "message": {"role": "compactionSummary", "summary": "s", "tokensBefore": 1},
            },
            "compaction",
        ),
        ({"type": "message"}, "needs a `message` object"),
        ({"type": "compaction", "summary": "s"}, "firstKeptEntryId"),
        ("not an object", "JSON object"),
    ],
)
def test_invalid_entries_are_refused_with_specific_errors(store: SessionStore, body, match):
    with pytest.raises(InvalidEntryError, match=match):
        store.append_entries([body])
    assert store.entry_count == 0


def test_expected_leaf_guards_against_stale_writers(store: SessionStore):
    first = store.append(user("a")).id
    store.append(assistant())
    with pytest.raises(ConflictError) as info:
        store.append_entries([user("late")], expected_leaf_id=first)
    assert info.value.details["leafId"] == store.leaf_id
    store.append_entries([user("ok")], expected_leaf_id=store.leaf_id)


def test_message_timestamp_filled_when_missing(store: SessionStore):
    entry = store.append(user("x"))
    assert isinstance(entry.message.timestamp, int) and entry.message.timestamp > 1.7e12
    kept = store.append(user("y", timestamp=42))
    assert kept.message.timestamp == 42


# --- round trips

PI_LINES = [
    HEADER,
    line("a1", None, "hello"),
    line("a2", "a1", "hi there", role="assistant"),
    '{"type":"thinking_level_change","id":"a3","parentId":"a2","timestamp":"2026-01-01T00:00:03.000Z","thinkingLevel":"high"}',
    '{"type":"model_change","id":"a4","parentId":"a3","timestamp":"2026-01-01T00:00:04.000Z","provider":"openai","modelId":"gpt-5"}',
    '{"type":"model_change","id":"a5","parentId":"a4","timestamp":"2026-01-01T00:00:05.000Z","model":"openai/gpt-5","role":"smol"}',
    '{"type":"custom","id":"a6","parentId":"a5","timestamp":"2026-01-01T00:00:06.000Z","customType":"ext","data":{"deep":[1,{"x":null}]}}',
    '{"type":"custom_message","id":"a7","parentId":"a6","timestamp":"2026-01-01T00:00:07.000Z","customType":"note","content":"n","display":true,"attribution":"user"}',
    '{"type":"label","id":"a8","parentId":"a7","timestamp":"2026-01-01T00:00:08.000Z","targetId":"a1","label":"start"}',
    '{"type":"session_info","id":"a9","parentId":"a8","timestamp":"2026-01-01T00:00:09.000Z","name":"Demo"}',
    '{"type":"service_tier_change","id":"b1","parentId":"a9","timestamp":"2026-01-01T00:00:10.000Z","serviceTier":null}',
    '{"type":"ttsr_injection","id":"b2","parentId":"b1","timestamp":"2026-01-01T00:00:11.000Z","injectedRules":["r1"]}',
    '{"type":"mcp_tool_selection","id":"b3","parentId":"b2","timestamp":"2026-01-01T00:00:12.000Z","selectedToolNames":["t"]}',
    '{"type":"session_init","id":"b4","parentId":"b3","timestamp":"2026-01-01T00:00:13.000Z","systemPrompt":"sp","task":"t","tools":["read"]}',
    '{"type":"mode_change","id":"b5","parentId":"b4","timestamp":"2026-01-01T00:00:14.000Z","mode":"plan","data":{"a":1}}',
    '{"type":"compaction","id":"b6","parentId":"b5","timestamp":"2026-01-01T00:00:15.000Z","summary":"S","firstKeptEntryId":"a2","tokensBefore":1234,"details":{"readFiles":["x"],"modifiedFiles":[]},"fromHook":true,"futureField":{"z":1}}',
    '{"type":"branch_summary","id":"b7","parentId":"b6","timestamp":"2026-01-01T00:00:16.000Z","fromId":"b6","summary":"B","fromExtension":true}',
    '{"type":"future_entry_type","id":"b8","parentId":"b7","timestamp":"2026-01-01T00:00:17.000Z","whatever":[1,2,3]}',
    '{"type":"message","id":"b9","parentId":"b8","timestamp":"2026-01-01T00:00:18.000Z","message":{"role":"toolResult","toolCallId":"c","toolName":"read","content":[{"type":"text","text":"x","cache_control":{"type":"ephemeral"}}],"isError":false,"timestamp":5,"newField":true}}',
    '{"type":"message","id":"c1","parentId":"b9","timestamp":"2026-01-01T00:00:19.000Z","message":{"role":"brandNewRole","stuff":1}}',
]


def test_every_entry_type_reads_and_unknowns_survive_byte_for_byte(tmp_path: Path):
    path = write(tmp_path / "pi.jsonl", *PI_LINES)
    original = path.read_bytes()
    with SessionStore.open(path) as store:
        assert store.recovery.clean
        types = [type(e).__name__ for e in store.entries()]
        # the unknown entry type and the message of an unknown role
        assert types.count("UnknownEntry") == 2
        compaction = store.get_entry("b6")
        assert isinstance(compaction, CompactionEntry) and compaction.made_by_extension
        assert isinstance(store.get_entry("b8"), UnknownEntry)
        assert store.name == "Demo" and store.get_label("a1") == "start"
        # a rewrite that touches one entry leaves every other line byte-identical
        replacement = msgspec.json.decode(store.raw_line(store.record("a1")))
        replacement["message"]["content"] = "HELLO"
        store.rewrite_entries({"a1": replacement})
        assert store.raw_message(store.record("b9")).endswith(b'"newField":true}')
    rewritten = path.read_bytes().split(b"\n")
    assert rewritten[2:] == original.split(b"\n")[2:]
    assert b"HELLO" in rewritten[1]


def test_unknown_message_role_goes_to_context_as_is(tmp_path: Path):
    path = write(tmp_path / "pi.jsonl", *PI_LINES)
    with SessionStore.open(path, readonly=True) as store:
        context = store.build_context()
        assert context.entry_ids[0] == "b6"  # the compaction summary leads
        assert "c1" in context.entry_ids
        assert store.raw_message(store.record("c1")) == b'{"role":"brandNewRole","stuff":1}'


def test_reads_loose_pi_files_without_failing(tmp_path: Path):
    loose = '{"type":"message","id":"x2","parentId":"x1","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"t"},{"type":"weirdBlock"}],"provider":"p","model":"m","stopReason":"stop"}}'
    path = write(tmp_path / "loose.jsonl", HEADER, line("x1", None, "q"), loose)
    with SessionStore.open(path, readonly=True) as store:
        message = store.get_entry("x2").message
        assert message.role == "assistant" if hasattr(message, "role") else True
        assert message.usage.input == 0 and [b.text for b in message.content] == ["t"]


# --- bad files


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "empty"),
        (b"\n\n", "notASessionFile"),
        (b"hello world\n", "notASessionFile"),
        (b'{"type":"message","id":"x"}\n', "notASessionFile"),
        (
            b'{"type":"session","version":9,"id":"x","timestamp":"t","cwd":"/"}\n',
            "unsupportedVersion",
        ),
        (b'{"type":"session","version":"3","id":"x"}\n', "invalidHeader"),
        (b'{"type":"session","version":3,"id":5}\n', "invalidHeader"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe", "invalidUtf8"),
    ],
)
def test_bad_files_get_specific_errors(tmp_path: Path, content: bytes, reason: str):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(InvalidSessionFileError) as info:
        SessionStore.open(path)
    assert info.value.details["reason"] == reason
    assert str(path) in info.value.message
    assert path.read_bytes() == content  # never overwritten, unlike pi


def test_missing_and_directory_paths(tmp_path: Path):
    with pytest.raises(InvalidSessionFileError) as info:
        SessionStore.open(tmp_path / "nope.jsonl")
    assert info.value.details["reason"] == "notFound"
    with pytest.raises(InvalidSessionFileError) as info:
        SessionStore.open(tmp_path, readonly=True)
    assert info.value.details["reason"] == "notAFile"


def test_malformed_lines_are_skipped_reported_and_preserved(tmp_path: Path):
    path = write(
        tmp_path / "s.jsonl",
        HEADER,
        line("a", None, "one"),
        "this is not json",
        "",
        '{"no":"id"}',
        line("b", "a", "two", role="assistant"),
        "[1,2]",
    )
    original = path.read_bytes()
    with SessionStore.open(path) as store:
        assert [r.id for r in store.records()] == ["a", "b"]
        report = store.recovery
        assert [d.line for d in report.damaged_lines] == [3, 5, 7]
        assert "not valid JSON" in report.damaged_lines[0].reason
        assert report.damaged_lines[0].preview == "this is not json"
        assert report.blank_lines == 1 and report.torn_tail is None
        store.append(user("three"))
    assert path.read_bytes().startswith(original)


def test_invalid_utf8_mid_file_is_read_like_pi_and_reported(tmp_path: Path):
    bad = line("b", "a", "cafXX", role="assistant").encode().replace(b"XX", b"\xe9")
    bad_id = line("dXX", "c", "q").encode().replace(b"XX", b"\xff")
    path = tmp_path / "s.jsonl"
    path.write_bytes(
        b"\n".join(
            [
                HEADER.encode(),
                line("a", None, "q").encode(),
                bad,
                line("c", "b", "next").encode(),
                bad_id,
            ]
        )
        + b"\n"
    )
    with SessionStore.open(path, readonly=True) as store:
        # bad bytes in the id are found while indexing; in a body, when it is first read
        assert store.recovery.invalid_utf8_lines == [5]
        assert store.leaf_id == "d\ufffd"
        assert [r.id for r in store.path_records()] == ["a", "b", "c", "d\ufffd"]
        assert store.get_entry("b").message.content[0].text == "caf\ufffd"
        assert b"\xef\xbf\xbd" in store.raw_message(store.record("b"))
        assert store.recovery.invalid_utf8_entries == ["b"]


def test_duplicate_ids_reported_later_wins(tmp_path: Path):
    path = write(tmp_path / "d.jsonl", HEADER, line("a", None, "first"), line("a", None, "second"))
    with SessionStore.open(path, readonly=True) as store:
        assert store.recovery.duplicate_ids == ["a"]
        assert store.get_entry("a").message.content == "second"


def test_missing_final_newline_is_added_by_next_append(tmp_path: Path):
    path = write(
        tmp_path / "n.jsonl",
        HEADER,
        line("a", None, "q"),
        line("b", "a", "r", role="assistant"),
        newline=False,
    )
    with SessionStore.open(path) as store:
        assert store.recovery.missing_final_newline and store.recovery.torn_tail is None
        store.append(user("next"))
    lines = path.read_text().splitlines()
    assert len(lines) == 4 and json.loads(lines[3])["parentId"] == "b"


# --- listing


def test_list_sessions_sorted_by_last_message(tmp_path: Path):
    directory = tmp_path / "dir"
    directory.mkdir()
    write(
        directory / "old.jsonl",
        HEADER.replace("sess-1", "old"),
        line("a", None, "old question", ts=1),
    )
    write(
        directory / "new.jsonl",
        HEADER.replace("sess-1", "new"),
        line("a", None, "new question", ts=5),
        '{"type":"session_info","id":"n","parentId":"a","timestamp":"2026-01-01T00:00:06.000Z","name":"Named"}',
    )
    write(directory / "broken.jsonl", "not a session")
    (directory / "notes.txt").write_text("x")
    (directory / ".s.jsonl.abcd.tmp").write_text(HEADER + "\n")
    summaries = list_sessions(directory)
    assert [s.session_id for s in summaries] == ["new", "old"]
    assert summaries[0].first_message == "new question" and summaries[0].name == "Named"
    assert summaries[0].entry_count == 2 and summaries[0].modified == "2026-01-01T00:00:05.000Z"
    assert list_sessions(tmp_path / "missing") == []


def test_create_refuses_an_existing_file(tmp_path: Path):
    path = write(tmp_path / "x.jsonl", HEADER)
    with pytest.raises(ConflictError):
        SessionStore.create("/", path=path)
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with SessionStore.create("/", path=empty) as store:
        store.append(user("x"))
        store.write_now()
    assert len(empty.read_text().splitlines()) == 2


# --- fork (createBranchedSession)


def test_fork_unknown_entry(store: SessionStore):
    with pytest.raises(NotFoundError):
        store.fork("missing")


def test_fork_copies_path_keeps_ids_and_carries_labels(store: SessionStore):
    a = store.append(user("a")).id
    b = store.append(assistant("b")).id
    store.append_label(a, "root-label")  # a label in the middle of the path
    c = store.append(user("c")).id
    store.branch(b)
    off = store.append(user("off path")).id
    store.append_label(off, "not on path")
    with store.fork(c) as forked:
        assert forked.persisted  # the path has an assistant message
        assert forked.header.parent_session == str(store.path)
        records = forked.records()
        assert [r.id for r in records[:3]] == [a, b, c]
        assert records[2].parent_id == b  # re-parented past the dropped label
        assert records[3].type == "label" and forked.get_label(a) == "root-label"
        assert forked.get_label(off) is None and forked.leaf_id == records[3].id
        assert len(forked.build_context().messages) == 3


def test_fork_without_assistant_is_deferred(store: SessionStore):
    a = store.append(user("only")).id
    store.write_now()
    with store.fork(a) as forked:
        assert not forked.persisted
        forked.append(assistant())
        lines = forked.path.read_text().splitlines()
        assert len(lines) == 3 and sum('"type":"session"' in x for x in lines) == 1


# --- fsync policy


def test_compaction_entries_are_synced_at_once(store: SessionStore):
    first = store.append(user("a")).id
    store.append(assistant())
    store.append(user("b"))
    assert store.needs_sync  # batch policy: plain appends wait for the timer
    store.append(
        {"type": "compaction", "summary": "S", "firstKeptEntryId": first, "tokensBefore": 10}
    )
    assert not store.needs_sync


def test_always_policy_syncs_every_append(session_dir: Path):
    from sessiond.settings import StorageSettings

    with SessionStore.create(
        "/", session_dir=session_dir, storage=StorageSettings(fsync="always")
    ) as store:
        store.append(user("a"))
        store.append(assistant())
        store.append(user("b"))
        assert not store.needs_sync


def test_modified_time_falls_back_to_mtime(tmp_path: Path):
    path = write(tmp_path / "m.jsonl", HEADER)
    os.utime(path, (time.time(), 1_700_000_000))
    from sessiond.store.listing import summarize_session

    assert summarize_session(path).modified.startswith("2023-11-14T22:13:20")


def test_llm_form_leaves_out_failed_answers_like_pis_providers(store: SessionStore):
    import json as _json

    from sessiond.store.export import context_json

    store.append(user("question"))
    store.append(assistant("", stop="error", errorMessage="prompt is too long"))
    store.append(assistant("half", stop="aborted"))
    store.append(assistant("fine"))
    agent = _json.loads(context_json(store, store.build_context(), "agent"))
    llm = _json.loads(context_json(store, store.build_context(), "llm"))
    assert [m.get("stopReason") for m in agent["messages"]] == [None, "error", "aborted", "stop"]
    assert [m.get("stopReason") for m in llm["messages"]] == [None, "stop"]
