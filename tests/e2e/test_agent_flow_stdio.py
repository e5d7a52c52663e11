"""An agent session from start to exit over stdio, as a frontend drives it (pytest-lsp).

The daemon is a real ``sessiond serve --stdio`` process with its own home and XDG
directories; summaries come from a loopback OpenAI-format server. The test follows
one session through turns, a threshold compaction, context building, a tree
navigation with a branch summary, labels, a fork and the shutdown, then reads the
file the daemon left behind.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from pytest_lsp import ClientServerConfig

from tests.e2e.conftest import private_root
from tests.e2e.support import (
    ALL_HOOKS,
    SERVE,
    AgentClient,
    assert_no_traceback,
    assistant,
    file_lines,
    isolated_env,
    reopen,
    user,
)
from tests.fake_provider import FakeProvider

ROOT = private_root("flow")
CWD = str(ROOT / "project")
WINDOW = 8000
RESERVE = 2000  # threshold = WINDOW - RESERVE
KEEP = 120
# The loopback summarizer starts with the module: the daemon (started by pytest-lsp from
# this environment) must find it in its settings file, as summarizer endpoints never come
# from a client. Nothing else is in the file: the daemon runs on its defaults (tiktoken
# estimates and all).
PROVIDER = FakeProvider()
ENV = isolated_env(ROOT, {"summarizer": {"candidates": [PROVIDER.candidate(model="m")]}})


@pytest.fixture(scope="module")
def provider() -> Iterator[FakeProvider]:
    yield PROVIDER
    PROVIDER.stop()


EXPECTED_METHODS = {
    "initialize",
    "shutdown",
    "session/new",
    "session/open",
    "session/list",
    "session/close",
    "session/append",
    "session/entries",
    "session/entry",
    "session/path",
    "session/tree",
    "session/label",
    "session/setName",
    "session/fork",
    "context/build",
    "context/usage",
    "agent/turnEnded",
    "compaction/prepare",
    "compaction/run",
    "compaction/abort",
    "tree/navigate",
    "tree/abort",
    "settings/get",
    "settings/update",
}


@pytest_lsp.fixture(
    config=ClientServerConfig(
        server_command=[*SERVE, "--stdio", "--log-file", str(ROOT / "daemon.log")],
        client_factory=lambda: AgentClient("frontend"),
        server_env=ENV,
    )
)
async def agent(rpc_client: AgentClient):  # type: ignore[no-untyped-def]
    yield
    server = rpc_client._server
    if server is not None and server.returncode is None and server.stdin is not None:
        server.stdin.close()  # the test failed before exit: let client.stop() return


def prompt_of(request: dict[str, Any]) -> str:
    return str(request["messages"][-1]["content"])


@pytest.mark.timeout(60)
async def test_agent_session_from_initialize_to_exit(
    agent: AgentClient, provider: FakeProvider
) -> None:
    # -- initialize: capabilities both ways
    settings = {
        "summarizer": {"candidates": [{"kind": "openai", "model": "m", "baseUrl": provider.url}]},
        "compaction": {"reserveTokens": RESERVE, "keepRecentTokens": KEEP},
        "branchSummary": {"reserveTokens": RESERVE},
    }
    init = await agent.initialize(hooks=ALL_HOOKS, llm=True, settings=settings)
    assert init["serverInfo"]["name"] == "sessiond"
    assert init["protocolVersion"] == "1"
    assert set(init["capabilities"]["methods"]) >= EXPECTED_METHODS
    assert set(init["capabilities"]["hooks"]) == set(ALL_HOOKS)
    assert {"session/changed", "compaction/started", "compaction/ended"} <= set(
        init["capabilities"]["notifications"]
    )
    assert init.get("warnings", []) == []

    # -- a new session: written lazily, as pi
    created = await agent.call("session/new", {"cwd": CWD})
    sid, path = created["sessionId"], Path(created["path"])
    assert created["persisted"] is False
    assert created["header"]["version"] == 3 and created["header"]["cwd"] == CWD
    assert created["header"]["id"] == sid
    data_home = Path(ENV["XDG_DATA_HOME"])
    assert path.is_relative_to(data_home / "sessiond" / "sessions"), path
    assert not path.exists()

    # -- turns; the context grows with each answer's usage
    first = await agent.call(
        "session/append", {"sessionId": sid, "entries": [user("Set up the repo")]}
    )
    assert not path.exists(), "nothing is written before the first assistant message"
    ids = list(first["ids"])
    batches = [first["ids"]]
    sizes = [1500, 3000, 4500]
    for n, input_tokens in enumerate(sizes):
        answer = assistant(f"Step {n} done. " + "detail " * 40, input_tokens=input_tokens)
        entries = [answer] if n == 0 else [user(f"Now step {n}: " + "context " * 40), answer]
        appended = await agent.call("session/append", {"sessionId": sid, "entries": entries})
        assert appended["leafId"] == appended["ids"][-1]
        assert appended["usage"]["usageTokens"] == input_tokens + 50
        ids += appended["ids"]
        batches.append(appended["ids"])
    assert path.exists()
    usage = await agent.call("context/usage", {"sessionId": sid, "contextWindow": WINDOW})
    assert usage["threshold"] == WINDOW - RESERVE
    assert usage["contextWindow"] == WINDOW
    assert usage["shouldCompact"] is False
    assert usage["tokens"] >= sizes[-1] + 50
    assert 0 < usage["percent"] < 100

    # The turn that crosses the threshold: a long request, a short answer.
    last_request = "Finally, write the release notes for " + "everything " * 150
    last = await agent.call(
        "session/append",
        {
            "sessionId": sid,
            "entries": [user(last_request), assistant("Release notes written.", input_tokens=6500)],
        },
    )
    kept_user_id, kept_answer_id = last["ids"]
    ids += last["ids"]
    batches.append(last["ids"])
    changed = agent.received("session/changed", sid)
    assert [n["appendedIds"] for n in changed if n["reason"] == "append"] == batches
    assert changed[-1]["leafId"] == kept_answer_id and changed[-1]["entryCount"] == len(ids)
    assert provider.requests == []

    # -- the end of the turn: a threshold compaction through the loopback server
    ended = await agent.call(
        "agent/turnEnded",
        {
            "sessionId": sid,
            "contextWindow": WINDOW,
            "model": {"provider": "fake", "modelId": "agent-model"},
        },
        timeout=30,
    )
    assert ended["action"] == "continue"
    assert "compacted" in ended["prompt"]
    compaction = ended["compaction"]
    assert compaction["reason"] == "threshold"
    assert compaction["tokensBefore"] == 6550
    assert compaction["tokensAfter"] < WINDOW - RESERVE
    assert ended["usage"]["shouldCompact"] is False

    # What the summarizer was sent.
    assert sorted(provider.purposes()) == ["history", "short"]
    history = provider.requests[provider.purposes().index("history")]
    assert history["model"] == "m"
    assert history["stream"] is True
    assert history["max_tokens"] == int(0.8 * RESERVE)
    assert [m["role"] for m in history["messages"]] == ["system", "user"]
    prompt = prompt_of(history)
    assert "<conversation>" in prompt
    assert "Set up the repo" in prompt and "Now step 2" in prompt
    assert "release notes" not in prompt and "Release notes written" not in prompt, (
        "the kept turn is not summarized"
    )

    # The hooks the frontend declared, in pi's order, then the notifications.
    asked = [method for method, _ in agent.asked]
    assert asked == ["hooks/session_before_compact", "hooks/session.compacting"]
    preparation = agent.asked[0][1]["preparation"]
    assert preparation["firstKeptEntryId"] == kept_user_id
    assert preparation["isSplitTurn"] is False
    assert preparation["summarizeEntryIds"] == ids[: ids.index(kept_user_id)]
    started = agent.received("compaction/started", sid)
    finished = agent.received("compaction/ended", sid)
    assert started == [{"sessionId": sid, "reason": "threshold", "willRetry": False}]
    assert len(finished) == 1
    assert finished[0]["aborted"] is False and finished[0]["willRetry"] is False
    assert finished[0]["entryId"] == compaction["entryId"]
    assert finished[0]["tokensBefore"] == 6550
    order = [name for name, _ in agent.notifications]
    assert order.index("compaction/started") < order.index("compaction/ended")
    compacted = agent.received("hooks/session_compact", sid)
    assert len(compacted) == 1 and compacted[0]["fromExtension"] is False
    assert compacted[0]["compactionEntry"]["id"] == compaction["entryId"]

    # The compaction entry on disk.
    lines = file_lines(path)
    entry = lines[-1]
    assert entry["type"] == "compaction" and entry["id"] == compaction["entryId"]
    assert entry["parentId"] == kept_answer_id
    assert entry["firstKeptEntryId"] == kept_user_id
    assert entry["tokensBefore"] == 6550
    assert entry["summary"].startswith("## Goal\nhistory summary of")
    assert entry["fromHook"] is False and "fromExtension" not in entry
    assert entry["shortSummary"].startswith("## Goal\nshort summary")
    assert entry["details"]["summarizer"]["models"] == ["openai/m"]
    assert finished[0]["result"]["summary"] == entry["summary"]

    # -- the context the agent continues with: the summary first, then the kept turn
    agent_ctx = await agent.call("context/build", {"sessionId": sid, "format": "agent"})
    roles = [m["role"] for m in agent_ctx["messages"]]
    assert roles == ["compactionSummary", "user", "assistant"]
    assert agent_ctx["messages"][0]["summary"] == entry["summary"]
    assert agent_ctx["entryIds"] == [entry["id"], kept_user_id, kept_answer_id]
    assert agent_ctx["messages"][1]["content"] == last_request
    llm_ctx = await agent.call("context/build", {"sessionId": sid, "format": "llm"})
    assert [m["role"] for m in llm_ctx["messages"]] == ["user", "user", "assistant"]
    summary_text = llm_ctx["messages"][0]["content"][0]["text"]
    assert f"<summary>\n{entry['summary']}\n</summary>" in summary_text
    usage_after = await agent.call("context/usage", {"sessionId": sid, "contextWindow": WINDOW})
    assert usage_after["tokens"] == compaction["tokensAfter"]
    assert usage_after["shouldCompact"] is False

    # The agent continues with the prompt it was given.
    more = await agent.call(
        "session/append",
        {"sessionId": sid, "entries": [user(ended["prompt"]), assistant("Nothing left to do.")]},
    )
    old_leaf = more["leafId"]

    # -- back to the kept request, leaving a summary of everything after it
    before_tree = len(provider.requests)
    navigated = await agent.call(
        "tree/navigate",
        {"sessionId": sid, "targetId": kept_user_id, "summarize": True, "contextWindow": WINDOW},
        timeout=30,
    )
    assert navigated["cancelled"] is False
    assert navigated["editorText"] == last_request
    branch = navigated["summaryEntry"]
    assert branch["type"] == "branch_summary"
    kept_parent = ids[ids.index(kept_user_id) - 1]
    assert branch["parentId"] == kept_parent, "the summary hangs at the target's position"
    assert branch["fromId"] == old_leaf  # pi 1.6: the leaf the summary comes from
    assert navigated["leafId"] == branch["id"]
    assert provider.purposes()[before_tree:] == ["branch"]
    branch_prompt = prompt_of(provider.requests[-1])
    assert "Nothing left to do." in branch_prompt and "Release notes written." in branch_prompt
    assert "branch summary of" in branch["summary"]
    before = agent.asked[-1]
    assert before[0] == "hooks/session_before_tree"
    assert before[1]["targetId"] == kept_user_id and before[1]["oldLeafId"] == old_leaf
    assert before[1]["userWantsSummary"] is True
    # The target is the common ancestor: everything after it is summarized, not the target.
    assert before[1]["entryIdsToSummarize"] == [kept_answer_id, entry["id"], *more["ids"]]
    assert before[1]["commonAncestorId"] == kept_user_id
    tree_hook = await agent.wait_for("hooks/session_tree")
    assert tree_hook["newLeafId"] == branch["id"] and tree_hook["oldLeafId"] == old_leaf
    assert tree_hook["summaryEntry"]["id"] == branch["id"]
    assert tree_hook["fromExtension"] is False
    moved = agent.received("session/changed", sid)[-1]
    assert moved["reason"] == "navigate" and moved["appendedIds"] == [branch["id"]]
    assert moved["leafId"] == branch["id"]

    # -- the tree, with labels
    labelled = await agent.call(
        "session/label", {"sessionId": sid, "targetId": ids[0], "label": "start"}
    )
    tree = await agent.call("session/tree", {"sessionId": sid})
    nodes = {node["id"]: node for node in tree["nodes"]}
    assert tree["rootIds"] == [ids[0]]
    assert tree["leafId"] == labelled["leafId"] == labelled["entryId"]
    assert nodes[ids[0]]["label"] == "start"
    assert set(nodes[kept_parent]["children"]) == {kept_user_id, branch["id"]}
    assert nodes[branch["id"]]["active"] is True
    # Inactive nodes leave "active" out (false is the default on the wire).
    assert "active" not in nodes[kept_user_id] and "active" not in nodes[old_leaf]
    assert nodes[entry["id"]]["type"] == "compaction"
    assert nodes[ids[0]]["role"] == "user"
    await agent.call("session/label", {"sessionId": sid, "targetId": ids[0], "label": ""})
    cleared = await agent.call("session/tree", {"sessionId": sid, "previews": False})
    assert {n["id"]: n for n in cleared["nodes"]}[ids[0]].get("label") is None

    # -- a fork at the second request: a new file with the path before it
    fork_at = ids[2]
    forked = await agent.call("session/fork", {"sessionId": sid, "entryId": fork_at})
    assert forked["sessionId"] != sid
    assert forked["selectedText"].startswith("Now step 1: context")
    fork_path = Path(forked["path"])
    assert fork_path.parent == path.parent and fork_path.exists()
    fork_lines = file_lines(fork_path)
    assert fork_lines[0]["parentSession"] == str(path)
    assert [line["id"] for line in fork_lines[1:]] == ids[:2]
    node_count = len(tree["nodes"]) + 1  # the label entry that cleared the label

    # -- shutdown and exit: answered, flushed, the process ends with 0
    assert await agent.call("shutdown") is None
    agent.notify("exit")
    server = agent._server
    assert server is not None
    assert await asyncio.wait_for(server.wait(), 10) == 0

    # The file opens cleanly and holds the whole tree.
    store = reopen(path)
    try:
        assert store.entry_count == node_count
        assert store.get_entry(entry["id"]) is not None
        assert store.get_entry(branch["id"]) is not None
        records = [record.id for record in store.records()]
        assert records[: len(ids)] == ids
    finally:
        store.close()
    fork_store = reopen(fork_path)
    fork_store.close()
    assert_no_traceback(params for _, params in agent.notifications)
