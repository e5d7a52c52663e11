"""sessiond against oh-my-pi 18.3.4's own code, on files oh-my-pi wrote and on files
sessiond wrote into.

oh-my-pi runs under Bun from its published bundle (``omp18/``, installed by
``./dev.sh test``; skipped with the reason where it cannot be installed). Its
``SessionManager`` writes the sessions (``omp18/omp_write_sessions.ts``: tool calls and
failures, model and thinking changes, compactions of every kind it writes, branch
summaries, labels, renames, ``/clear``, usage and metadata entries, context notes) and
reads them back (``omp18/omp_reference.ts``). At every leaf, sessiond must build the
context oh-my-pi builds: the same messages (JSON-equal), thinking level and restored
model, and its token count must be that of oh-my-pi's messages. The one planned
difference: the wrapper around context notes is sessiond's own wording (the notes
themselves are the same), so that message is compared without its text.
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from sessiond.core.decode import message_from_dict
from sessiond.core.entries import CustomEntry, TitleChangeEntry
from sessiond.core.messages import message_role
from sessiond.core.omp_turns import CONTEXT_NOTES_TYPE, notes_text
from sessiond.core.title_slot import serialize_title_slot
from sessiond.core.tokens import CharsEstimator, estimate_projected_context_tokens
from sessiond.service.compactor import Compactor
from sessiond.service.navigator import navigate_tree
from sessiond.service.summarizer_setup import summary_context
from sessiond.store.export import llm_messages, messages_json
from sessiond.store.session import SessionStore
from tests.parity.omp_reference import (
    OmpUnavailable,
    omp_reference,
    omp_title_lines,
    write_omp_sessions,
)
from tests.service.helpers import settings_with
from tests.store.helpers import assistant, tool_call, tool_result, user

CHARS = CharsEstimator()


CALLS = ["call-1", "call-2", "call-3"]


def random_operations(seed: int, count: int = 40) -> list[list[Any]]:
    """A session of ``count`` random operations oh-my-pi's SessionManager carries out
    (``replay`` in omp18/omp_write_sessions.ts): every rule of its context meets every
    other, on branches."""
    rng = random.Random(seed)
    operations: list[list[Any]] = []
    for _ in range(count):
        kind = rng.choices(
            [
                "user",
                "answer",
                "result",
                "branch",
                "resetLeaf",
                "clear",
                "compaction",
                "thinking",
                "model",
                "notes",
                "customMessage",
                "branchSummary",
                "label",
            ],
            weights=[10, 12, 8, 4, 1, 2, 3, 2, 2, 2, 3, 2, 2],
        )[0]
        if kind == "user":
            operations.append(["message", user(f"question {rng.random():.3f}")["message"]])
        elif kind == "answer":
            calls = rng.sample(CALLS, rng.randint(0, 2))
            stop = rng.choice(["stop", "toolUse", "error", "aborted"])
            shape = rng.choice(["text", "empty", "thinking", "retried"])
            message = assistant(
                "" if shape == "empty" else "an answer",
                input=rng.randint(0, 9000),
                stop=stop,
                tools=[tool_call("read", path=c) | {"id": c} for c in calls],
            )
            if shape == "thinking":
                message["message"]["content"][:0] = [
                    {"type": "redactedThinking", "data": "opaque"},
                    {"type": "thinking", "thinking": "hm", "thinkingSignature": "sig"},
                ]
            if shape == "retried":
                message["message"]["retryRecovery"] = {"kind": "auto-retry", "status": "superseded"}
            if stop in ("error", "aborted"):
                message["message"]["errorMessage"] = "failed"
            operations.append(["message", message["message"]])
        elif kind == "result":
            call = rng.choice(CALLS)
            operations.append(["message", tool_result("out", tool="read", call_id=call)["message"]])
        elif kind in ("branch", "label"):
            label = rng.choice(["L1", "L2", None])
            operations.append([kind, rng.randint(0, 999)] + ([label] if kind == "label" else []))
        elif kind in ("resetLeaf", "clear"):
            operations.append([kind])
        elif kind == "compaction":
            options: dict[str, Any] = {"tokensAfter": rng.randint(0, 900)}
            variant = rng.randint(0, 4)
            if variant == 1:
                options["preserveData"] = {
                    "openaiRemoteCompaction": {
                        "provider": "openai",
                        "replacementHistory": [{"type": "message"}],
                    }
                }
                options["replayIndex"] = rng.randint(0, 999)
            elif variant == 2:
                options["preserveData"] = {
                    "anthropicCompaction": {"provider": "anthropic", "content": "native"}
                }
                options["replayIndex"] = rng.randint(0, 999)
                options["keptEmpty"] = rng.random() < 0.5
            elif variant == 3:
                options["details"] = {"kind": "experimental-context-rollover"}
            elif variant == 4:
                options["method"] = rng.choice(["handoff", "soft", "remote"])
            short = rng.choice(["short", None])
            operations.append(
                ["compaction", "a summary", short, rng.randint(0, 999), 5000, options]
            )
        elif kind == "thinking":
            operations.append(["thinking", rng.choice(["low", "high", None])])
        elif kind == "model":
            role = rng.choice([None, "default", "smol", "fallback"])
            operations.append(["model", f"{role or 'p'}/m{rng.randint(1, 3)}", role])
        elif kind == "notes":
            data = rng.choice(
                [
                    {"version": 1, "text": "- a note"},
                    {"version": 1, "text": ""},
                    {"version": 2, "text": "x"},
                ]
            )
            operations.append(["custom", "experimental_context_notes", data])
        elif kind == "customMessage":
            custom_type = rng.choice(
                ["interrupted-thinking", "prewalk-plan", "skill-prompt", "note"]
            )
            operations.append(
                [
                    "customMessage",
                    custom_type,
                    "text",
                    rng.random() < 0.5,
                    rng.choice(["user", "agent", None]),
                ]
            )
        elif kind == "branchSummary":
            operations.append(["branchSummary", rng.choice(["", "went elsewhere"])])
    return operations


GENERATED = {f"generated-{seed}": random_operations(seed) for seed in range(12)}


@pytest.fixture(scope="module")
def omp_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    try:
        return write_omp_sessions(tmp_path_factory.mktemp("omp-sessions"), GENERATED)
    except OmpUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def references(omp_files: dict[str, Path]) -> dict[str, dict[str, Any]]:
    answers = omp_reference([(path, None) for path in omp_files.values()])
    return {name: answer for name, answer in zip(omp_files, answers, strict=True)}


def differences(store: SessionStore, leaf: str, want: dict[str, Any]) -> list[str]:
    """How sessiond's context at ``leaf`` ("null": before the first entry) differs from
    oh-my-pi's answer for it."""
    at: str | None = None if leaf == "null" else leaf
    context = store.build_context(at)
    ours = json.loads(messages_json(store, context, "agent"))
    theirs = want["messages"]
    problems: list[str] = []
    for index, (sent, omp) in enumerate(zip(ours, theirs, strict=False)):
        mine = sent
        if sent.get("customType") == CONTEXT_NOTES_TYPE == omp.get("customType"):
            entry = store.get_entry(context.entry_ids[index])
            assert isinstance(entry, CustomEntry)
            text = notes_text(entry.data)
            assert text and text in sent["content"] and text in omp["content"]
            mine = {**sent, "content": omp["content"]}
        if mine != omp:
            problems.append(f"message {index}: sessiond {mine}\n  oh-my-pi {omp}")
            break
    if len(ours) != len(theirs):
        problems.append(f"{len(ours)} messages, oh-my-pi {len(theirs)}")
    if context.thinking_level != want["thinkingLevel"]:
        problems.append(f"thinking {context.thinking_level!r}, oh-my-pi {want['thinkingLevel']!r}")
    model = msgspec.to_builtins(context.model)
    if model != want["model"]:
        problems.append(f"model {model}, oh-my-pi {want['model']}")
    roles = [message_role(e.message) for e in llm_messages(context, store.dialect)]
    if roles != want["llmRoles"]:
        problems.append(f"llm form's roles {roles}, oh-my-pi {want['llmRoles']}")
    return problems


def tokens_at(store: SessionStore, leaf: str) -> int:
    """sessiond's context size at a leaf (what context/usage reports there)."""
    if leaf == "null":
        store.reset_leaf()
    else:
        store.branch(leaf)
    return store.leaf_view.estimate_context(CHARS).tokens


def omp_tokens(store: SessionStore, leaf: str, want: dict[str, Any]) -> int:
    """The size of oh-my-pi's context, measured the way sessiond measures every context
    (pi 1.6's ``estimateProjectedContextTokens``: usage measured before the latest
    compaction on the path is ignored), with the context notes in sessiond's wrapper, as
    sessiond sends them."""
    at = None if leaf == "null" else leaf
    context = store.build_context(at)
    ours = json.loads(messages_json(store, context, "agent"))
    path = [record.id for record in store.path_records(at)] if at is not None else []
    positions = [path.index(entry_id) for entry_id in context.entry_ids]
    compactions = [
        i for i, r in enumerate(store.path_records(at) if at else []) if r.type == "compaction"
    ]
    messages = []
    for index, message in enumerate(want["messages"]):
        notes = message.get("customType") == CONTEXT_NOTES_TYPE
        counted = {**message, "content": ours[index]["content"]} if notes else message
        messages.append(message_from_dict(counted))
    latest = compactions[-1] if compactions else -1
    return estimate_projected_context_tokens(messages, positions, latest, CHARS).tokens


def check_every_leaf(path: Path, answer: dict[str, Any]) -> int:
    """Compare every leaf oh-my-pi answered for; returns how many."""
    failures: list[str] = []
    with SessionStore.open(path, readonly=True) as store:
        for leaf, want in answer["contexts"].items():
            failures += [f"{path.name} at {leaf}: {p}" for p in differences(store, leaf, want)]
            expected = omp_tokens(store, leaf, want)
            if tokens_at(store, leaf) != expected:
                failures.append(
                    f"{path.name} at {leaf}: {tokens_at(store, leaf)} tokens, "
                    f"oh-my-pi's context {expected}"
                )
    assert not failures, "\n".join(failures[:10])
    return len(answer["contexts"])


def test_every_leaf_of_sessions_oh_my_pi_wrote(
    omp_files: dict[str, Path], references: dict[str, dict[str, Any]]
) -> None:
    leaves = sum(check_every_leaf(omp_files[name], references[name]) for name in omp_files)
    assert leaves >= 500  # every entry of every session, and the empty leaf


def test_the_tree_the_name_and_the_labels(
    omp_files: dict[str, Path], references: dict[str, dict[str, Any]]
) -> None:
    for name, path in omp_files.items():
        want = references[name]
        with SessionStore.open(path, readonly=True) as store:
            assert store.dialect.name == "oh-my-pi"
            records = [
                {"id": r.id, "parentId": r.parent_id, "type": r.type} for r in store.records()
            ]
            assert records == want["entries"], name
            assert store.leaf_id == want["leafId"], name
            assert store.name == want["sessionName"], name
            assert dict(store.labels) == want["labels"], name
            children: dict[str, list[str]] = {}
            stack = list(store.get_tree())
            roots = [node.record.id for node in stack]
            while stack:
                node = stack.pop()
                children[node.record.id] = [child.record.id for child in node.children]
                stack += node.children
            assert roots == want["tree"]["rootIds"], name
            assert children == want["tree"]["children"], name


def test_the_title_line_is_the_one_oh_my_pi_writes() -> None:
    names = [
        ("Fix the slug helper", "user", "2026-09-27T10:00:00.000Z"),
        ('Accents: café, 日本語, 🍕 and "quotes" \\ too', "auto", "2026-09-27T10:00:01.000Z"),
        ("long " * 80, "user", "2026-09-27T10:00:02.000Z"),
        ("🍕" * 70, None, "2026-09-27T10:00:03.000Z"),
        ("", "user", "2026-09-27T10:00:04.000Z"),
    ]
    try:
        lines = omp_title_lines(names)
    except OmpUnavailable as exc:
        pytest.skip(str(exc))
    for (title, source, updated_at), line in zip(names, lines, strict=True):
        assert serialize_title_slot(title, source, updated_at) == line.encode("utf-8"), title


# -- what sessiond writes into oh-my-pi's files -------------------------------------------


async def write_into(path: Path) -> None:
    """A session of work done through sessiond on an oh-my-pi file: turns with tool calls
    and failures, oh-my-pi's own entry types, a compaction, a branch summary, labels and
    a rename."""
    settings = settings_with(compaction={"keepRecentTokens": 400, "tokenEstimator": "chars"})
    with SessionStore.open(path) as store:
        start = store.leaf_id
        store.append_entries(
            [
                {"type": "model_change", "model": "openai/gpt-5", "role": "default"},
                {"type": "thinking_level_change", "thinkingLevel": "low", "configured": "low"},
                user("Now rename the module and update the imports."),
                assistant(
                    "Reading first.",
                    tools=[tool_call("read", path="src/slug.py")],
                    stop="toolUse",
                    provider="openai",
                    model="gpt-5",
                ),
                tool_result("def slug(text): ...", tool="read", call_id="call-read"),
                assistant("Renamed; one import is left.", input=2400, provider="openai"),
                assistant(
                    "",
                    tools=[tool_call("bash", command="pytest")],
                    stop="error",
                    errorMessage="overloaded",
                ),
                tool_result("aborted", tool="bash", call_id="call-bash"),
                {"type": "reset_boundary"},
                user("Fresh start: only the docs now. " + "Explain every flag. " * 30),
                assistant("Docs drafted. " + "It covers the flags. " * 30, input=3200),
                {
                    "type": "custom_message",
                    "customType": "review-note",
                    "content": "checked by a reviewer",
                    "display": True,
                    "attribution": "user",
                },
                {
                    "type": "model_usage",
                    "purpose": "title",
                    "api": "openai-responses",
                    "provider": "openai",
                    "model": "gpt-5-mini",
                    "stopReason": "stop",
                    "usage": assistant()["message"]["usage"],
                },
                user("And a changelog entry. " + "Mention the rename. " * 30),
                assistant("Changelog written. " + "With the rename. " * 30, input=4800),
            ]
        )
        store.append_label(start or store.leaf_id or "", "before sessiond")
        outcome = await Compactor(store, settings.compaction, CHARS).run(
            summary_context(settings, mode="manual")
        )
        assert outcome.entry.tokens_after == outcome.tokens_after
        store.append_entries([user("One more question."), assistant("One more answer.")])
        target = next(r.id for r in store.path_records() if r.role == "user")
        await navigate_tree(
            store,
            settings,
            CHARS,
            target_id=target,
            summaries=summary_context(settings, mode="manual"),
            summarize=True,
        )
        store.append_entries([user("Back on the first branch."), assistant("Understood.")])
        store.set_name("Renamed by sessiond: café ☕")


@pytest.fixture(scope="module")
def written_by_sessiond(
    omp_files: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    import asyncio

    path = tmp_path_factory.mktemp("sessiond-wrote") / "turns.jsonl"
    shutil.copyfile(omp_files["turns"], path)
    asyncio.run(write_into(path))
    yield path


def test_oh_my_pi_reads_what_sessiond_wrote(written_by_sessiond: Path) -> None:
    [answer] = omp_reference([(written_by_sessiond, None)])
    assert answer["unchangedByOpen"]
    check_every_leaf(written_by_sessiond, answer)
    assert answer["sessionName"] == "Renamed by sessiond: café ☕"
    assert answer["header"]["titleSource"] == "user"
    with SessionStore.open(written_by_sessiond, readonly=True) as store:
        assert store.name == answer["sessionName"]
        assert [r.id for r in store.records()] == [e["id"] for e in answer["entries"]]


def test_sessiond_writes_the_fields_oh_my_pi_writes(
    omp_files: dict[str, Path], written_by_sessiond: Path
) -> None:
    """Each entry type sessiond writes on its own (compaction, branch summary, label,
    rename) has oh-my-pi's keys in oh-my-pi's order: the fullest line oh-my-pi wrote of
    that type is the model."""
    theirs: dict[str, list[str]] = {}
    for path in omp_files.values():
        for line in path.read_bytes().splitlines()[2:]:
            value = json.loads(line)
            if len(value) > len(theirs.get(value["type"], [])):
                theirs[value["type"]] = list(value)
    original = omp_files["turns"].read_bytes().count(b"\n")
    ours: dict[str, list[list[str]]] = {}
    for line in written_by_sessiond.read_bytes().splitlines()[original:]:
        value = json.loads(line)
        ours.setdefault(value["type"], []).append(list(value))
    for kind in ("compaction", "branch_summary", "label", "title_change"):
        assert kind in ours, kind
        for keys in ours[kind]:
            assert set(keys) <= set(theirs[kind]), (kind, keys, theirs[kind])
            assert keys == [key for key in theirs[kind] if key in keys], (kind, keys)
    [rename] = [value for value in ours["title_change"]]
    assert "fromHook" not in ours["compaction"][0] and "fromHook" not in ours["branch_summary"][0]
    assert rename[:4] == ["type", "id", "parentId", "timestamp"]
    line = written_by_sessiond.read_bytes()[:256]
    with SessionStore.open(written_by_sessiond, readonly=True) as store:
        change = [e for e in store.entries() if isinstance(e, TitleChangeEntry)][-1]
    assert line == serialize_title_slot(change.title, "user", change.timestamp)
