"""Hooks and ``llm/complete`` answered by the client, as the daemon sends them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sessiond_client import OperationCancelledError, SessiondClient
from sessiond_client import types as t

from .conftest import Connect
from .helpers import COMPACTABLE, conversation, with_candidates


async def _session(client: SessiondClient, project: str, turns: int = 6) -> tuple[str, list[str]]:
    sid = (await client.new_session(cwd=project)).session_id
    return sid, await conversation(client, sid, turns)


async def test_before_compact_cancel_stops_the_compaction(connect: Connect, project: str) -> None:
    client = await connect()
    asked: list[t.BeforeCompactHookParams] = []

    @client.handle_before_compact
    async def veto(params: t.BeforeCompactHookParams) -> t.BeforeCompactHookResult:
        asked.append(params)
        return t.BeforeCompactHookResult(cancel=True)

    await client.initialize(settings=COMPACTABLE)  # declares the hook: it has a handler
    sid, ids = await _session(client, project)
    with pytest.raises(OperationCancelledError) as cancelled:
        await client.compact(sid, custom_instructions="focus on the answers")
    assert cancelled.value.message == "Compaction cancelled"
    assert len(asked) == 1 and asked[0].session_id == sid
    assert asked[0].custom_instructions == "focus on the answers"
    assert asked[0].preparation.messages_to_summarize  # hooks get the messages
    # Nothing was written.
    assert (await client.tree(sid)).leaf_id == ids[-1]


async def test_before_compact_override_supplies_the_summary(connect: Connect, project: str) -> None:
    client = await connect()

    @client.handle_before_compact
    async def supply(params: t.BeforeCompactHookParams) -> t.BeforeCompactHookResult:
        prep = params.preparation
        return t.BeforeCompactHookResult(
            compaction=t.CompactionResult(
                summary="## Goal\nsummary from the client's hook",
                first_kept_entry_id=prep.first_kept_entry_id,
                tokens_before=prep.tokens_before,
                details={"by": "pytest"},
            )
        )

    compacted: list[t.CompactHookParams] = []
    client.subscribe(lambda n: compacted.append(n.params), ["hooks/session_compact"])
    result = await client.initialize(settings=COMPACTABLE)
    assert "session_compact" in result.capabilities.hooks
    sid, _ = await _session(client, project)
    done = await client.compact(sid)
    assert done.from_extension
    assert done.entry["summary"] == "## Goal\nsummary from the client's hook"
    assert done.entry["details"] == {"by": "pytest"}
    # The session_compact notification hook was declared (a subscriber named it) and came.
    assert len(compacted) == 1 and compacted[0].compaction_entry["id"] == done.entry["id"]
    assert compacted[0].from_extension


async def test_compacting_hook_and_llm_complete_answered_by_the_client(
    connect: Connect, project: str
) -> None:
    client = await connect()
    requests: list[t.LlmCompleteParams] = []

    @client.handle_compacting
    async def extend(params: t.CompactingHookParams) -> t.CompactingHookResult:
        assert params.messages and params.messages[0]["role"] == "user"
        return t.CompactingHookResult(context=["REMEMBER-THE-CLIENT-CONTEXT"])

    @client.handle_llm_complete
    async def complete(request: t.LlmCompleteParams) -> str:
        requests.append(request)
        return f"## Goal\nclient model summary ({request.purpose})"

    settings = with_candidates({"kind": "client"})
    await client.initialize(settings=settings)  # llm=None: declared, a handler exists
    sid, _ = await _session(client, project)
    progress: list[t.WorkDoneProgress] = []
    done = await client.compact(sid, progress=progress.append)
    assert done.entry["summary"].startswith("## Goal\nclient model summary (history)")
    assert [r.purpose for r in requests] == ["history"]
    assert "REMEMBER-THE-CLIENT-CONTEXT" in requests[0].prompt
    assert requests[0].system_prompt and requests[0].max_tokens > 0
    assert done.entry["details"]["summarizer"]["models"] == ["client/editor"]
    assert done.entry["details"]["summarizer"]["extractive"] is False
    # $/progress for our token reached the callback: begin first, end last.
    assert isinstance(progress[0], t.WorkDoneBegin) and progress[0].title
    assert isinstance(progress[-1], t.WorkDoneEnd)


async def test_llm_complete_cancelled_by_the_client(connect: Connect, project: str) -> None:
    client = await connect()

    @client.handle_llm_complete
    async def refuse(request: t.LlmCompleteParams) -> str:
        raise OperationCancelledError("the user pressed escape")

    await client.initialize(settings=with_candidates({"kind": "client"}))
    sid, ids = await _session(client, project)
    with pytest.raises(OperationCancelledError):
        await client.compact(sid)
    assert (await client.tree(sid)).leaf_id == ids[-1]


async def test_failing_and_slow_hooks_count_as_no_answer(connect: Connect, project: str) -> None:
    client = await connect()
    slow_cancelled = asyncio.Event()

    @client.handle_before_compact
    async def broken(params: t.BeforeCompactHookParams) -> t.BeforeCompactHookResult:
        raise RuntimeError("extension crashed")

    @client.handle_compacting
    async def slow(params: t.CompactingHookParams) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            slow_cancelled.set()  # the daemon's $/cancelRequest after its timeout
            raise

    await client.initialize(settings={**COMPACTABLE, "hooks": {"timeoutMs": 300}})
    sid, _ = await _session(client, project)
    done = await asyncio.wait_for(client.compact(sid), 10)
    assert slow_cancelled.is_set()
    problems = done.entry["details"]["hookProblems"]
    assert any("RuntimeError: extension crashed" in problem for problem in problems)
    assert any("timed out" in problem for problem in problems)


async def test_before_tree_cancel_and_override(connect: Connect, project: str) -> None:
    client = await connect()
    answers: list[t.BeforeTreeHookResult | None] = [
        t.BeforeTreeHookResult(cancel=True),
        t.BeforeTreeHookResult(
            summary=t.SuppliedBranchSummary(summary="branch told by the client")
        ),
    ]
    asked: list[t.BeforeTreeHookParams] = []

    @client.handle_before_tree
    async def decide(params: t.BeforeTreeHookParams) -> t.BeforeTreeHookResult | None:
        asked.append(params)
        return answers.pop(0)

    trees: list[t.TreeHookParams] = []
    client.subscribe(lambda n: trees.append(n.params), ["hooks/session_tree"])
    await client.initialize()
    sid, ids = await _session(client, project, turns=2)

    refused = await client.navigate(sid, ids[1], summarize=True)
    assert refused.cancelled and (await client.tree(sid)).leaf_id == ids[-1]
    assert asked[0].target_id == ids[1] and asked[0].user_wants_summary
    assert asked[0].entry_ids_to_summarize == ids[2:]

    moved = await client.navigate(sid, ids[1], summarize=True)
    assert not moved.cancelled and moved.summary_entry is not None
    assert moved.summary_entry["summary"] == "branch told by the client"
    assert moved.summary_entry["fromHook"] is True
    assert [tree.new_leaf_id for tree in trees] == [moved.leaf_id]
    assert trees[0].old_leaf_id == ids[-1]


async def test_undeclared_hooks_are_not_sent(connect: Connect, project: str) -> None:
    client = await connect()
    calls: list[Any] = []

    @client.handle_before_compact
    async def never(params: t.BeforeCompactHookParams) -> t.BeforeCompactHookResult:
        calls.append(params)
        return t.BeforeCompactHookResult(cancel=True)

    await client.initialize(hooks=[], settings=COMPACTABLE)
    sid, _ = await _session(client, project)
    assert (await client.compact(sid)).entry["type"] == "compaction"
    assert calls == []


async def test_abort_reaches_a_running_llm_complete_handler(connect: Connect, project: str) -> None:
    client = await connect()
    entered, cancelled = asyncio.Event(), asyncio.Event()

    @client.handle_llm_complete
    async def think(request: t.LlmCompleteParams) -> str:
        entered.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()  # the daemon's $/cancelRequest, sent when the run was aborted
            raise
        return "never"

    await client.initialize(settings=with_candidates({"kind": "client"}))
    sid, ids = await _session(client, project)
    running = asyncio.create_task(client.compact(sid))
    await asyncio.wait_for(entered.wait(), 5)
    assert (await client.abort_compaction(sid)).aborted
    with pytest.raises(OperationCancelledError):
        await asyncio.wait_for(running, 5)
    await asyncio.wait_for(cancelled.wait(), 5)
    assert (await client.tree(sid)).leaf_id == ids[-1]


async def test_tree_abort_while_the_before_tree_hook_is_asked(
    connect: Connect, project: str
) -> None:
    """tree/abort withdraws the pending hook request ($/cancelRequest) and ends the
    navigation at once: nothing written, the hook's late answer never used."""
    client = await connect()
    entered, withdrawn = asyncio.Event(), asyncio.Event()

    @client.handle_before_tree
    async def ponder(params: t.BeforeTreeHookParams) -> t.BeforeTreeHookResult:
        entered.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            withdrawn.set()
            raise
        return t.BeforeTreeHookResult(summary=t.SuppliedBranchSummary(summary="too late"))

    await client.initialize(settings={**COMPACTABLE, "hooks": {"timeoutMs": 25_000}})
    sid, ids = await _session(client, project, turns=2)
    navigating = asyncio.create_task(client.navigate(sid, ids[1], summarize=True))
    await asyncio.wait_for(entered.wait(), 10)
    assert (await client.abort_navigation(sid)).aborted
    # Answered within 10 s of the abort: not after the hook's 25 s timeout.
    result = await asyncio.wait_for(navigating, 10)
    assert result.cancelled and result.aborted and result.summary_entry is None
    await asyncio.wait_for(withdrawn.wait(), 10)
    tree = await client.tree(sid)
    assert tree.leaf_id == ids[-1] and (await client.entries(sid)).total == len(ids)
