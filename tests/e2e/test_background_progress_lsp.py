"""A summary written in the background, followed by a stock LSP client (pytest-lsp).

pytest-lsp's ``LanguageClient`` knows nothing of sessiond: it sends LSP's own
``initialize`` (with ``window.workDoneProgress``), accepts the token of
``window/workDoneProgress/create`` and records ``$/progress`` as any editor's LSP
client does. The daemon is a real ``sessiond serve --stdio`` process; summaries come
from a loopback OpenAI-format server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient

from tests.e2e.conftest import private_root
from tests.e2e.support import SERVE, assistant, isolated_env, user
from tests.fake_provider import FakeProvider

ROOT = private_root("lsp-progress")
PROVIDER = FakeProvider()
ENV = isolated_env(
    ROOT,
    {
        "compaction": {
            "tokenEstimator": "chars",
            "thresholdTokens": 1000,
            "keepRecentTokens": 200,
            "backgroundAt": 0.5,
            "shortSummary": False,
            "pruneToolOutputs": False,
        },
        "retry": {"enabled": False},
        "summarizer": {"candidates": [PROVIDER.candidate()], "extractiveFallback": False},
    },
)
WINDOW = 100_000


@pytest.fixture(scope="module")
def provider() -> Iterator[FakeProvider]:
    yield PROVIDER
    PROVIDER.stop()


@pytest_lsp.fixture(
    config=ClientServerConfig(
        server_command=[*SERVE, "--stdio", "--log-file", str(ROOT / "daemon.log")],
        server_env=ENV,
    )
)
async def editor(lsp_client: LanguageClient):  # type: ignore[no-untyped-def]
    started: list[Any] = []

    @lsp_client.feature("compaction/started")
    def record(params: Any) -> None:
        started.append(params)

    lsp_client.started = started  # type: ignore[attr-defined]
    await lsp_client.initialize_session(
        lsp.InitializeParams(
            capabilities=lsp.ClientCapabilities(
                window=lsp.WindowClientCapabilities(work_done_progress=True)
            ),
            client_info=lsp.ClientInfo(name="stock LSP client"),
        )
    )
    yield
    await lsp_client.shutdown_session()


async def call(client: LanguageClient, method: str, params: Any) -> Any:
    return await asyncio.wait_for(client.protocol.send_request_async(method, params), 10)


async def turn(client: LanguageClient, sid: str, number: int, total: int) -> Any:
    """A turn whose answer measures the context at ``total`` tokens, then its end."""
    entries = [user(f"question {number}: " + "x" * 1200), assistant(f"answer {number}")]
    entries[1]["message"]["usage"].update(input=total - 50, totalTokens=total)
    await call(client, "session/append", {"sessionId": sid, "entries": entries})
    return await call(client, "agent/turnEnded", {"sessionId": sid, "contextWindow": WINDOW})


@pytest.mark.timeout(60)
async def test_a_stock_lsp_client_sees_the_background_summary_as_work_done_progress(
    editor: LanguageClient, provider: FakeProvider
) -> None:
    lsp_client = editor
    sid = (await call(lsp_client, "session/new", {"cwd": str(ROOT)})).sessionId
    await turn(lsp_client, sid, 1, 300)
    below = await turn(lsp_client, sid, 2, 700)  # past the soft mark: summarized meanwhile
    assert below.action == "none"
    started: list[Any] = lsp_client.started  # type: ignore[attr-defined]
    for _ in range(500):
        reports = lsp_client.progress_reports
        done = [token for token, values in reports.items() if values and values[-1].kind == "end"]
        if done:
            break
        await asyncio.sleep(0.02)
    assert len(done) == 1, lsp_client.progress_reports
    (token,) = done
    values = lsp_client.progress_reports[token]
    assert isinstance(values[0], lsp.WorkDoneProgressBegin)
    assert values[0].title == "Compacting the session in the background"
    assert values[0].cancellable is False
    assert any(isinstance(v, lsp.WorkDoneProgressReport) for v in values)
    assert "ready" in (values[-1].message or "")
    assert [(s.reason, s.progressToken) for s in started] == [("background", token)]
    over = await turn(lsp_client, sid, 3, 1100)
    assert over.compaction.prepared is True
    # The commit asked for no summary of its own, and its own progress token was not made.
    assert len(provider.requests) == 1
    assert list(lsp_client.progress_reports) == [token]
