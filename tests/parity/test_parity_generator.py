"""The session generator writes deterministic, well-formed pi v3 files of the requested size."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from sessiond_testkit import pi_format as pf
from sessiond_testkit.generate_session import GeneratedInfo, generate

ROOT = Path(__file__).resolve().parents[2]
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
UUID7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
ENTRY_ID = re.compile(r"^[0-9a-f]{8}$")
BASE_FIRST = ["type", "id", "parentId", "timestamp"]


def _read(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def branchy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, GeneratedInfo]:
    path = tmp_path_factory.mktemp("gen") / "branchy.jsonl"
    info = generate(path, 3_000, branchy=True, compactions=True, seed=11)
    return path, info


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    generate(a, 800, branchy=True, compactions=True, seed=4)
    generate(b, 800, branchy=True, compactions=True, seed=4)
    generate(c, 800, branchy=True, compactions=True, seed=5)
    assert _sha(a) == _sha(b)
    assert _sha(a) != _sha(c)


def test_file_shape(branchy: tuple[Path, GeneratedInfo]) -> None:
    path, info = branchy
    lines = _read(path)
    header, entries = lines[0], lines[1:]
    assert list(header) == ["type", "version", "id", "timestamp", "cwd"]
    assert header["version"] == 3 and UUID7.match(header["id"]) and ISO.match(header["timestamp"])
    assert len(entries) == info.entries == 3_000
    seen: set[str] = set()
    last_ts = header["timestamp"]
    for e in entries:
        keys = list(e)
        if e["type"] in ("custom", "custom_message"):
            assert keys[0] == "type" and keys[-3:] == ["id", "parentId", "timestamp"]
        else:
            assert keys[:4] == BASE_FIRST, keys
        assert ENTRY_ID.match(e["id"]) and e["id"] not in seen
        assert e["parentId"] is None or e["parentId"] in seen
        assert ISO.match(e["timestamp"]) and e["timestamp"] >= last_ts
        seen.add(e["id"])
        last_ts = e["timestamp"]
        if e["type"] == "message":
            assert isinstance(e["message"]["timestamp"], int)
    assert entries[-1]["id"] == info.leaf_id
    counts: dict[str, int] = {}
    for e in entries:
        counts[e["type"]] = counts.get(e["type"], 0) + 1
    assert counts == info.counts


def test_tool_results_answer_the_calls_before_them(branchy: tuple[Path, GeneratedInfo]) -> None:
    path, _ = branchy
    by_id = {e["id"]: e for e in _read(path)[1:]}
    for e in by_id.values():
        if e["type"] != "message" or e["message"]["role"] != "toolResult":
            continue
        parent = by_id[e["parentId"]]
        while parent["message"]["role"] == "toolResult":
            parent = by_id[parent["parentId"]]
        calls = [b["id"] for b in parent["message"]["content"] if b["type"] == "toolCall"]
        assert e["message"]["toolCallId"] in calls


def test_tree_features_are_present(branchy: tuple[Path, GeneratedInfo]) -> None:
    path, info = branchy
    entries = _read(path)[1:]
    children: dict[str, int] = {}
    for e in entries:
        if e["parentId"]:
            children[e["parentId"]] = children.get(e["parentId"], 0) + 1
    assert info.branch_point_ids == [e["id"] for e in entries if children.get(e["id"], 0) > 1]
    assert len(info.branch_point_ids) >= 3 and len(info.compaction_ids) >= 2
    assert info.leaf_ids[-1] == info.leaf_id
    by_id = {e["id"]: e for e in entries}
    for cid in info.compaction_ids:
        c = by_id[cid]
        path_ids = set()
        cur = c["parentId"]
        while cur:
            path_ids.add(cur)
            cur = by_id[cur]["parentId"]
        assert c["firstKeptEntryId"] in path_ids
        assert c["details"]["modifiedFiles"] == sorted(c["details"]["modifiedFiles"])
        assert c["fromHook"] is False
    for bid in info.branch_summary_ids:
        b = by_id[bid]
        assert b["fromId"] == (b["parentId"] or "root")
        assert b["summary"].startswith(pf.BRANCH_SUMMARY_PREAMBLE)
    roles = info.roles
    assert {"user", "assistant", "toolResult"} <= set(roles)
    stop_reasons = {
        e["message"]["stopReason"]
        for e in entries
        if e["type"] == "message" and e["message"]["role"] == "assistant"
    }
    assert {"toolUse", "stop"} <= stop_reasons


def test_average_size_follows_avg_bytes(tmp_path: Path) -> None:
    info = generate(tmp_path / "s.jsonl", 5_000, seed=2)
    assert 1_800 <= info.bytes / info.entries <= 2_200
    big = generate(tmp_path / "b.jsonl", 2_000, avg_bytes=5_000, seed=2)
    assert 4_000 <= big.bytes / big.entries <= 5_500


def test_tiny_sessions(tmp_path: Path) -> None:
    for n in (3, 4, 7, 12):
        info = generate(tmp_path / f"t{n}.jsonl", n, branchy=True, compactions=True, seed=n)
        assert info.entries == n == len(_read(tmp_path / f"t{n}.jsonl")) - 1
    with pytest.raises(ValueError):
        generate(tmp_path / "x.jsonl", 2)


def test_entries_average_about_two_kilobytes(tmp_path: Path) -> None:
    # What the benchmarks' sizes assume (bench/README.md: "about 2 KB an entry").
    n = 100_000 if os.environ.get("SESSIOND_LONG") else 20_000
    info = generate(tmp_path / "size.jsonl", n, branchy=True, compactions=True, seed=1)
    assert 1_900 * n <= info.bytes <= 2_200 * n


def test_js_semantics_helpers() -> None:
    assert pf.js_len("a🎉") == 3 and pf.js_len("日本") == 2
    assert pf.iso(0) == "1970-01-01T00:00:00.000Z"
    assert pf.iso(1_778_749_925_123) == "2026-05-14T09:12:05.123Z"
    # JS sorts by UTF-16 code units: an astral character (surrogates D83D...) sorts before U+FF5E.
    wide_tilde = "\uff5e.md"
    read, modified = pf.file_lists({wide_tilde, "😀.md", "a.md"}, {"a.md"})
    assert read == ["😀.md", wide_tilde] and modified == ["a.md"]
    assert pf.js_number(0.0) == 0 and isinstance(pf.js_number(0.0), int)


def test_sample_session_is_up_to_date() -> None:
    from examples.make_sample import OUT, build

    session, _ = build()
    assert b"".join(session.lines) == OUT.read_bytes(), "run: python examples/make_sample.py"
