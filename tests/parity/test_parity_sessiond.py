"""sessiond against pi itself on the sample session and generated sessions of older shape.

These files hold no entry pi 1.6 added. Reading them (entries, leaf, names, labels, the
tree, the context's messages, overflow detection) is checked against pi 0.73.1, which
wrote files like them (``pi_reference.mjs``); token estimates, compaction preparation
at every compaction of the file and branch-summary inputs against pi 1.6.0, the
reference (``pi16/pi_reference.mjs``, compared by ``pi16_compare``). Both are the npm
packages, pinned. Every comparison is exact; where sessiond differs on purpose (README,
"Where sessiond differs from pi"), the check is that the difference is exactly that one.
Skipped, with the reason, when node or either install is missing.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from sessiond.core.convert import convert_to_llm
from sessiond.core.overflow import is_context_overflow
from sessiond.core.tokens import CharsEstimator
from sessiond.store.export import context_json
from sessiond.store.session import SessionStore
from sessiond_testkit.generate_session import generate
from tests.parity import pi16_compare, pi16_reference
from tests.parity.pi_reference import PiReferenceUnavailable, run_pi_reference

ROOT = Path(__file__).resolve().parents[2]
CHARS = CharsEstimator()
KEEPS = [1500, 4000, 20000]


@cache
def generated(kind: str) -> tuple[Path, Any]:
    out = ROOT / "bench" / "out" / "parity"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{kind}.jsonl"
    info = generate(
        str(path),
        entries=1500 if kind == "branchy" else 800,
        branchy=kind == "branchy",
        compactions=True,
        seed=11,
    )
    return path, info


@cache
def reference(name: str) -> tuple[Path, dict[str, Any]]:
    if name == "sample":
        path = ROOT / "examples" / "sample-session.jsonl"
        keep = 691
        leaves: list[str] = []
    else:
        path, info = generated(name)
        keep = info.keep_recent_tokens
        leaves = [leaf for leaf in info.leaf_ids if leaf != info.leaf_id][:4]
    settings = [{"enabled": True, "reserveTokens": 16384, "keepRecentTokens": k} for k in KEEPS]
    try:
        document = run_pi_reference(
            path,
            leaves=leaves,
            compaction_settings=settings,
            replay_keep_recent_tokens=keep,
            branch_token_budgets=[0, 2000],
        )
    except PiReferenceUnavailable as e:
        pytest.skip(str(e))
    return path, document


@cache
def reference16(name: str) -> tuple[Path, dict[str, Any]]:
    """pi 1.6's figures for the same file: contexts at the leaves pi 0.73.1 was asked
    about, preparations at the leaf and at every compaction's parent (with the keeps
    above and the one the generator used) and the same branch pairs."""
    reason = pi16_reference.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    path, old = reference(name)
    with store_for(path) as store:
        parents = [r.parent_id for r in store.records() if r.type == "compaction" and r.parent_id]
    leaves = [c["leafId"] for c in old["contexts"]]
    replay_keep = old["input"]["options"]["replayKeepRecentTokens"]
    document = pi16_reference.reference(
        path,
        leaves=leaves,
        compactionLeaves=[old["leafId"], *parents],
        keeps=[*KEEPS, replay_keep],
        branchPairs=[[b["oldLeafId"], b["targetId"]] for b in old["branchSummaries"]],
        branchTokenBudgets=[0, 2000],
    )
    return path, document


CASES = ["sample", "linear", "branchy"]


def store_for(path: Path) -> SessionStore:
    return SessionStore.open(path, readonly=True)


@pytest.mark.parametrize("case", CASES)
def test_index_leaf_branch_name_labels(case: str) -> None:
    path, ref = reference(case)
    with store_for(path) as store:
        assert [
            {"id": r.id, "parentId": r.parent_id, "type": r.type} for r in store.records()
        ] == ref["entries"]
        assert store.leaf_id == ref["leafId"]
        assert [r.id for r in store.path_records()] == ref["branch"]
        assert store.name == ref["sessionName"]
        assert dict(store.labels) == ref["labels"]
        assert store.session_id == ref["sessionId"]


@pytest.mark.parametrize("case", CASES)
def test_tree(case: str) -> None:
    path, ref = reference(case)
    with store_for(path) as store:
        roots = store.get_tree()
        assert [n.record.id for n in roots] == ref["tree"]["rootIds"]
        stack = list(roots)
        while stack:
            node = stack.pop()
            expected = ref["tree"]["nodes"][node.record.id]
            assert [c.record.id for c in node.children] == expected["children"]
            assert node.label == expected.get("label")
            if node.label:
                assert store.label_timestamp(node.record.id) == expected["labelTimestamp"]
            stack.extend(node.children)


@pytest.mark.parametrize("case", CASES)
def test_contexts_messages(case: str) -> None:
    """What pi 0.73.1 builds from a file of its time is what sessiond builds (pi 1.6
    builds the same from files without its new entries: checked below)."""
    path, ref = reference(case)
    with store_for(path) as store:
        for expected in ref["contexts"]:
            leaf = expected["leafId"]
            context = store.build_context(leaf)
            assert context.thinking_level == expected["thinkingLevel"]
            model = context.model
            assert (
                {"provider": model.provider, "modelId": model.model_id} if model else None
            ) == expected["model"]
            assert context.entry_ids == [m["entryId"] for m in expected["messages"]]
            ours = json.loads(context_json(store, context, "agent"))["messages"]
            assert ours == [m["message"] for m in expected["messages"]]
            llm = convert_to_llm(context.messages)
            assert [_role(m) for m in llm] == expected["llmRoles"]


@pytest.mark.parametrize("case", CASES)
def test_contexts_and_estimates_as_pi16(case: str) -> None:
    path, ref = reference16(case)
    with store_for(path) as store:
        found = pi16_compare.compare_contexts(store, ref)
    assert found and not {leaf: p for leaf, p in found.items() if p}


def _role(message: Any) -> str:
    from sessiond.core.messages import message_role

    return message_role(message)


@pytest.mark.parametrize("case", CASES)
def test_prepare_compaction_at_the_leaf_and_every_compaction_as_pi16(case: str) -> None:
    """Cut points, split turns, tokensBefore, what is summarized and the summarizer's
    input, for several keep budgets, at the leaf and at the parent of every compaction
    in the file (where the generator placed one)."""
    path, ref = reference16(case)
    assert any(p["result"] is not None for p in ref["prepareCompaction"])
    with store_for(path) as store:
        assert pi16_compare.compare_preparations(store, ref) == []


@pytest.mark.parametrize("case", CASES)
def test_branch_summary_inputs_as_pi16(case: str) -> None:
    path, ref = reference16(case)
    assert ref["branchSummaries"]
    with store_for(path) as store:
        assert pi16_compare.compare_branch_summaries(store, ref) == []


@pytest.mark.parametrize("case", CASES)
def test_overflow_detection(case: str) -> None:
    path, ref = reference(case)
    window = ref["overflow"]["contextWindow"]
    with store_for(path) as store:
        ours = [
            r.id
            for r in store.records()
            if r.role == "assistant" and is_context_overflow(store.entry_of(r).message, window)
        ]
    assert ours == ref["overflow"]["overflowAssistantIds"]
