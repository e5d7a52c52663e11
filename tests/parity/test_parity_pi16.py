"""sessiond against pi 1.6.0 itself, on sessions pi 1.6's own code wrote, and on files sessiond wrote.

The sessions are written by pi 1.6's ``SessionManager`` (``pi16/pi_generate.mjs``): context
edits (omissions, replacements), usage entries, system messages with sections and tool
changes, compactions with and without the system checkpoint, retain-none compactions,
older compactions inside a kept range, branch summaries with usage, thinkingLevel on
answers, null content (one session), on many branches. pi's own functions
(``pi16/pi_reference.mjs``) then give the context at every leaf, the estimates, the
compaction preparation at every leaf for three budgets and the branch-summary inputs,
and sessiond must give the same (``pi16_compare``). Skipped, with the reason, when node
or the pinned pi 1.6 install (``npm ci`` in tests/parity/pi16) is missing.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import msgspec
import pytest

from sessiond.core.context import iso_to_ms
from sessiond.core.entries import CompactionEntry
from sessiond.service.pruning import prune_tool_outputs
from sessiond.store.session import SessionStore
from sessiond.tiktoken_offline import estimator
from tests.parity import pi16_compare, pi16_reference

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "bench" / "out" / "parity-pi16"
# (seed, share of messages with null content): pi 1.6's branch summaries fail on null
# content, so only one session has it.
SESSIONS = {"s1": (1, 0.0), "s2": (2, 0.0), "s3": (3, 0.0), "nulls": (4, 0.06)}


def _available() -> None:
    reason = pi16_reference.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)


@cache
def session(name: str) -> tuple[Path, dict[str, Any]]:
    """A session pi 1.6 wrote, and pi 1.6's reference document for it."""
    _available()
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.jsonl"
    seed, nulls = SESSIONS[name]
    pi16_reference.generate(path, seed=seed, nulls=nulls)
    return path, pi16_reference.reference(path)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_the_sessions_hold_every_entry_pi16_writes() -> None:
    seen: Counter[str] = Counter()
    for name in SESSIONS:
        path, document = session(name)
        lines = _lines(path)[1:]
        ids = {e["id"]: e for e in lines}
        for e in lines:
            kind = e["type"]
            message = e.get("message", {})
            seen[kind] += 1
            if kind == "context_edit":
                seen["edit:omit" if e["replacement"] is None else "edit:replace"] += 1
            if kind == "message" and message["role"] == "system":
                seen["system"] += 1
                for key in ("sections", "toolsAdded", "toolsRemoved"):
                    seen[f"system:{key}"] += key in message
                seen["system:removedSection"] += None in (message.get("sections") or {}).values()
            if kind == "message" and message.get("content", "") is None:
                seen["nullContent"] += 1
            if kind == "message" and message["role"] == "assistant" and "thinkingLevel" in message:
                seen["thinkingLevel"] += 1
            if kind == "compaction":
                seen["compaction:checkpoint" if "systemMessage" in e else "compaction:none"] += 1
                seen["compaction:retainNone"] += e["firstKeptEntryId"] == e["id"]
                seen["compaction:usage"] += "usage" in e
                kept = _kept_range(ids, e)
                seen["compaction:olderInKept"] += any(ids[i]["type"] == "compaction" for i in kept)
            if kind == "branch_summary":
                seen["branchSummary:usage"] += "usage" in e
                seen["branchSummary:empty"] += e["summary"] == ""
        seen["leaves"] += len(document["tips"])
    wanted = [
        "edit:omit",
        "edit:replace",
        "usage",
        "system:sections",
        "system:toolsAdded",
        "system:toolsRemoved",
        "system:removedSection",
        "nullContent",
        "thinkingLevel",
        "compaction:checkpoint",
        "compaction:none",
        "compaction:retainNone",
        "compaction:usage",
        "compaction:olderInKept",
        "branchSummary:usage",
        "branchSummary:empty",
        "label",
        "model_change",
        "thinking_level_change",
        "custom_message",
    ]
    assert [key for key in wanted if seen[key] == 0] == []
    assert seen["leaves"] >= 30


def _kept_range(ids: dict[str, dict[str, Any]], compaction: dict[str, Any]) -> list[str]:
    path: list[str] = []
    current = compaction["parentId"]
    while current is not None and current in ids:
        path.append(current)
        if current == compaction["firstKeptEntryId"]:
            return path
        current = ids[current]["parentId"]
    return []


@pytest.mark.parametrize("name", list(SESSIONS))
def test_tree(name: str) -> None:
    path, document = session(name)
    with SessionStore.open(path, readonly=True) as store:
        assert pi16_compare.compare_tree(store, document) == []


@pytest.mark.parametrize("name", list(SESSIONS))
def test_context_at_every_leaf(name: str) -> None:
    """Both forms, per-message estimates and the context size at every entry as a leaf."""
    path, document = session(name)
    with SessionStore.open(path, readonly=True) as store:
        found = pi16_compare.compare_contexts(store, document)
    assert len(found) == len(document["entries"])
    assert {leaf: problems for leaf, problems in found.items() if problems} == {}


@pytest.mark.parametrize("name", list(SESSIONS))
def test_compaction_preparation_at_every_leaf(name: str) -> None:
    path, document = session(name)
    prepared = [p for p in document["prepareCompaction"] if p.get("result") is not None]
    assert len(prepared) > 100  # the comparisons are not all "nothing to compact"
    with SessionStore.open(path, readonly=True) as store:
        assert pi16_compare.compare_preparations(store, document) == []


@pytest.mark.parametrize("name", list(SESSIONS))
def test_branch_summary_inputs(name: str) -> None:
    path, document = session(name)
    assert len(document["branchSummaries"]) > 50
    with SessionStore.open(path, readonly=True) as store:
        assert pi16_compare.compare_branch_summaries(store, document) == []


@pytest.mark.parametrize("name", list(SESSIONS))
def test_pi_checkpoints_are_what_sessiond_replays(name: str) -> None:
    """Every systemMessage pi wrote on a compaction is the system state sessiond replays at
    the compaction's parent (the checkpoint sessiond writes itself)."""
    path, _ = session(name)
    checked = 0
    with SessionStore.open(path, readonly=True) as store:
        for record in store.records():
            entry = store.entry_of(record)
            if not isinstance(entry, CompactionEntry) or entry.parent_id is None:
                continue
            store.branch(entry.parent_id)
            ours = store.leaf_view.current_system_message()
            theirs = entry.system_message
            assert (ours is None) == (theirs is None), entry.id
            if ours is not None and theirs is not None:
                assert msgspec.structs.replace(ours, timestamp=0) == msgspec.structs.replace(
                    theirs, timestamp=0
                )
                assert theirs.timestamp == iso_to_ms(entry.timestamp)
                checked += 1
    if name != "nulls":
        assert checked > 0


def _cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_CACHE_HOME": str(home / "cache"),
        "XDG_DATA_HOME": str(home / "data"),
    }
    return subprocess.run(
        [sys.executable, "-m", "sessiond", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=True,
    )


def test_files_sessiond_wrote_open_in_pi16_with_the_context_sessiond_reported(
    tmp_path: Path,
) -> None:
    """sessiond appends to a session pi 1.6 wrote (messages, a system message, context
    edits, a usage entry, a label), prunes tool output with edits, compacts with the
    offline summarizer and navigates with a branch summary; pi 1.6 then opens the file
    and builds, at every entry, the context sessiond builds, and finds on sessiond's
    compaction the system checkpoint it would have written."""
    source, _ = session("s2")
    path = tmp_path / "session.jsonl"
    shutil.copyfile(source, path)
    answer = {
        "role": "assistant",
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "usage": {
            "input": 9000,
            "output": 50,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": 9050,
        },
        "thinkingLevel": "high",
    }
    with SessionStore.open(path) as store:
        written = store.append_entries(
            [
                {"type": "message", "message": {"role": "user", "content": "run the checks"}},
                {
                    "type": "message",
                    "message": {
                        "role": "system",
                        "content": "",
                        "sections": {"skills": "<skills>lint</skills>", "cwd": None},
                        "toolsAdded": [{"name": "lint", "description": "Lint.", "parameters": {}}],
                        "toolsRemoved": [{"name": "write"}],
                    },
                },
            ]
        )
        calls = []
        for index in range(4):
            call = {"type": "toolCall", "id": f"sd{index}", "name": "bash", "arguments": {}}
            calls.append(
                {
                    "type": "message",
                    "message": {**answer, "content": [call], "stopReason": "toolUse"},
                }
            )
            output = {"type": "text", "text": f"output {index} " + "x" * 100_000}
            calls.append(
                {
                    "type": "message",
                    "message": {
                        "role": "toolResult",
                        "toolCallId": f"sd{index}",
                        "toolName": "bash",
                        "content": [output],
                        "isError": False,
                    },
                }
            )
        store.append_entries(calls)
        done = store.append_entries(
            [
                {
                    "type": "message",
                    "message": {
                        **answer,
                        "content": [{"type": "text", "text": "All green."}],
                        "stopReason": "stop",
                    },
                },
                {
                    "type": "usage",
                    "kind": "cache_warm",
                    "provider": "anthropic",
                    "model": "m",
                    "usage": answer["usage"],
                },
            ]
        )
        store.append_entries(
            [
                {"type": "context_edit", "targetId": written[0].id, "replacement": None},
                {
                    "type": "context_edit",
                    "targetId": done[0].id,
                    "replacement": {"content": "Green."},
                },
            ]
        )
        store.append_label(written[0].id, "checks")
        plan = asyncio.run(prune_tool_outputs(store, estimator("chars")))
        assert len(plan.edit_ids) >= 1
        pruned_targets = {c.entry_id for c in plan.candidates}
        first_user = written[0].id
    _cli("compact", str(path), "--set", "compaction.keepRecentTokens=2000", home=tmp_path)
    compaction = _lines(path)[-1]
    assert compaction["type"] == "compaction" and "systemMessage" in compaction
    _cli("navigate", str(path), first_user, "--summarize", home=tmp_path)
    assert _lines(path)[-1]["type"] == "branch_summary"

    document = pi16_reference.reference(path, compactionLeaves=[], branchPairs=[])
    with SessionStore.open(path, readonly=True) as store:
        assert pi16_compare.compare_tree(store, document) == []
        found = pi16_compare.compare_contexts(store, document)
        assert {leaf: problems for leaf, problems in found.items() if problems} == {}
    by_leaf = {c["leafId"]: c for c in document["contexts"]}
    checkpoint = by_leaf[compaction["parentId"]]["systemCheckpoint"]
    stored = compaction["systemMessage"]
    assert stored["timestamp"] == iso_to_ms(compaction["timestamp"])
    assert {**stored, "timestamp": 0} == {**checkpoint, "timestamp": 0}
    # pi reads the pruning edits: before the compaction, the outputs sessiond pruned are
    # notices in pi's context too
    before = by_leaf[compaction["parentId"]]
    texts = [
        m["message"]["content"][0]["text"]
        for m in before["messages"]
        if m["message"]["role"] == "toolResult" and m["entryId"] in pruned_targets
    ]
    assert texts and all(t.startswith("[Output truncated - ") for t in texts)


@pytest.mark.parametrize("name", ["s1", "s3"])
def test_forks_sessiond_wrote_open_in_pi16(name: str, tmp_path: Path) -> None:
    """A fork of every tip (labels left out and re-created, the path re-chained, a
    compaction that kept from a label keeping from the entry after it) builds in pi 1.6
    the context sessiond builds, at every entry."""
    source, document = session(name)
    with SessionStore.open(source, readonly=True) as store:
        for index, tip in enumerate(document["tips"][:4]):
            with store.fork(tip, path=tmp_path / f"fork{index}.jsonl") as fork:
                fork.write_now()
                forked = fork.path
            reference = pi16_reference.reference(forked, compactionLeaves=[], branchPairs=[])
            with SessionStore.open(forked, readonly=True) as reopened:
                assert pi16_compare.compare_tree(reopened, reference) == []
                found = pi16_compare.compare_contexts(reopened, reference)
                assert {leaf: p for leaf, p in found.items() if p} == {}
