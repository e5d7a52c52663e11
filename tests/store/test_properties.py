"""Property tests over random session trees: the incremental view equals the reference."""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiond.core.context import build_session_context
from sessiond.core.path_reader import EntryPath
from sessiond.core.projected_path import ProjectedPath
from sessiond.store.session import SessionStore
from sessiond.tiktoken_offline import estimator

from .helpers import assistant, tool_result, user

OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("user"), st.text(max_size=20)),
        st.tuples(st.just("assistant"), st.integers(0, 5000)),
        st.tuples(st.just("tool"), st.text(max_size=50)),
        st.tuples(st.just("branch"), st.integers(0, 10_000)),
        st.tuples(st.just("reset"), st.none()),
        st.tuples(st.just("compact"), st.integers(0, 10_000)),
        st.tuples(st.just("label"), st.integers(0, 10_000)),
        st.tuples(st.just("thinking"), st.sampled_from(["low", "high", None])),
        st.tuples(st.just("model"), st.sampled_from(["a", "b"])),
        st.tuples(st.just("branch_summary"), st.text(max_size=10)),
        st.tuples(st.just("custom_message"), st.text(max_size=10)),
        # pi 1.6's entries
        st.tuples(st.just("omit"), st.integers(0, 10_000)),
        st.tuples(st.just("replace"), st.integers(0, 10_000)),
        st.tuples(st.just("system"), st.integers(0, 10_000)),
        st.tuples(st.just("usage"), st.integers(0, 10_000)),
    ),
    max_size=40,
)
EDITABLE = {"user", "assistant", "toolResult"}


def _editable(store: SessionStore) -> list[str]:
    return [
        r.id
        for r in store.path_records()
        if r.type == "custom_message" or (r.type == "message" and r.role in EDITABLE)
    ]


def apply(store: SessionStore, operations, after_each=None) -> None:
    for kind, value in operations:
        if after_each is not None:
            after_each(store)
        ids = [r.id for r in store.records()]
        if kind == "user":
            store.append(user(value))
        elif kind == "assistant":
            store.append(assistant("a", input=value, stop="aborted" if value % 7 == 0 else "stop"))
        elif kind == "tool":
            store.append(tool_result(value))
        elif kind == "branch" and ids:
            store.branch(ids[value % len(ids)])
        elif kind == "reset":
            store.reset_leaf()
        elif kind == "compact" and ids:
            path = [r.id for r in store.path_records()] or ids
            body: dict[str, object] = {
                "type": "compaction",
                "summary": f"S{value}",
                "firstKeptEntryId": path[value % len(path)] if value % 5 else "retain-none",
                "tokensBefore": value,
            }
            if value % 3 == 0:  # pi 1.6's checkpoint
                body["systemMessage"] = {
                    "role": "system",
                    "content": "checkpoint " * (value % 7),
                    "toolsAdded": [{"name": "t0", "description": "d"}],
                }
            store.append(body)
        elif kind == "label" and ids:
            store.append_label(ids[value % len(ids)], f"L{value % 3}" if value % 4 else None)
        elif kind == "thinking":
            store.append({"type": "thinking_level_change", "thinkingLevel": value})
        elif kind == "model":
            store.append({"type": "model_change", "provider": value, "modelId": value + "-1"})
        elif kind == "branch_summary":
            leaf = store.leaf_id
            store.append({"type": "branch_summary", "fromId": leaf or "root", "summary": value})
        elif kind == "custom_message":
            store.append(
                {"type": "custom_message", "customType": "c", "content": value, "display": True}
            )
        elif kind in ("omit", "replace") and _editable(store):
            targets = _editable(store)
            replacement = None if kind == "omit" else {"content": "r" * (value % 300)}
            store.append(
                {
                    "type": "context_edit",
                    "targetId": targets[value % len(targets)],
                    "replacement": replacement,
                }
            )
        elif kind == "system":
            message: dict[str, object] = {"role": "system", "content": "p" * (value % 50)}
            if value % 3 == 0:
                message["sections"] = {f"s{value % 2}": None if value % 5 == 0 else "x" * value}
            if value % 4 == 0:
                message["toolsAdded"] = [{"name": f"t{value % 3}", "description": "d"}]
            if value % 4 == 1:
                message["toolsRemoved"] = [{"name": f"t{value % 3}"}]
            store.append({"type": "message", "message": message})
        elif kind == "usage":
            tokens = {"input": value, "output": 0, "cacheRead": 0, "cacheWrite": 0}
            store.append(
                {
                    "type": "usage",
                    "kind": "cache_warm",
                    "provider": "p",
                    "model": "m",
                    "usage": {**tokens, "totalTokens": value},
                }
            )


def check(store: SessionStore) -> None:
    entries = list(store.entries())
    leaf = store.leaf_id
    reference = (
        build_session_context(entries, leaf)
        if leaf is not None
        else build_session_context([], None)
    )
    incremental = store.build_context()
    assert incremental == reference
    estimate_matches_reference(store)
    # tree invariants: every entry once, children point back at their parent
    seen: list[str] = []
    stack = list(store.get_tree())
    while stack:
        node = stack.pop()
        seen.append(node.record.id)
        for child in node.children:
            assert child.record.parent_id == node.record.id
        stack.extend(node.children)
    assert sorted(seen) == sorted(r.id for r in store.records())
    # the path ends at the leaf and walks parent links
    path = store.path_records()
    if path:
        assert path[-1].id == leaf and path[0].parent_id is None
        assert all(b.parent_id == a.id for a, b in itertools.pairwise(path))


def estimate_matches_reference(store: SessionStore) -> None:
    """The view's running figures equal pi 1.6's projected estimate computed afresh
    from the path (``core.projected_path``)."""
    chars = estimator("chars")
    reference = ProjectedPath(EntryPath(store.get_branch(), chars), chars).estimate_context()
    assert store.leaf_view.estimate_context(chars) == reference


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPERATIONS)
def test_running_usage_totals_match_a_full_recount_after_every_step(operations):
    # The view keeps running totals between calls; asking after every operation checks
    # that appends extend them and compactions and navigation drop them.
    with tempfile.TemporaryDirectory() as directory:
        store = SessionStore.create("/p", session_dir=Path(directory))
        try:
            apply(store, operations, after_each=estimate_matches_reference)
            estimate_matches_reference(store)
        finally:
            store.close()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPERATIONS)
def test_incremental_context_matches_reference_and_survives_reopen(operations):
    with tempfile.TemporaryDirectory() as directory:
        store = SessionStore.create("/p", session_dir=Path(directory))
        try:
            apply(store, operations)
            check(store)
            store.write_now()
            path = store.path
            # Compare with a fresh open, whose leaf is the last line.
            store.branch(store.records()[-1].id) if store.records() else store.reset_leaf()
            expected = store.build_context() if store.records() else None
        finally:
            store.close()
        with SessionStore.open(path, readonly=True) as reopened:
            check(reopened)
            if expected is not None:
                assert reopened.build_context() == expected
