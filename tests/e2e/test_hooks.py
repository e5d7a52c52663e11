"""Hooks and ``llm/complete``: the daemon asking its clients, over a Unix socket.

pi's rules as sessiond applies them to clients: only clients that declared a hook
and have the session open are asked, in connection order; the last non-empty
answer wins and ``cancel`` stops at once; a timeout or an error answer counts as
no answer and is recorded in the entry's ``details.hookProblems``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from pygls.exceptions import JsonRpcException

from tests.e2e.conftest import private_root
from tests.e2e.support import (
    FAST_SETTINGS,
    NULL,
    AgentClient,
    Daemon,
    conversation,
    error_data,
    file_lines,
    isolated_env,
    reopen,
    start_listening_daemon,
)
from tests.fake_provider import FakeProvider, default_answer

pytestmark = pytest.mark.asyncio(loop_scope="module")
ROOT = private_root("hooks")

Connect = Callable[..., Awaitable[AgentClient]]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def daemon(module_provider: FakeProvider) -> AsyncIterator[Daemon]:
    # Summarizer endpoints come from the daemon's settings file, never from a client:
    # ``client_settings`` names this configured candidate.
    settings = {
        **FAST_SETTINGS,
        "summarizer": {"candidates": [module_provider.candidate(model="m")]},
    }
    running = await start_listening_daemon(
        ROOT, ["--socket", str(ROOT / "hooks.sock")], isolated_env(ROOT, settings)
    )
    yield running
    assert await running.stop() == 0, running.log_text()


def client_settings(provider: FakeProvider, **compaction: Any) -> dict[str, Any]:
    return {
        "summarizer": {"candidates": [provider.candidate(model="m")]},
        "compaction": {"keepRecentTokens": 200, "shortSummary": False, **compaction},
    }


@pytest_asyncio.fixture(loop_scope="module")
async def connect(daemon: Daemon, module_provider: FakeProvider) -> AsyncIterator[Connect]:
    opened: list[AgentClient] = []
    module_provider.requests.clear()
    module_provider.responder = default_answer

    async def open_client(name: str, **initialize: Any) -> AgentClient:
        client = AgentClient(name)
        await client.start_unix(daemon.address)
        opened.append(client)
        initialize.setdefault("settings", client_settings(module_provider))
        await client.initialize(**initialize)
        return client

    yield open_client
    for client in opened:
        if not client.stopped:
            await client.disconnect()


async def new_session(client: AgentClient, turns: int = 4) -> tuple[str, Path, list[str]]:
    created = await client.call("session/new", {"cwd": str(ROOT / "project"), "writeNow": True})
    appended = await client.call(
        "session/append",
        {"sessionId": created["sessionId"], "entries": conversation(turns, words=40)},
    )
    return created["sessionId"], Path(created["path"]), appended["ids"]


def supplied(preparation: dict[str, Any], summary: str, **extra: Any) -> dict[str, Any]:
    return {
        "compaction": {
            "summary": summary,
            "firstKeptEntryId": preparation["firstKeptEntryId"],
            "tokensBefore": preparation["tokensBefore"],
            **extra,
        }
    }


# -- session_before_compact ------------------------------------------------------------------------


async def test_before_compact_cancel_writes_nothing(
    connect: Connect, module_provider: FakeProvider
) -> None:
    client = await connect("canceller", hooks=["session_before_compact", "session.compacting"])
    client.answers["hooks/session_before_compact"] = {"cancel": True}
    sid, path, ids = await new_session(client)
    before = path.read_bytes()
    with pytest.raises(JsonRpcException) as refused:
        await client.call("compaction/run", {"sessionId": sid})
    assert refused.value.message == "Compaction cancelled"
    assert error_data(refused.value)["kind"] == "cancelled"
    assert path.read_bytes() == before
    assert module_provider.requests == []
    assert [method for method, _ in client.asked] == ["hooks/session_before_compact"]
    params = client.asked[0][1]
    assert params["sessionId"] == sid
    assert (
        params["preparation"]["summarizeEntryIds"]
        == ids[: len(params["preparation"]["summarizeEntryIds"])]
    )
    assert params["preparation"]["messagesToSummarize"][0]["role"] == "user"
    ended = await client.wait_for("compaction/ended")
    assert ended["aborted"] is True and "entryId" not in ended
    leaf = await client.call("session/path", {"sessionId": sid})
    assert leaf["entries"][-1]["id"] == ids[-1]


async def test_before_compact_supplied_compaction_is_used_verbatim(
    connect: Connect, module_provider: FakeProvider
) -> None:
    client = await connect(
        "supplier", hooks=["session_before_compact", "session.compacting", "session_compact"]
    )
    client.answers["hooks/session_before_compact"] = lambda params: supplied(
        params["preparation"],
        "Summary written by the extension.",
        details={"by": "extension", "files": ["a.py"]},
        preserveData={"memory": 7},
    )
    sid, path, _ = await new_session(client)
    run = await client.call("compaction/run", {"sessionId": sid, "customInstructions": "focus"})
    preparation = client.asked[0][1]["preparation"]
    assert client.asked[0][1]["customInstructions"] == "focus"
    assert run["fromExtension"] is True
    entry = file_lines(path)[-1]
    assert entry == run["entry"]
    assert entry["summary"] == "Summary written by the extension."
    assert entry["firstKeptEntryId"] == preparation["firstKeptEntryId"]
    assert entry["tokensBefore"] == preparation["tokensBefore"]
    assert entry["details"] == {"by": "extension", "files": ["a.py"]}
    assert entry["preserveData"] == {"memory": 7}
    assert entry["fromHook"] is True and entry["fromExtension"] is True
    assert module_provider.requests == [], "no summarizer call"
    assert [m for m, _ in client.asked] == ["hooks/session_before_compact"], (
        "session.compacting is not asked when a hook supplied the compaction"
    )
    notified = await client.wait_for("hooks/session_compact")
    assert notified["fromExtension"] is True
    assert notified["compactionEntry"]["id"] == entry["id"]


async def test_hook_timeout_counts_as_no_answer(
    connect: Connect, module_provider: FakeProvider
) -> None:
    cancelled: list[str] = []

    async def slow(params: Any) -> Any:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append("before_compact")
            raise
        return {"cancel": True}

    settings = client_settings(module_provider)
    settings["hooks"] = {"timeoutMs": 300}
    client = await connect("slowpoke", hooks=["session_before_compact"], settings=settings)
    client.answers["hooks/session_before_compact"] = slow
    sid, path, _ = await new_session(client)
    started = time.monotonic()
    run = await client.call("compaction/run", {"sessionId": sid})
    elapsed = time.monotonic() - started
    # Had the daemon waited for the hook's answer (a minute later), its {cancel} would have
    # won: the entry below shows it did not. Nor did it give up before the 0.3 s were due.
    assert elapsed >= 0.3, elapsed
    entry = file_lines(path)[-1]
    assert entry["id"] == run["entry"]["id"] and run["fromExtension"] is False
    assert entry["summary"].startswith("## Goal\nhistory summary of")
    problems = entry["details"]["hookProblems"]
    assert len(problems) == 1
    assert "slowpoke" in problems[0] and "session_before_compact" in problems[0]
    assert "timed out after 0.3 s" in problems[0]
    logged = await client.wait_for("window/logMessage", lambda p: "timed out" in p["message"])
    assert logged["type"] == 2 and problems[0] in logged["message"]
    assert module_provider.purposes() == ["history"]
    # The daemon withdrew its request ($/cancelRequest), so the handler was cancelled.
    for _ in range(100):
        if cancelled:
            break
        await asyncio.sleep(0.02)
    assert cancelled == ["before_compact"]


async def test_hook_error_counts_as_no_answer(
    connect: Connect, module_provider: FakeProvider
) -> None:
    client = await connect("broken", hooks=["session_before_compact", "session.compacting"])
    client.answers["hooks/session_before_compact"] = RuntimeError("extension exploded")
    client.answers["hooks/session.compacting"] = ValueError("compacting exploded too")
    sid, path, _ = await new_session(client)
    run = await client.call("compaction/run", {"sessionId": sid})
    assert run["fromExtension"] is False
    entry = file_lines(path)[-1]
    assert entry["type"] == "compaction" and entry["fromHook"] is False
    problems = entry["details"]["hookProblems"]
    assert len(problems) == 2
    assert "session_before_compact failed" in problems[0] and "extension exploded" in problems[0]
    assert "session.compacting failed" in problems[1] and "compacting exploded too" in problems[1]
    assert module_provider.purposes() == ["history"]


async def test_compacting_context_reaches_the_summarizer(
    connect: Connect, module_provider: FakeProvider
) -> None:
    client = await connect("contextual", hooks=["session.compacting"])
    client.answers["hooks/session.compacting"] = {
        "context": ["The user prefers tabs.", "Ticket PROJ-7 is the goal."],
        "preserveData": {"ticket": "PROJ-7"},
    }
    sid, path, _ = await new_session(client)
    await client.call("compaction/run", {"sessionId": sid})
    messages = client.asked[0][1]["messages"]
    assert messages[0]["role"] == "user" and "Request turn 0" in messages[0]["content"]
    (prompt,) = module_provider.prompts()
    assert (
        "<additional-context>\n- The user prefers tabs.\n- Ticket PROJ-7 is the goal.\n"
        "</additional-context>"
    ) in prompt
    entry = file_lines(path)[-1]
    assert entry["preserveData"] == {"ticket": "PROJ-7"}
    assert "hookProblems" not in entry["details"]


async def test_compacting_prompt_replaces_the_instructions(
    connect: Connect, module_provider: FakeProvider
) -> None:
    client = await connect("prompter", hooks=["session.compacting"])
    client.answers["hooks/session.compacting"] = {"prompt": "Summarize in exactly one haiku."}
    sid, _, _ = await new_session(client)
    await client.call("compaction/run", {"sessionId": sid})
    (prompt,) = module_provider.prompts()
    assert prompt.rstrip().endswith("Summarize in exactly one haiku.")


# -- several clients -------------------------------------------------------------------------------


async def test_clients_are_asked_in_connection_order_and_the_last_answer_wins(
    connect: Connect, module_provider: FakeProvider
) -> None:
    first = await connect("first", hooks=["session_before_compact"])
    second = await connect("second", hooks=["session_before_compact"])
    bystander = await connect("bystander", hooks=["session_before_compact"])
    second.events = first.events
    sid, path, _ = await new_session(second)
    await first.call("session/open", {"path": str(path)})
    first.answers["hooks/session_before_compact"] = lambda p: supplied(
        p["preparation"], "from first"
    )
    second.answers["hooks/session_before_compact"] = lambda p: supplied(
        p["preparation"], "from second"
    )
    run = await second.call("compaction/run", {"sessionId": sid})
    assert first.events == [
        "first:hooks/session_before_compact",
        "second:hooks/session_before_compact",
    ]
    assert run["entry"]["summary"] == "from second"
    assert bystander.asked == [], "a client without the session open is not asked"

    # An empty answer is no answer: the earlier one stands.
    first.events.clear()
    await second.call(
        "session/append", {"sessionId": sid, "entries": conversation(3, words=40, tag="more")}
    )
    second.answers["hooks/session_before_compact"] = {}
    run = await first.call("compaction/run", {"sessionId": sid})
    assert first.events == [
        "first:hooks/session_before_compact",
        "second:hooks/session_before_compact",
    ]
    assert run["entry"]["summary"] == "from first"

    # cancel stops at once: the second client is not asked.
    first.events.clear()
    await second.call(
        "session/append", {"sessionId": sid, "entries": conversation(3, words=40, tag="again")}
    )
    first.answers["hooks/session_before_compact"] = {"cancel": True}
    second.answers["hooks/session_before_compact"] = lambda p: supplied(p["preparation"], "late")
    with pytest.raises(JsonRpcException) as refused:
        await second.call("compaction/run", {"sessionId": sid})
    assert refused.value.message == "Compaction cancelled"
    assert first.events == ["first:hooks/session_before_compact"]
    assert module_provider.requests == []


# -- session_before_tree ---------------------------------------------------------------------------


async def test_before_tree_cancel_keeps_the_leaf(
    connect: Connect, module_provider: FakeProvider
) -> None:
    client = await connect("tree-canceller", hooks=["session_before_tree", "session_tree"])
    client.answers["hooks/session_before_tree"] = {"cancel": True}
    sid, path, ids = await new_session(client)
    before = path.read_bytes()
    result = await client.call(
        "tree/navigate", {"sessionId": sid, "targetId": ids[3], "summarize": True}
    )
    assert result["cancelled"] is True and result["leafId"] == ids[-1]
    assert path.read_bytes() == before
    assert module_provider.requests == []
    asked = client.asked[0][1]
    assert asked["targetId"] == ids[3] and asked["oldLeafId"] == ids[-1]
    assert asked["entryIdsToSummarize"] == ids[4:]
    assert asked["userWantsSummary"] is True
    await asyncio.sleep(0.1)
    assert client.received("hooks/session_tree") == []
    still = await client.call("session/path", {"sessionId": sid})
    assert still["entries"][-1]["id"] == ids[-1]


async def test_before_tree_summary_and_label_override(
    connect: Connect, module_provider: FakeProvider
) -> None:
    client = await connect("tree-writer", hooks=["session_before_tree", "session_tree"])
    client.answers["hooks/session_before_tree"] = {
        "summary": {"summary": "What the abandoned branch tried.", "details": {"tried": 2}},
        "label": "checkpoint",
    }
    sid, path, ids = await new_session(client)
    target = ids[4]  # a user message: the leaf goes to its parent, its text to the editor
    result = await client.call(
        "tree/navigate", {"sessionId": sid, "targetId": target, "summarize": True}
    )
    assert result["cancelled"] is False
    assert result["editorText"].startswith("Request turn 2")
    summary = result["summaryEntry"]
    assert summary["summary"] == "What the abandoned branch tried."
    assert summary["details"] == {"tried": 2}
    assert summary["parentId"] == ids[3]
    assert summary["fromHook"] is True and summary["fromExtension"] is True
    assert module_provider.requests == []
    lines = file_lines(path)
    label = lines[-1]
    assert label["type"] == "label" and label["targetId"] == summary["id"]
    assert label["label"] == "checkpoint"
    assert result["leafId"] == label["id"]
    notified = await client.wait_for("hooks/session_tree")
    assert notified["fromExtension"] is True
    assert notified["summaryEntry"]["id"] == summary["id"]
    assert notified["oldLeafId"] == ids[-1] and notified["newLeafId"] == label["id"]
    tree = await client.call("session/tree", {"sessionId": sid})
    labelled = {n["id"]: n.get("label") for n in tree["nodes"]}
    assert labelled[summary["id"]] == "checkpoint"


# -- llm/complete ----------------------------------------------------------------------------------


async def test_client_summarizer_gets_the_request_and_its_answer_is_the_summary(
    connect: Connect, module_provider: FakeProvider
) -> None:
    settings = {
        "summarizer": {"candidates": [{"kind": "client", "contextWindow": 32000}]},
        "compaction": {"keepRecentTokens": 200, "shortSummary": True},
    }
    editor = await connect("vscode", llm=True, settings=settings)

    def complete(params: dict[str, Any]) -> dict[str, str]:
        return {"text": f"Editor summary ({params['purpose']})"}

    editor.answers["llm/complete"] = complete
    sid, path, _ = await new_session(editor)
    run = await editor.call("compaction/run", {"sessionId": sid})
    calls = [params for method, params in editor.asked if method == "llm/complete"]
    assert [c["purpose"] for c in calls] == ["history", "short"]
    history = calls[0]
    assert set(history) >= {"systemPrompt", "prompt", "maxTokens", "purpose"}
    assert "<conversation>" in history["prompt"] and "Request turn 0" in history["prompt"]
    assert history["maxTokens"] == int(0.8 * 16384)
    entry = file_lines(path)[-1]
    assert entry["id"] == run["entry"]["id"]
    assert entry["summary"].startswith("Editor summary (history)")
    assert entry["shortSummary"] == "Editor summary (short)"
    assert entry["details"]["summarizer"]["models"] == ["client/editor"]
    assert entry["details"]["summarizer"]["extractive"] is False
    assert module_provider.requests == []


async def test_client_summarizer_needs_a_client_that_offers_it(connect: Connect) -> None:
    settings = {
        "summarizer": {"candidates": [{"kind": "client"}]},
        "compaction": {"keepRecentTokens": 200, "shortSummary": False},
    }
    plain = await connect("no-llm", llm=False, settings=settings)
    sid, path, _ = await new_session(plain)
    before = path.read_bytes()
    # Nobody to ask. A manual run asked for a model's summary: pi's credentials error.
    with pytest.raises(JsonRpcException) as refused:
        await plain.call("compaction/run", {"sessionId": sid})
    assert error_data(refused.value)["kind"] == "summarizerFailed"
    assert refused.value.message.startswith("Compaction requires a model with usable credentials")
    assert [a["outcome"] for a in error_data(refused.value)["attempts"]] == ["skipped"]
    assert path.read_bytes() == before
    # An automatic run falls back to the offline extractive summarizer.
    ended = await plain.call("agent/turnEnded", {"sessionId": sid, "contextWindow": 600})
    assert [m for m, _ in plain.asked] == []
    entry = file_lines(path)[-1]
    assert entry["id"] == ended["compaction"]["entryId"]
    assert entry["details"]["summarizer"]["extractive"] is True
    store = reopen(path)
    store.close()


# -- $/progress ------------------------------------------------------------------------------------


async def test_progress_for_a_compaction_with_a_work_done_token(
    connect: Connect, module_provider: FakeProvider
) -> None:
    client = await connect("progress-watcher")
    sid, path, _ = await new_session(client)
    run = await client.call("compaction/run", {"sessionId": sid, "workDoneToken": "tok-1"})
    progress = [p for p in client.received("$/progress") if p["token"] == "tok-1"]
    kinds = [p["value"]["kind"] for p in progress]
    assert kinds[0] == "begin" and kinds[-1] == "end"
    assert set(kinds[1:-1]) <= {"report"}
    assert progress[0]["value"]["title"] == "Compacting the session"
    assert progress[0]["value"]["cancellable"] is True
    assert file_lines(path)[-1]["id"] == run["entry"]["id"]
    # Without a token there is no progress.
    await client.call(
        "session/append", {"sessionId": sid, "entries": conversation(3, words=40, tag="x")}
    )
    await client.call("compaction/run", {"sessionId": sid})
    assert len(client.received("$/progress")) == len(progress)


async def test_a_null_answer_is_no_answer_and_no_problem(
    connect: Connect, module_provider: FakeProvider
) -> None:
    # vscode-jsonrpc answers null for a handler that returns undefined: "nothing to add".
    client = await connect(
        "undefined-returner", hooks=["session_before_compact", "session.compacting"]
    )
    client.answers["hooks/session_before_compact"] = NULL
    client.answers["hooks/session.compacting"] = NULL
    sid, path, _ = await new_session(client)
    run = await client.call("compaction/run", {"sessionId": sid})
    assert [m for m, _ in client.asked] == [
        "hooks/session_before_compact",
        "hooks/session.compacting",
    ]
    entry = file_lines(path)[-1]
    assert entry["id"] == run["entry"]["id"] and run["fromExtension"] is False
    assert module_provider.purposes() == ["history"]
    assert "hookProblems" not in entry["details"], entry["details"]


async def test_a_client_gone_while_asked_counts_as_no_answer(
    connect: Connect, module_provider: FakeProvider
) -> None:
    agent = await connect("agent")
    flaky = await connect("flaky-extension", hooks=["session_before_compact"])
    sid, path, _ = await new_session(agent)
    await flaky.call("session/open", {"path": str(path)})

    crashes: list[asyncio.Future[None]] = []

    async def vanish(params: Any) -> Any:
        # The extension host crashes while it is thinking about the answer.
        crashes.append(asyncio.ensure_future(flaky.disconnect()))
        await asyncio.sleep(5)
        return {"cancel": True}

    flaky.answers["hooks/session_before_compact"] = vanish
    run = await agent.call("compaction/run", {"sessionId": sid})
    assert run["fromExtension"] is False
    entry = file_lines(path)[-1]
    (problem,) = entry["details"]["hookProblems"]
    assert "flaky-extension" in problem and "disconnected" in problem
    assert module_provider.purposes() == ["history"]
    await asyncio.gather(*crashes)
