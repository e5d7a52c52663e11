"""Torn and damaged files: open, repair only the tail, report the rest, lose nothing complete.

Each case starts from a session written the ordinary way (so the bytes of every line are
known), damages it the way crashes, editors, other tools and bad disks do, and then holds
the store to what it promises: every complete entry is still there with its bytes
unchanged, a torn tail is cut off into a ``.corrupt`` file holding exactly those bytes,
damage anywhere else is reported and left on disk as it was, and the session still takes
appends and reopens.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from sessiond.store.session import SessionStore
from sessiond_testkit.generate_session import generate
from tests.proof.support import count, stdio_daemon, timeout_for
from tests.store.helpers import assistant, tool_call, tool_result, user

pytestmark = pytest.mark.timeout(timeout_for(240, 3600))

BODIES: list[dict[str, Any]] = [
    user("first question, with \u00e9t\u00e9 and \u6f22\u5b57"),
    assistant("an answer \U0001f600", tools=[tool_call("bash", command="ls -la")], stop="toolUse"),
    tool_result(
        "output\nwith lines\tand tabs \u2028 raw separator \u2029 too", call_id="call-bash"
    ),
    assistant("after the tool"),
    user("second question " + "x" * 3000),
    assistant("second answer"),
    user("third question"),
    assistant("third answer, the last"),
]


def build(
    directory: Path, bodies: list[dict[str, Any]] = BODIES
) -> tuple[Path, list[str], list[bytes]]:
    """A session file; its entry ids and its lines (header first, without newlines)."""
    with SessionStore.create("/damage/project", session_dir=directory) as store:
        ids = [entry.id for entry in store.append_entries(bodies)]
        path = store.path
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    return path, ids, lines[:-1]


def join(lines: list[bytes], ending: bytes = b"\n") -> bytes:
    return b"".join(line + ending for line in lines)


def intact(
    store: SessionStore, ids: list[str], lines: list[bytes], skip: Iterable[str] = ()
) -> None:
    """Every entry not in ``skip`` is present with its line byte for byte (a CR before the
    newline belongs to the line as stored)."""
    skip = set(skip)
    for entry_id, line in zip(ids, lines[1:]):
        if entry_id in skip:
            continue
        assert store.has_entry(entry_id), f"complete entry {entry_id} lost"
        assert store.raw_line(store.record(entry_id)).rstrip(b"\r") == line.rstrip(b"\r")


def reopen_after_append(path: Path) -> SessionStore:
    """Append through a writable open, then reopen: the file still works."""
    with SessionStore.open(path) as store:
        leaf = store.leaf_id
        added = store.append(user("appended after the damage"))
        assert added.parent_id == leaf
    again = SessionStore.open(path, readonly=True)
    assert again.leaf_id == added.id and again.recovery.torn_tail is None
    again.build_context()
    return again


# -- torn tails ---------------------------------------------------------------------------------


@pytest.mark.parametrize("padding", [1, 7, 512, 4096, 65_539, 1 << 20])
@pytest.mark.parametrize("partial", [b"", b'{"type":"message","id":"abcd', b'{"type":"mess'])
def test_nul_padding_and_partial_lines_are_a_torn_tail(
    tmp_path: Path, padding: int, partial: bytes
) -> None:
    path, ids, lines = build(tmp_path)
    original = path.read_bytes()
    torn = partial + b"\x00" * padding
    path.write_bytes(original + torn)
    with SessionStore.open(path) as store:
        report = store.recovery
        assert report.torn_tail is not None and report.torn_tail.offset == len(original)
        assert report.torn_tail.length == len(torn)
        assert not report.damaged_lines
        assert Path(report.torn_tail.saved_to or "").read_bytes() == torn
        intact(store, ids, lines)
        assert store.leaf_id == ids[-1]
    assert path.read_bytes() == original
    reopen_after_append(path).close()


def test_a_torn_tail_of_50_megabytes(tmp_path: Path) -> None:
    path, ids, lines = build(tmp_path)
    original = path.read_bytes()
    torn = (
        b'{"type":"message","id":"feedbeef","parentId":null,"message":{"role":"user","content":"'
        + b"z" * (50 << 20)
    )
    path.write_bytes(original + torn)
    with SessionStore.open(path) as store:
        assert store.recovery.torn_tail is not None
        assert Path(store.recovery.torn_tail.saved_to or "").read_bytes() == torn
        intact(store, ids, lines)
    assert path.read_bytes() == original


# -- damage in the middle ---------------------------------------------------------------------


def damage_between(lines: list[bytes], index: int, bad: bytes) -> bytes:
    """The file with ``bad`` as a line of its own before line ``index`` (0 = header)."""
    return join([*lines[:index], bad, *lines[index:]])


GARBAGE = [
    pytest.param(b"\x00" * 300, id="nul-line"),
    pytest.param(b"garbage that is not json", id="words"),
    pytest.param(b"{not json at all", id="broken-object"),
    pytest.param(b"[1, 2, 3]", id="array"),
    pytest.param(b'"a string"', id="string"),
    pytest.param(b"12345", id="number"),
    pytest.param(b'{"type":"message","message":{"role":"user","content":"no id"}}', id="no-id"),
    pytest.param(b'{"id": 17, "type": "message"}', id="numeric-id"),
    pytest.param(bytes(range(256)).replace(b"\n", b""), id="binary"),
    pytest.param(b"\xff\xfe\xfd not utf-8 and not json", id="invalid-utf8-garbage"),
    pytest.param(
        b'{"type":"message","id":"deep0001","x":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        id="nested-too-deep",
    ),
    pytest.param(b"[" * 100_000, id="deep-and-unfinished"),
]


@pytest.mark.parametrize("bad", GARBAGE)
def test_garbage_lines_mid_file_are_reported_and_kept(tmp_path: Path, bad: bytes) -> None:
    path, ids, lines = build(tmp_path)
    damaged = damage_between(lines, 4, bad)
    path.write_bytes(damaged)
    with SessionStore.open(path) as store:
        report = store.recovery
        assert report.torn_tail is None
        assert [d.line for d in report.damaged_lines] == [5]
        assert report.damaged_lines[0].offset == len(join(lines[:4]))
        assert report.damaged_lines[0].length == len(bad)
        intact(store, ids, lines)
        # the line after the damage keeps its parent: the chain is not broken by a bad line
        assert store.leaf_id == ids[-1]
        assert [r.id for r in store.path_records()] == ids
    assert path.read_bytes() == damaged
    with reopen_after_append(path) as again:
        assert [d.line for d in again.recovery.damaged_lines] == [5]
    assert path.read_bytes().startswith(damaged)


def test_nul_bytes_inside_a_line_mid_file(tmp_path: Path) -> None:
    path, ids, lines = build(tmp_path)
    victim = 3  # the line of ids[2]
    broken = lines[victim][:20] + b"\x00" * 40 + lines[victim][60:]
    damaged = join([*lines[:victim], broken, *lines[victim + 1 :]])
    path.write_bytes(damaged)
    with SessionStore.open(path) as store:
        assert [d.line for d in store.recovery.damaged_lines] == [victim + 1]
        intact(store, ids, lines, skip={ids[victim - 1]})
        assert not store.has_entry(ids[victim - 1])
        store.build_context()
    assert path.read_bytes() == damaged


def test_a_line_truncated_mid_file_then_valid_lines(tmp_path: Path) -> None:
    path, ids, lines = build(tmp_path)
    victim = 5
    truncated = lines[victim][: len(lines[victim]) // 2]
    damaged = join([*lines[:victim], truncated, *lines[victim + 1 :]])
    path.write_bytes(damaged)
    with SessionStore.open(path) as store:
        report = store.recovery
        assert report.torn_tail is None, "only the last line can be a torn tail"
        assert [d.line for d in report.damaged_lines] == [victim + 1]
        lost = ids[victim - 1]
        intact(store, ids, lines, skip={lost})
        # the entry after the lost one now has a parent nobody has: it roots its own tree
        assert store.leaf_id == ids[-1]
        assert [r.id for r in store.path_records()] == ids[victim:]
        assert len(store.get_tree()) == 2
        store.build_context()
    assert path.read_bytes() == damaged
    reopen_after_append(path).close()


def test_a_second_header_mid_file(tmp_path: Path) -> None:
    path, ids, lines = build(tmp_path)
    second = json.dumps(
        {
            "type": "session",
            "version": 3,
            "id": "other",
            "timestamp": "2025-01-01T00:00:00.000Z",
            "cwd": "/x",
        }
    ).encode()
    damaged = damage_between(lines, 5, second)
    path.write_bytes(damaged)
    with SessionStore.open(path) as store:
        assert [(d.line, d.reason) for d in store.recovery.damaged_lines] == [
            (6, "a second session header")
        ]
        assert store.header.id == json.loads(lines[0])["id"]
        intact(store, ids, lines)
        assert store.entry_count == len(ids)
        assert [r.id for r in store.path_records()] == ids
    assert path.read_bytes() == damaged


def test_duplicate_ids_are_reported_and_both_lines_kept(tmp_path: Path) -> None:
    path, ids, lines = build(tmp_path)
    copy = json.loads(lines[3])
    copy["parentId"] = ids[-1]
    copy["message"]["content"][0]["text"] = "a later line with the same id"
    duplicate = msgspec.json.encode(copy)
    damaged = join([*lines, duplicate])
    path.write_bytes(damaged)
    with SessionStore.open(path) as store:
        assert store.recovery.duplicate_ids == [ids[2]]
        assert store.entry_count == len(ids) + 1
        assert store.raw_line(store.record(ids[2])) == duplicate  # the later line wins, as in pi
        intact(store, ids, lines, skip={ids[2]})
        store.build_context()
    assert path.read_bytes() == damaged


# -- encodings --------------------------------------------------------------------------------------


def test_invalid_utf8_in_a_body_and_in_an_id(tmp_path: Path) -> None:
    path, ids, lines = build(tmp_path)
    body_line = lines[1].replace("\u00e9".encode(), b"\xff", 1)
    assert body_line != lines[1]
    id_line = lines[6].replace(ids[5].encode(), ids[5][:4].encode() + b"\xfe\xfd", 1)
    child = lines[7].replace(ids[5].encode(), ids[5][:4].encode() + b"\xfe\xfd", 1)
    damaged = join([lines[0], body_line, *lines[2:6], id_line, child, *lines[8:]])
    path.write_bytes(damaged)
    with SessionStore.open(path) as store:
        report = store.recovery
        assert not report.damaged_lines and report.torn_tail is None
        assert 7 in report.invalid_utf8_lines
        replaced_id = ids[5][:4] + "\ufffd\ufffd"
        assert store.has_entry(replaced_id) and not store.has_entry(ids[5])
        # pi reads both with replacement characters; the chain through the odd id holds
        assert [r.id for r in store.path_records()] == [*ids[:5], replaced_id, *ids[6:]]
        first = store.get_entry(ids[0])
        assert "\ufffd" in first.message.content  # type: ignore[union-attr]
        assert ids[0] in store.recovery.invalid_utf8_entries
        intact(store, ids, lines, skip={ids[0], ids[5], ids[6]})
        store.build_context()
    assert path.read_bytes() == damaged, "opening must not rewrite lines it cannot read cleanly"
    reopen_after_append(path).close()
    assert path.read_bytes().startswith(damaged)


SEPARATORS = [
    pytest.param("raw", id="raw"),
    pytest.param("escaped", id="escaped"),
]


@pytest.mark.parametrize("form", SEPARATORS)
def test_line_and_paragraph_separators_round_trip_byte_for_byte(tmp_path: Path, form: str) -> None:
    text = "before\u2028middle\u2029after \\u2028 literal"
    path, ids, lines = build(tmp_path, [*BODIES, user(text), assistant("ok \u2029")])
    if form == "escaped":
        # As a JSON writer that escapes them (JavaScript before ES2019) writes them.
        lines = [
            line.replace("\u2028".encode(), b"\\u2028").replace("\u2029".encode(), b"\\u2029")
            for line in lines
        ]
        path.write_bytes(join(lines))
    original = path.read_bytes()
    with SessionStore.open(path) as store:
        assert store.recovery.clean, store.recovery
        intact(store, ids, lines)
        entry = store.get_entry(ids[-2])
        assert entry.message.content == text  # type: ignore[union-attr]
        # a rewrite (pruning's) copies every other line byte for byte
        replaced = msgspec.json.decode(store.raw_line(store.record(ids[3])))
        replaced["message"]["content"] = [{"type": "text", "text": "rewritten \u2028"}]
        store.rewrite_entries({ids[3]: replaced})
        intact(store, ids, lines, skip={ids[3]})
    after = path.read_bytes().split(b"\n")
    before = original.split(b"\n")
    assert [a for i, a in enumerate(after) if i != 4] == [b for i, b in enumerate(before) if i != 4]
    # and the daemon sends each line exactly as stored
    daemon, peer = stdio_daemon(tmp_path / "daemon")
    try:
        peer.initialize()
        opened = peer.call("session/open", {"path": str(path)})
        start = len(peer.bodies)
        peer.call("session/entries", {"sessionId": opened["sessionId"]})
        body = next(b for b in peer.bodies[start:] if b'"result"' in b)
        for index, line in enumerate(after[1:-1]):
            assert line in body, f"line {index + 2} was not sent byte for byte"
    finally:
        daemon.stop()


def test_crlf_line_endings(tmp_path: Path) -> None:
    path, ids, lines = build(tmp_path)
    crlf = join(lines, b"\r\n")
    path.write_bytes(crlf)
    with SessionStore.open(path) as store:
        assert not store.recovery.damaged_lines and store.recovery.torn_tail is None
        intact(store, ids, lines)
        assert [r.id for r in store.path_records()] == ids
        store.build_context()
    with reopen_after_append(path) as again:
        assert again.entry_count == len(ids) + 1
    assert path.read_bytes().startswith(crlf)


def test_crlf_file_with_a_torn_tail(tmp_path: Path) -> None:
    path, ids, lines = build(tmp_path)
    crlf = join(lines, b"\r\n")
    path.write_bytes(crlf + b'{"type":"message","id":"abc\r')
    with SessionStore.open(path) as store:
        assert store.recovery.torn_tail is not None
        intact(store, ids, lines)
    assert path.read_bytes() == crlf


def test_a_byte_order_mark(tmp_path: Path) -> None:
    path, ids, lines = build(tmp_path)
    with_bom = b"\xef\xbb\xbf" + path.read_bytes()
    path.write_bytes(with_bom)
    with SessionStore.open(path) as store:
        assert store.recovery.byte_order_mark
        assert store.header.id == json.loads(lines[0])["id"]
        intact(store, ids, lines)
    reopen_after_append(path).close()
    assert path.read_bytes().startswith(with_bom)


# -- size -------------------------------------------------------------------------------------------


def test_a_single_50_megabyte_line(tmp_path: Path) -> None:
    huge = "\u00e9" * (25 << 20)  # 50 MB of UTF-8
    path, ids, lines = build(
        tmp_path, [*BODIES[:4], tool_result(huge, call_id="call-bash"), assistant("read it")]
    )
    assert len(max(lines, key=len)) > 50 << 20
    with SessionStore.open(path) as store:
        assert store.recovery.clean
        intact(store, ids, lines)
        context = store.build_context()
        assert context.messages[4].content[0].text == huge  # type: ignore[union-attr]
    # the same line as damage in the middle: reported, kept, its preview short
    broken = lines[5][:-2]
    damaged = join([*lines[:5], broken, *lines[6:]])
    path.write_bytes(damaged)
    with SessionStore.open(path) as store:
        (bad,) = store.recovery.damaged_lines
        assert bad.length == len(broken) and len(bad.preview) < 400
        intact(store, ids, lines, skip={ids[4]})
    assert path.read_bytes() == damaged


def generated_lines(path: Path) -> list[bytes]:
    data = path.read_bytes()
    assert data.endswith(b"\n")
    return data.split(b"\n")[:-1]


def test_a_large_generated_session(tmp_path: Path) -> None:
    """~60 MB in CI, ~600 MB with SESSIOND_LONG=1: every line kept, only a tail repaired."""
    entries = count(30_000, 300_000)
    path = tmp_path / "large.jsonl"
    info = generate(path, entries=entries, avg_bytes=2_000, branchy=True, compactions=True, seed=11)
    assert info.bytes > count(55 << 20, 550 << 20)
    lines = generated_lines(path)
    with SessionStore.open(path, readonly=True) as store:
        assert store.recovery.clean, store.recovery
        assert store.entry_count == info.entries == len(lines) - 1
        assert store.leaf_id == info.leaf_id
        counts: dict[str, int] = {}
        for record, line in zip(store.records(), lines[1:]):
            counts[record.type] = counts.get(record.type, 0) + 1
            assert record.length == len(line)
        assert counts == info.counts
        assert dict(store.labels) == info.labels
        for record in store.records()[:: max(1, entries // 2000)]:
            assert store.raw_line(record) == lines[record.seq + 1]
        context = store.build_context()
        assert context.messages
    # a crash mid-append at the end of it, and garbage in the middle of it
    middle = len(lines) // 2
    damaged_lines = [*lines[:middle], b"\x00\x00 not an entry", *lines[middle:]]
    torn = b'{"type":"message","id":"0badcafe","parentId":"' + info.leaf_id.encode()
    with open(path, "wb") as handle:
        for line in damaged_lines:
            handle.write(line + b"\n")
        handle.write(torn)
    size = os.path.getsize(path)
    with SessionStore.open(path) as store:
        report = store.recovery
        assert report.torn_tail is not None and report.torn_tail.length == len(torn)
        assert [d.line for d in report.damaged_lines] == [middle + 1]
        assert store.entry_count == info.entries and store.leaf_id == info.leaf_id
        assert Path(report.torn_tail.saved_to or "").read_bytes() == torn
        store.append(user("after the crash"))
    assert os.path.getsize(path) > size - len(torn)
    with SessionStore.open(path, readonly=True) as again:
        assert again.entry_count == info.entries + 1
        assert [d.line for d in again.recovery.damaged_lines] == [middle + 1]


# -- everything at once ----------------------------------------------------------------------------

Damage = Callable[[list[bytes]], list[bytes]]


def test_all_kinds_of_damage_in_one_file(tmp_path: Path) -> None:
    path, ids, lines = build(tmp_path, BODIES * 3)
    bad = [
        b"\x00" * 64,
        b"{torn in the middle",
        b"\xff\xfe garbage",
        json.dumps(
            {"type": "session", "version": 3, "id": "x", "timestamp": "", "cwd": ""}
        ).encode(),
    ]
    mixed: list[bytes] = [lines[0]]
    positions = {3: bad[0], 7: bad[1], 11: bad[2], 15: bad[3]}
    damaged_at = []
    for index, line in enumerate(lines[1:], start=1):
        if index in positions:
            mixed.append(positions[index])
            damaged_at.append(len(mixed))
        mixed.append(line if index % 2 else line + b"\r")
    data = join(mixed) + b"\x00" * 100
    path.write_bytes(b"\xef\xbb\xbf" + data)
    with SessionStore.open(path) as store:
        report = store.recovery
        assert report.byte_order_mark and report.torn_tail is not None
        assert [d.line for d in report.damaged_lines] == damaged_at
        intact(store, ids, lines)
        assert [r.id for r in store.path_records()] == ids
        store.build_context()
    assert path.read_bytes() == b"\xef\xbb\xbf" + join(mixed)


def test_an_unfinished_deeply_nested_tail_is_kept_as_damage_not_cut(tmp_path: Path) -> None:
    """Too deep to tell whether it is complete: reported and kept, never silently cut."""
    path, ids, lines = build(tmp_path)
    tail = b'{"type":"message","id":"deep0002","x":' + b"[" * 100_000
    path.write_bytes(join(lines) + tail)
    with SessionStore.open(path) as store:
        assert store.recovery.torn_tail is None
        assert [d.line for d in store.recovery.damaged_lines] == [len(lines) + 1]
        intact(store, ids, lines)
        store.append(user("after"))
    assert path.read_bytes().startswith(join(lines) + tail + b"\n")


def test_a_lone_surrogate_escape_written_by_javascript(tmp_path: Path) -> None:
    path, ids, lines = build(tmp_path)
    cut_emoji = lines[2].replace("\U0001f600".encode(), b"\\ud83d", 1)
    assert cut_emoji != lines[2]
    path.write_bytes(join([lines[0], lines[1], cut_emoji, *lines[3:]]))
    with SessionStore.open(path) as store:
        assert store.has_entry(ids[1]), "the entry with a lone surrogate was dropped"
        assert [r.id for r in store.path_records()] == ids
        assert store.recovery.lone_surrogate_entries == [ids[1]]
        assert store.recovery.damaged_lines == []
        # Read with U+FFFD where the half emoji was; the bytes on disk stay as written.
        text = msgspec.json.encode(store.entry_of(store.record(ids[1]))).decode()
        assert "\ufffd" in text and "\\ud83d" not in text
        store.append(user("after"))
    assert path.read_bytes().startswith(join([lines[0], lines[1], cut_emoji, *lines[3:]]))
