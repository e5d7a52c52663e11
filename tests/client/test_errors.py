"""Daemon errors raise the client's class for their ``data.kind``, with code and details."""

from __future__ import annotations

import inspect
import uuid
from pathlib import Path
from typing import Any

import pytest

import sessiond.errors as daemon_errors
from sessiond_client import (
    AlreadyCompactedError,
    ConflictError,
    InvalidEntryError,
    InvalidParamsError,
    InvalidSessionFileError,
    MethodNotFoundError,
    NotFoundError,
    NothingToCompactError,
    ServerNotInitializedError,
    SessiondClient,
    SessionLockedError,
    SummarizerFailedError,
)
from sessiond_client.errors import ERRORS_BY_KIND, SessiondClientError, error_from_response
from tests.fake_provider import Answer, FakeProvider

from .conftest import Connect, Spawn
from .helpers import COMPACTABLE, conversation, message, user, with_candidates


def test_every_daemon_kind_has_a_class_with_its_code() -> None:
    kinds = {
        cls.kind: cls.code
        for _, cls in inspect.getmembers(daemon_errors, inspect.isclass)
        if issubclass(cls, daemon_errors.SessiondError) and cls is not daemon_errors.SessiondError
    }
    kinds["internal"] = daemon_errors.INTERNAL_ERROR
    for kind, code in kinds.items():
        assert kind in ERRORS_BY_KIND, kind
        assert ERRORS_BY_KIND[kind].default_code == code, kind


def test_mapping_falls_back_to_the_code_then_the_base() -> None:
    known = error_from_response(-32011, "stale", {"kind": "conflict", "leafId": "a"})
    assert type(known).__name__ == "ConflictError" and known.details == {"leafId": "a"}
    by_code = error_from_response(-32010, "gone", None)
    assert isinstance(by_code, NotFoundError) and by_code.data is None
    entry = error_from_response(-32602, "bad entry", {"kind": "invalidEntry"})
    assert isinstance(entry, InvalidEntryError) and isinstance(entry, InvalidParamsError)
    future = error_from_response(-32099, "new", {"kind": "fromTheFuture"})
    assert type(future) is SessiondClientError
    assert (future.code, future.message, future.data) == (-32099, "new", {"kind": "fromTheFuture"})


async def test_errors_of_each_kind_from_the_daemon(client: SessiondClient, project: str) -> None:
    with pytest.raises(NotFoundError) as missing:
        await client.tree("no-such-session")
    assert missing.value.code == -32010 and missing.value.details == {
        "sessionId": "no-such-session"
    }

    fixed = f"fixed-{uuid.uuid4()}"
    sid = (await client.new_session(cwd=project, id=fixed)).session_id
    with pytest.raises(NotFoundError, match="Entry nope not found"):
        await client.entry(sid, "nope")
    with pytest.raises(ConflictError, match="same id"):
        await client.new_session(cwd=project, id=fixed)
    with pytest.raises(InvalidEntryError) as invalid:
        await client.append(sid, [{"type": "message", "message": {"role": "user"}}])
    assert invalid.value.code == -32602 and invalid.value.kind == "invalidEntry"
    with pytest.raises(InvalidParamsError, match="contextWindow"):
        await client.context_usage(sid, context_window=-5)
    with pytest.raises(InvalidParamsError) as strict:
        await client.update_settings({"compaction": {"noSuchKey": 1}})
    assert strict.value.details["setting"] == "compaction.noSuchKey"
    with pytest.raises(InvalidParamsError, match="params.cwd"):
        await client.request("session/new", {"cwd": 5}, dict)
    with pytest.raises(MethodNotFoundError):
        await client.request("session/explode", {}, dict)
    # pathlib raises RuntimeError for a home directory it cannot find: a client error
    with pytest.raises(InvalidParamsError, match="home directory that does not exist"):
        await client.open_session("~no-such-user-of-sessiond/s.jsonl")
    with pytest.raises(InvalidParamsError, match="sessionDir"):
        await client.request("session/list", {"sessionDir": "~no-such-user-of-sessiond"}, dict)
    with pytest.raises(NothingToCompactError, match="Nothing to compact"):
        await client.compact(sid)

    garbage = Path(project) / "not-a-session.jsonl"
    garbage.write_text("this is not json\n", encoding="utf-8")
    with pytest.raises(InvalidSessionFileError) as not_session:
        await client.open_session(garbage)
    assert not_session.value.details["reason"] in {"notASessionFile", "invalidHeader"}


async def test_already_compacted(connect: Connect, project: str) -> None:
    client = await connect()
    await client.initialize(settings=COMPACTABLE)
    sid = (await client.new_session(cwd=project)).session_id
    await conversation(client, sid)
    await client.compact(sid)
    with pytest.raises(AlreadyCompactedError) as again:
        await client.compact(sid)
    assert again.value.code == -32014


async def test_summarizer_failed(connect: Connect, project: str, provider: FakeProvider) -> None:
    provider.responder = lambda body: Answer(status=400, error="model refuses")
    client = await connect()
    await client.initialize(settings=with_candidates(provider.candidate()))
    sid = (await client.new_session(cwd=project)).session_id
    await conversation(client, sid)
    with pytest.raises(SummarizerFailedError) as failed:
        await client.compact(sid)
    assert failed.value.message.startswith("Summarization failed")
    assert "model refuses" in failed.value.message


async def test_server_not_initialized_and_session_locked(
    connect: Connect, spawn: Spawn, project: str
) -> None:
    first = await connect()
    with pytest.raises(ServerNotInitializedError) as early:
        await first.new_session(cwd=project)
    assert early.value.code == -32002
    await first.initialize()
    created = await first.new_session(cwd=project, write_now=True)
    await first.append(created.session_id, [message(user("mine"))])

    second = await spawn()
    await second.initialize()
    with pytest.raises(SessionLockedError) as locked:
        await second.open_session(created.path)
    owner: Any = locked.value.details["owner"]
    assert owner and locked.value.code == -32016
