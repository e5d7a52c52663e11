"""Property tests on oh-my-pi files: the store's view of the leaf equals the reference
(``core.omp_context``) after any sequence of appends, navigation and reopening."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiond.core.entries import CompactionEntry
from sessiond.core.omp_context import omp_context_from_path
from sessiond.core.tokens import estimate_projected_context_tokens
from sessiond.store.session import SessionStore
from sessiond.tiktoken_offline import estimator

from .helpers import assistant, omp_file, user

CALLS = ["c1", "c2", "c3"]
OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("user"), st.text(max_size=12)),
        st.tuples(
            st.just("assistant"),
            st.tuples(
                st.lists(st.sampled_from(CALLS), max_size=2),
                st.sampled_from(["stop", "toolUse", "error", "aborted"]),
                st.integers(0, 5000),
                st.sampled_from(["text", "empty", "thinking", "retried"]),
            ),
        ),
        st.tuples(st.just("tool"), st.sampled_from(CALLS)),
        st.tuples(st.just("branch"), st.integers(0, 10_000)),
        st.tuples(st.just("reset_leaf"), st.none()),
        st.tuples(st.just("clear"), st.none()),
        st.tuples(st.just("compact"), st.tuples(st.integers(0, 10_000), st.integers(0, 4))),
        st.tuples(st.just("thinking"), st.sampled_from(["low", "high", None, ""])),
        st.tuples(
            st.just("model"),
            st.tuples(st.sampled_from(["default", "smol", "fallback", None]), st.booleans()),
        ),
        st.tuples(st.just("notes"), st.sampled_from(["- a note", "", None])),
        st.tuples(
            st.just("custom_message"),
            st.sampled_from(["interrupted-thinking", "prewalk-plan", "skill-prompt", "note"]),
        ),
        st.tuples(st.just("branch_summary"), st.sampled_from(["", "went elsewhere"])),
        st.tuples(st.just("label"), st.integers(0, 10_000)),
    ),
    max_size=40,
)


def answer(calls: list[str], stop: str, tokens: int, shape: str) -> dict[str, Any]:
    body = assistant("" if shape == "empty" else "a", input=tokens, stop=stop)
    content = body["message"]["content"]
    if shape == "thinking":
        content[:0] = [
            {"type": "redactedThinking", "data": "opaque"},
            {"type": "thinking", "thinking": "hm", "thinkingSignature": "sig"},
        ]
    content += [{"type": "toolCall", "id": c, "name": "read", "arguments": {}} for c in calls]
    if shape == "retried":
        body["message"]["retryRecovery"] = {"kind": "auto-retry", "status": "superseded"}
    return body


def compaction(path: list[str], value: int, kind: int) -> dict[str, Any]:
    kept = path[value % len(path)]
    body: dict[str, Any] = {
        "type": "compaction",
        "summary": f"S{value}",
        "firstKeptEntryId": kept,
        "tokensBefore": value,
        "tokensAfter": value // 2,
        "shortSummary": "short",
    }
    if kind == 1:
        body["preserveData"] = {
            "openaiRemoteCompaction": {"provider": "openai", "replacementHistory": [{"x": 1}]}
        }
        body["providerReplayThroughEntryId"] = path[(value // 3) % len(path)]
    elif kind == 2:
        body["preserveData"] = {"anthropicCompaction": {"provider": "anthropic", "content": "n"}}
        body["firstKeptEntryId"] = ""
        body["providerReplayThroughEntryId"] = path[(value // 3) % len(path)]
    elif kind == 3:
        body["details"] = {"kind": "experimental-context-rollover"}
    return body


def apply(store: SessionStore, operations, after_each=None) -> None:  # type: ignore[no-untyped-def]
    for kind, value in operations:
        if after_each is not None:
            after_each(store)
        ids = [r.id for r in store.records()]
        path = [r.id for r in store.path_records()] or ids
        if kind == "user":
            store.append(user(value))
        elif kind == "assistant":
            store.append(answer(*value))
        elif kind == "tool":
            store.append(
                {
                    "type": "message",
                    "message": {
                        "role": "toolResult",
                        "toolCallId": value,
                        "toolName": "read",
                        "content": [{"type": "text", "text": "out"}],
                        "isError": False,
                    },
                }
            )
        elif kind == "branch" and ids:
            store.branch(ids[value % len(ids)])
        elif kind == "reset_leaf":
            store.reset_leaf()
        elif kind == "clear":
            store.append({"type": "reset_boundary"})
        elif kind == "compact" and path:
            store.append(compaction(path, *value))
        elif kind == "thinking":
            store.append({"type": "thinking_level_change", "thinkingLevel": value})
        elif kind == "model":
            role, empty = value
            change: dict[str, Any] = {"type": "model_change", "model": "" if empty else "p/m"}
            if role is not None:
                change["role"] = role
                change["model"] = "" if empty else f"{role}/m"
            store.append(change)
        elif kind == "notes":
            data: Any = {"version": 1, "text": value} if value is not None else {"version": 2}
            store.append(
                {"type": "custom", "customType": "experimental_context_notes", "data": data}
            )
        elif kind == "custom_message":
            store.append(
                {
                    "type": "custom_message",
                    "customType": value,
                    "content": value,
                    "display": False,
                    "attribution": "user",
                }
            )
        elif kind == "branch_summary":
            store.append(
                {"type": "branch_summary", "fromId": store.leaf_id or "root", "summary": value}
            )
        elif kind == "label" and ids:
            store.append_label(ids[value % len(ids)], f"L{value % 3}" if value % 4 else None)


def check(store: SessionStore) -> None:
    leaf = store.leaf_id
    branch = store.get_branch() if leaf is not None else []
    reference = omp_context_from_path(branch)
    assert store.build_context() == reference
    chars = estimator("chars")
    ids = [entry.id for entry in branch]
    compactions = [i for i, entry in enumerate(branch) if isinstance(entry, CompactionEntry)]
    # usage measured before the latest compaction is ignored, as for every context
    assert store.leaf_view.estimate_context(chars) == estimate_projected_context_tokens(
        reference.messages,
        [ids.index(entry_id) for entry_id in reference.entry_ids],
        compactions[-1] if compactions else -1,
        chars,
    )


def new_store(directory: str) -> SessionStore:
    return SessionStore.open(omp_file(Path(directory) / "omp.jsonl"))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPERATIONS)
def test_the_view_matches_the_reference_after_every_step(operations):  # type: ignore[no-untyped-def]
    with tempfile.TemporaryDirectory() as directory:
        store = new_store(directory)
        try:
            apply(store, operations, after_each=check)
            check(store)
        finally:
            store.close()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPERATIONS)
def test_a_reopened_file_gives_the_same_context(operations):  # type: ignore[no-untyped-def]
    with tempfile.TemporaryDirectory() as directory:
        store = new_store(directory)
        try:
            apply(store, operations)
            if store.records():
                store.branch(store.records()[-1].id)
            expected = store.build_context()
            path = store.path
        finally:
            store.close()
        with SessionStore.open(path, readonly=True) as reopened:
            check(reopened)
            assert reopened.build_context() == expected
