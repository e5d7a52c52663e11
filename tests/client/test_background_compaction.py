"""Background compaction and the no-loop rule, through the daemon and a real HTTP summarizer."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from sessiond_client import SessiondClient, SessiondClientError
from sessiond_client import types as t
from tests.fake_provider import Answer, FakeProvider, default_answer

from .conftest import Connect
from .helpers import assistant, message, user

WINDOW = 100_000


def settings(provider: FakeProvider, **compaction: Any) -> dict[str, Any]:
    return {
        "compaction": {
            "tokenEstimator": "chars",
            "thresholdTokens": 1000,
            "keepRecentTokens": 200,
            "shortSummary": False,
            "pruneToolOutputs": False,
            **compaction,
        },
        "retry": {"enabled": False},
        "summarizer": {"candidates": [provider.candidate()], "extractiveFallback": False},
    }


def measured(text: str, total: int) -> dict[str, Any]:
    """An answer whose usage says the context is ``total`` tokens."""
    body = assistant(text)
    body["usage"] = {**body["usage"], "input": total - 50, "totalTokens": total}
    return body


async def append_turn(client: SessiondClient, sid: str, number: int, total: int) -> None:
    """A turn of about 300 tokens (1200 characters), ending with an answer measuring ``total``."""
    text = f"question {number}: " + "x" * 1200
    await client.append(sid, [message(user(text)), message(measured(f"answer {number}", total))])


async def turn(client: SessiondClient, sid: str, number: int, total: int) -> t.TurnEndedResult:
    await append_turn(client, sid, number, total)
    return await client.turn_ended(sid, context_window=WINDOW)


def history_requests(provider: FakeProvider) -> int:
    return sum(purpose in ("history", "update") for purpose in provider.purposes())


async def until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"never happened: {what}")


class Seen:
    """The notifications of a stream, kept as they arrive."""

    def __init__(self, client: SessiondClient, *methods: str) -> None:
        self.stream = client.notifications(*methods)
        self.items: list[Any] = []

    def all(self) -> list[Any]:
        self.items += self.stream.pending()
        return self.items

    async def at_least(self, count: int, what: str) -> None:
        await until(lambda: len(self.all()) >= count, what)


async def test_the_summary_is_written_in_the_background_and_committed_at_the_threshold(
    connect: Connect, project: str, provider: FakeProvider
) -> None:
    client = await connect()
    await client.initialize(settings=settings(provider, backgroundAt=0.5))
    sid = (await client.new_session(cwd=project)).session_id
    events = Seen(client, "compaction/started", "compaction/ended")
    assert (await turn(client, sid, 1, 300)).auto_compaction is None
    below = await turn(client, sid, 2, 700)  # past the soft mark (500), under the threshold
    assert below.action == "none" and below.compaction is None and below.auto_compaction is None
    await events.at_least(2, "the background summary")
    await turn(client, sid, 3, 800)  # no second background summary while one is ready
    over = await turn(client, sid, 4, 1100)
    assert over.action == "continue" and over.compaction is not None
    assert over.compaction.prepared
    assert history_requests(provider) == 1  # the background summary, paid for once
    reasons = [(n.method, n.params.reason) for n in events.all()]
    assert reasons == [
        ("compaction/started", "background"),
        ("compaction/ended", "background"),
        ("compaction/started", "threshold"),
        ("compaction/ended", "threshold"),
    ]
    ended = events.all()[-1].params
    assert isinstance(ended, t.CompactionEndedNotification) and ended.prepared
    entry = (await client.entry(sid, over.compaction.entry_id)).entry
    # What was appended since the summary was prepared stays in the kept part.
    path = [e["id"] for e in (await client.path(sid)).entries]
    assert path.index(entry["firstKeptEntryId"]) < path.index(entry["id"]) - 4


async def test_the_agent_waits_only_for_what_is_left_of_a_summary_in_flight(
    connect: Connect, project: str, provider: FakeProvider
) -> None:
    provider.responder = lambda body: Answer(text="## Goal\nheld back", hold=True)
    client = await connect()
    await client.initialize(settings=settings(provider, backgroundAt=0.5))
    sid = (await client.new_session(cwd=project)).session_id
    await turn(client, sid, 1, 300)
    await turn(client, sid, 2, 700)
    assert await asyncio.to_thread(provider.arrived.wait, 10)
    waiting = asyncio.create_task(turn(client, sid, 3, 1100))
    await asyncio.sleep(0.2)
    assert not waiting.done()
    provider.responder = default_answer
    provider.released.set()
    over = await asyncio.wait_for(waiting, 10)
    assert over.compaction is not None and over.compaction.prepared
    assert history_requests(provider) == 1


async def test_a_branch_move_makes_the_background_summary_stale(
    connect: Connect, project: str, provider: FakeProvider
) -> None:
    client = await connect()
    await client.initialize(settings=settings(provider, backgroundAt=0.5))
    sid = (await client.new_session(cwd=project)).session_id
    events = Seen(client, "compaction/ended")
    await turn(client, sid, 1, 300)
    first = (await client.path(sid)).entries[-1]["id"]
    await turn(client, sid, 2, 700)
    await events.at_least(1, "the background summary")
    await client.navigate(sid, first)
    for number in range(3, 5):  # under the soft mark: no new background summary
        await turn(client, sid, number, 400)
    over = await turn(client, sid, 5, 1100)
    assert over.compaction is not None and not over.compaction.prepared
    # The stale summary is never committed: what is written summarizes this branch.
    entry = (await client.entry(sid, over.compaction.entry_id)).entry
    assert "question 2" not in entry["summary"]
    path_ids = [e["id"] for e in (await client.path(sid)).entries]
    assert entry["firstKeptEntryId"] in path_ids


async def test_a_hook_still_cancels_the_commit_of_a_background_summary(
    connect: Connect, project: str, provider: FakeProvider
) -> None:
    client = await connect()
    seen: list[t.BeforeCompactHookParams] = []

    @client.handle_before_compact
    async def veto(params: t.BeforeCompactHookParams) -> t.BeforeCompactHookResult:
        seen.append(params)
        return t.BeforeCompactHookResult(cancel=True)

    await client.initialize(settings=settings(provider, backgroundAt=0.5))
    sid = (await client.new_session(cwd=project)).session_id
    events = Seen(client, "compaction/ended")
    await turn(client, sid, 1, 300)
    await turn(client, sid, 2, 700)
    await events.at_least(1, "the background summary")
    assert seen == []  # asked at the commit, not before the summary is written
    leaf = (await client.tree(sid)).leaf_id
    over = await client.turn_ended(sid, context_window=WINDOW)
    assert over.auto_compaction is None  # 700 is under the threshold: nothing yet
    over = await turn(client, sid, 3, 1100)
    assert over.compaction is None and over.auto_compaction is not None
    assert over.auto_compaction.outcome == "cancelled" and len(seen) == 1
    assert (await client.tree(sid)).leaf_id != leaf  # only the turn was appended
    assert history_requests(provider) == 1


async def test_a_compaction_that_frees_too_little_is_not_repeated(
    connect: Connect, project: str, provider: FakeProvider
) -> None:
    """The part kept alone is over the threshold: one summary, then a pause, however many
    turns follow, announced once with what to do."""
    client = await connect()
    await client.initialize(settings=settings(provider, keepRecentTokens=1500))
    created = await client.new_session(cwd=project, write_now=True)
    sid = created.session_id
    events = Seen(client, "compaction/started", "compaction/ended")
    for number in range(1, 8):
        await append_turn(client, sid, number, 300 * number)
    first = await client.turn_ended(sid, context_window=WINDOW)
    assert first.compaction is not None and first.compaction.tokens_after > 1000
    reports = []
    for number in range(8, 16):
        reports.append(await turn(client, sid, number, 2500 + 300 * number))
    assert history_requests(provider) == 1
    assert all(r.auto_compaction is not None for r in reports)
    assert {r.auto_compaction.outcome for r in reports if r.auto_compaction} == {"paused"}
    message_ = reports[0].auto_compaction.message if reports[0].auto_compaction else ""
    assert message_ and "keepRecentTokens" in message_ and "larger context window" in message_
    paused = [n for n in events.all() if getattr(n.params, "paused", False)]
    assert len(paused) == 1 and paused[0].method == "compaction/ended"
    # The state can be asked for, by a client that missed the one announcement too.
    assert first.usage.auto_compaction_paused and reports[-1].usage.auto_compaction_paused
    later = await connect()
    await later.initialize(settings=settings(provider, keepRecentTokens=1500))
    await later.open_session(created.path)
    assert (await later.context_usage(sid, context_window=WINDOW)).auto_compaction_paused
    # A manual compaction is still possible, and a lower keepRecentTokens lifts the pause.
    await client.update_settings({"compaction": {"keepRecentTokens": 200}}, session_id=sid)
    assert not (await client.context_usage(sid, context_window=WINDOW)).auto_compaction_paused
    lifted = await turn(client, sid, 16, 7000)
    assert lifted.compaction is not None and history_requests(provider) == 2


async def test_overflow_recovery_commits_the_background_summary(
    connect: Connect, project: str, provider: FakeProvider
) -> None:
    client = await connect()
    await client.initialize(settings=settings(provider, backgroundAt=0.5))
    sid = (await client.new_session(cwd=project)).session_id
    events = Seen(client, "compaction/ended")
    await turn(client, sid, 1, 300)
    await turn(client, sid, 2, 700)
    await events.at_least(1, "the background summary")
    failed = assistant("")
    failed.update(stopReason="error", errorMessage="prompt is too long: 200001 tokens")
    await client.append(sid, [message(user("question 3")), message(failed)])
    over = await client.turn_ended(sid, context_window=WINDOW)
    assert over.action == "retry" and over.compaction is not None
    assert over.compaction.prepared and over.compaction.reason == "overflow"
    assert history_requests(provider) == 1


async def test_another_programs_write_makes_the_background_summary_stale(
    connect: Connect, project: str, provider: FakeProvider
) -> None:
    client = await connect()
    await client.initialize(settings=settings(provider, backgroundAt=0.5))
    created = await client.new_session(cwd=project, write_now=True)
    sid = created.session_id
    events = Seen(client, "compaction/ended")
    await turn(client, sid, 1, 300)
    await turn(client, sid, 2, 700)
    await events.at_least(1, "the background summary")
    leaf = (await client.tree(sid)).leaf_id
    foreign = {
        "type": "message",
        "id": "f0reign1",
        "parentId": leaf,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": {"role": "user", "content": "written by pi itself", "timestamp": 1},
    }
    with open(created.path, "a", encoding="utf-8") as file:
        file.write(json.dumps(foreign) + "\n")
    over = await turn(client, sid, 3, 1100)
    assert over.compaction is not None and not over.compaction.prepared
    assert history_requests(provider) == 2


def progress_of(seen: Seen, token: str) -> list[Any]:
    return [n.params.value for n in seen.all() if n.params.token == token]


async def test_background_work_is_shown_as_progress_to_the_clients_that_take_it(
    connect: Connect, project: str, provider: FakeProvider
) -> None:
    """``$/progress`` on a token each client accepted first (LSP's server-initiated
    progress): sent to those that declared it and said yes; one that refuses or never
    answers gets none and holds nobody else's."""
    provider.responder = lambda body: Answer(text="## Goal\nheld back", hold=True)
    owner = await connect()
    await owner.initialize(settings=settings(provider, backgroundAt=0.5), background_progress=True)
    created = await owner.new_session(cwd=project, write_now=True)
    sid = created.session_id
    asked: dict[str, list[Any]] = {"plain": [], "refusing": [], "silent": []}

    async def follower(name: str, *, declares: bool, answer: Any) -> Seen:
        client = await connect()

        async def create(params: Any) -> Any:
            asked[name].append(params)
            return await answer()

        client.handle_request("window/workDoneProgress/create", create)
        await client.initialize(background_progress=declares)
        await client.open_session(created.path)
        return Seen(client, "$/progress")

    async def refuse() -> Any:
        raise SessiondClientError("no progress here", code=-32600)

    async def never() -> Any:
        await asyncio.Event().wait()

    async def accept() -> Any:
        return None

    plain = await follower("plain", declares=False, answer=accept)
    refusing = await follower("refusing", declares=True, answer=refuse)
    silent = await follower("silent", declares=True, answer=never)
    started = Seen(owner, "compaction/started")
    shown = Seen(owner, "$/progress")
    await turn(owner, sid, 1, 300)
    await turn(owner, sid, 2, 700)
    await started.at_least(1, "the background summary")
    token = started.all()[0].params.progress_token
    assert isinstance(token, str) and token
    # Begun while the summary is still being written, and while one client is silent.
    await shown.at_least(1, "the begin of the background progress")
    begin = progress_of(shown, token)[0]
    assert isinstance(begin, t.WorkDoneBegin) and begin.title.endswith("in the background")
    await until(lambda: bool(asked["refusing"] and asked["silent"]), "both were asked")
    assert [p["token"] for p in asked["refusing"] + asked["silent"]] == [token, token]
    provider.released.set()
    provider.responder = default_answer
    await shown.at_least(3, "the report and the end")
    values = progress_of(shown, token)
    assert isinstance(values[-1], t.WorkDoneEnd) and "ready" in (values[-1].message or "")
    assert any(isinstance(v, t.WorkDoneReport) for v in values[1:-1])
    assert asked["plain"] == []  # not declared: never asked
    assert plain.all() == [] and refusing.all() == [] and silent.all() == []
    over = await turn(owner, sid, 3, 1100)
    assert over.compaction is not None and over.compaction.prepared
    assert history_requests(provider) == 1


async def test_a_summary_done_before_the_token_is_accepted_is_still_begun_and_ended(
    connect: Connect, project: str, provider: FakeProvider
) -> None:
    client = await connect()
    accepted = asyncio.Event()
    ended = Seen(client, "compaction/ended")

    async def slow_accept(params: Any) -> None:
        await ended.at_least(1, "the background summary's end")
        accepted.set()

    client.handle_request("window/workDoneProgress/create", slow_accept)
    await client.initialize(settings=settings(provider, backgroundAt=0.5), background_progress=True)
    sid = (await client.new_session(cwd=project)).session_id
    shown = Seen(client, "$/progress")
    await turn(client, sid, 1, 300)
    await turn(client, sid, 2, 700)
    await asyncio.wait_for(accepted.wait(), 10)
    await shown.at_least(2, "begin and end")
    kinds = [type(v) for v in (n.params.value for n in shown.all())]
    assert kinds == [t.WorkDoneBegin, t.WorkDoneEnd]
