"""Every daemon request through its typed method, against a real daemon."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from sessiond_client import METHODS, ConflictError, SessiondClient
from sessiond_client import types as t

from .conftest import Connect, Spawn
from .helpers import COMPACTABLE, assistant, conversation, message, tool_result, user


async def test_initialize_reports_the_daemon_and_every_method_has_a_client_method(
    spawn: Spawn,
) -> None:
    client = await spawn()
    result = await client.initialize(client_name="pytest", settings={"compaction": {"bogusKey": 1}})
    assert isinstance(result, t.InitializeResult)
    assert result.server_info.name == "sessiond"
    assert result.protocol_version == t.PROTOCOL_VERSION
    # A bad override is a warning, not a failure, and names the key.
    assert any("bogusKey" in warning for warning in result.warnings)
    assert set(result.capabilities.methods) == set(METHODS)
    for name in METHODS.values():
        assert callable(getattr(client, name))


@pytest.mark.parametrize(
    ("version", "warning"),
    [
        (1, 'protocolVersion 1 should be the string "1"'),
        (2.5, "client speaks protocol 2.5; this daemon speaks 1"),
        ({"major": 1}, 'client speaks protocol {"major": 1}; this daemon speaks 1'),
        ("1", None),
    ],
)
async def test_initialize_serves_any_protocol_version_with_a_warning(
    connect: Connect, version: object, warning: str | None
) -> None:
    client = await connect()
    params = {"clientInfo": {"name": "pytest"}, "protocolVersion": version}
    result = await client.request("initialize", params, t.InitializeResult)
    assert result.protocol_version == t.PROTOCOL_VERSION
    version_warnings = [w for w in result.warnings if "protocol" in w]
    assert len(version_warnings) == (warning is not None)
    assert all(w.startswith(warning or "") for w in version_warnings)


async def test_session_lifecycle_and_reading(client: SessiondClient, project: str) -> None:
    created = await client.new_session(cwd=project, write_now=True)
    assert isinstance(created, t.NewSessionResult)
    assert created.persisted and Path(created.path).is_file()
    assert created.header.cwd == project
    sid = created.session_id

    first = await client.append(sid, [message(user("read a.py"))], expect_no_entries=True)
    assert first.leaf_id == first.ids[0]
    assert first.usage.tokens > 0
    batch = await client.append(
        sid,
        [
            message(assistant("reading", tool_call="call-1")),
            message(tool_result("call-1", "print('hi')")),
            message(assistant("a.py prints hi")),
        ],
        expected_leaf_id=first.leaf_id,
    )
    assert len(batch.ids) == 3 and batch.leaf_id == batch.ids[-1]
    with pytest.raises(ConflictError) as stale:
        await client.append(sid, [message(user("late"))], expected_leaf_id=first.leaf_id)
    assert stale.value.details["leafId"] == batch.leaf_id
    with pytest.raises(ConflictError):
        await client.append(sid, [message(user("late"))], expect_no_entries=True)

    page = await client.entries(sid, offset=1, limit=2)
    assert isinstance(page, t.EntriesResult) and page.total == 4
    assert [entry["id"] for entry in page.entries] == batch.ids[:2]
    by_id = await client.entries(sid, ids=[batch.ids[2], first.ids[0]])
    assert [entry["id"] for entry in by_id.entries] == [batch.ids[2], first.ids[0]]
    one = await client.entry(sid, batch.ids[1])
    assert one.entry["message"]["toolCallId"] == "call-1" and one.from_archive is None
    as_written = await client.entry(sid, batch.ids[1], original=True)
    assert as_written.entry == one.entry and as_written.from_archive is False
    walk = await client.path(sid)
    assert [entry["id"] for entry in walk.entries] == first.ids + batch.ids
    partial = await client.path(sid, from_id=batch.ids[0])
    assert len(partial.entries) == 2

    labelled = await client.label(sid, first.ids[0], "start")
    named = await client.set_name(sid, "client test")
    assert named.leaf_id == named.entry_id != labelled.entry_id
    tree = await client.tree(sid)
    assert isinstance(tree, t.TreeResult) and tree.leaf_id == named.entry_id
    nodes = {node.id: node for node in tree.nodes}
    assert nodes[first.ids[0]].label == "start"
    assert nodes[first.ids[0]].preview and "read a.py" in nodes[first.ids[0]].preview
    assert tree.root_ids == [first.ids[0]]

    asked = await client.user_messages(sid)
    assert asked.messages == [{"entryId": first.ids[0], "text": "read a.py"}]

    listed = await client.list_sessions(cwd=project)
    assert [listing.session_id for listing in listed.sessions] == [sid]
    assert listed.sessions[0].name == "client test"
    assert listed.sessions[0].first_message == "read a.py"
    in_dir = await client.list_sessions(session_dir=Path(created.path).parent)
    assert [listing.path for listing in in_dir.sessions] == [created.path]

    assert (await client.close_session(sid)).closed
    reopened = await client.open_session(created.path)
    assert isinstance(reopened, t.OpenSessionResult)
    assert reopened.session_id == sid and reopened.leaf_id == named.entry_id
    assert reopened.entry_count == 6 and reopened.name == "client test"
    assert reopened.recovery is None


async def test_fork_context_and_usage(client: SessiondClient, project: str) -> None:
    sid = (await client.new_session(cwd=project)).session_id
    ids = await conversation(client, sid, turns=2)
    forked = await client.fork(sid, ids[2])
    assert forked.session_id != sid and forked.selected_text.startswith("question 1")
    fork_path = await client.path(forked.session_id)
    assert [entry["id"] for entry in fork_path.entries] == ids[:2]

    agent = await client.build_context(sid)
    assert isinstance(agent, t.BuildContextResult)
    assert agent.entry_ids == ids and agent.usage is not None
    assert [m["role"] for m in agent.messages] == ["user", "assistant"] * 2
    llm = await client.build_context(sid, format="llm", leaf_id=ids[1], context_window=50_000)
    assert llm.entry_ids == ids[:2] and llm.usage is None  # not at the leaf
    assert llm.model == t.ModelRef(provider="anthropic", model_id="claude-test")

    assert agent.warnings == []
    await client.append(sid, [message(assistant("calling", tool_call="orphan-call"))])
    orphaned = await client.build_context(sid)
    assert any("orphan-call" in warning for warning in orphaned.warnings)

    usage = await client.context_usage(sid, context_window=1000)
    assert isinstance(usage, t.Usage)
    assert usage.context_window == 1000 and usage.tokens > 0
    assert usage.percent == pytest.approx(100 * usage.tokens / 1000, abs=0.01)


async def test_settings_global_and_per_session(client: SessiondClient, project: str) -> None:
    before = await client.get_settings()
    assert isinstance(before, t.SettingsResult)
    assert before.settings["compaction"]["tokenEstimator"] == "chars"  # the isolated file
    sid = (await client.new_session(cwd=project)).session_id
    updated = await client.update_settings({"compaction": {"keepRecentTokens": 123}})
    assert updated.settings["compaction"]["keepRecentTokens"] == 123
    session = await client.update_settings({"compaction": {"reserveTokens": 99}}, session_id=sid)
    assert session.settings["compaction"]["reserveTokens"] == 99
    assert session.settings["compaction"]["keepRecentTokens"] == 123  # layered
    assert (await client.get_settings(session_id=sid)).settings["compaction"]["reserveTokens"] == 99
    assert (await client.get_settings()).settings["compaction"]["reserveTokens"] != 99


async def test_usage_follows_every_settings_update(client: SessiondClient, project: str) -> None:
    # The daemon caches merged settings layers; each change must still be seen at once.
    sid = (await client.new_session(cwd=project)).session_id
    await conversation(client, sid, turns=1)

    async def threshold() -> int:
        return (await client.context_usage(sid, context_window=10_000)).threshold

    await client.update_settings({"compaction": {"reserveTokens": 1000}})
    assert await threshold() == 9000
    await client.update_settings({"compaction": {"reserveTokens": 2000}})
    assert await threshold() == 8000
    await client.update_settings({"compaction": {"reserveTokens": 3000}}, session_id=sid)
    assert await threshold() == 7000
    await client.update_settings({"compaction": {"reserveTokens": 2500}})  # session layer wins
    assert await threshold() == 7000
    await client.update_settings({"compaction": {"reserveTokens": 500}}, session_id=sid)
    assert await threshold() == 9500


async def test_turn_end_then_compaction_prepare_and_run(connect: Connect, project: str) -> None:
    client = await connect()
    await client.initialize(settings=COMPACTABLE)
    sid = (await client.new_session(cwd=project)).session_id
    await conversation(client, sid)
    ended = await client.turn_ended(
        sid, context_window=100_000, model=t.ModelRef(provider="anthropic", model_id="claude-test")
    )
    assert isinstance(ended, t.TurnEndedResult)
    assert ended.action == "none" and ended.compaction is None
    assert ended.usage is not None and ended.usage.context_window == 100_000
    # A tiny window puts the context over the threshold: pi's threshold compaction.
    squeezed = await client.turn_ended(sid, context_window=600)
    assert squeezed.compaction is not None and squeezed.compaction.reason == "threshold"
    assert (await client.entry(sid, squeezed.compaction.entry_id)).entry["type"] == "compaction"

    ids = await conversation(client, sid, turns=4)
    prepared = await client.prepare_compaction(sid, include_messages=True)
    assert isinstance(prepared, t.CompactionPreparationWire)
    assert prepared.first_kept_entry_id in ids and prepared.summarize_entry_ids
    assert prepared.previous_summary is not None
    assert prepared.messages_to_summarize is not None
    reviewed = await client.compact(
        sid, summary="## Goal\nreviewed by hand", first_kept_entry_id=prepared.first_kept_entry_id
    )
    assert isinstance(reviewed, t.RunCompactionResult)
    assert reviewed.entry["type"] == "compaction"
    assert reviewed.entry["summary"].startswith("## Goal\nreviewed by hand")
    assert reviewed.entry["firstKeptEntryId"] == prepared.first_kept_entry_id
    assert reviewed.tokens_before == prepared.tokens_before and not reviewed.from_extension


async def test_navigate_and_abort_when_idle(client: SessiondClient, project: str) -> None:
    sid = (await client.new_session(cwd=project)).session_id
    ids = await conversation(client, sid, turns=2)
    moved = await client.navigate(sid, ids[1], label="back here")
    assert isinstance(moved, t.NavigateResult)
    assert not moved.cancelled and moved.summary_entry is None
    # As in pi, the label is an entry of its own under the target, and the new leaf.
    assert moved.leaf_id is not None
    label = (await client.entry(sid, moved.leaf_id)).entry
    assert label["type"] == "label" and label["parentId"] == label["targetId"] == ids[1]
    branched = await client.append(sid, [message(user("another way"))])
    assert (await client.tree(sid)).leaf_id == branched.leaf_id
    summarized = await client.navigate(sid, ids[3], summarize=True)
    assert summarized.summary_entry is not None
    assert summarized.summary_entry["type"] == "branch_summary"
    # Nothing runs: both aborts say so.
    assert (await client.abort_compaction(sid)) == t.AbortResult(aborted=False)
    assert (await client.abort_navigation(sid)) == t.AbortResult(aborted=False)


async def test_mirrors_keep_the_daemon_field_names() -> None:
    from sessiond.api import context_methods, hook_types
    from sessiond.api import types as daemon

    pairs = [
        (t.EntriesResult, daemon.EntriesResult),
        (t.EntryResult, daemon.EntryResult),
        (t.PathResult, daemon.PathResult),
        (t.RunCompactionResult, daemon.RunCompactionResult),
        (t.NavigateResult, daemon.NavigateResult),
        (t.CompactHookParams, hook_types.CompactHookParams),
        (t.TreeHookParams, hook_types.TreeHookParams),
        (t.CompactionPreparationWire, daemon.CompactionPreparationWire),
        (t.BeforeCompactHookParams, hook_types.BeforeCompactHookParams),
        (t.CompactingHookParams, hook_types.CompactingHookParams),
        (t.BuildContextResult, context_methods.BuildContextResult),
    ]
    for mirror, original in pairs:
        names = [f.encode_name for f in msgspec.structs.fields(mirror)]
        assert names == [f.encode_name for f in msgspec.structs.fields(original)], mirror
