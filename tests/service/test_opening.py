"""Opening session files off the event loop: one open per file, nothing left behind.

``SessionRegistry.open`` reads the file in a worker thread. The loop's executor here
has one thread, held by a gate the test opens, so the order of events is fixed: the
opens below are all waiting when the file is read.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from sessiond.errors import ConflictError
from sessiond.service.sessions import SessionRegistry
from sessiond.settings import Settings
from sessiond.store.session import SessionStore
from tests.store.helpers import assistant, user


class Gate:
    """Holds the loop's only worker thread until ``open`` is called."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._event = threading.Event()
        self.held = loop.run_in_executor(None, self._event.wait)

    async def open(self) -> None:
        self._event.set()
        await self.held


@pytest.fixture
async def gate() -> AsyncIterator[Gate]:
    loop = asyncio.get_running_loop()
    executor = ThreadPoolExecutor(max_workers=1)
    loop.set_default_executor(executor)
    held = Gate(loop)
    yield held
    await held.open()
    executor.shutdown(wait=True)


def registry() -> SessionRegistry:
    sent: list[Any] = []
    return SessionRegistry(settings=Settings, publish=lambda *message: sent.append(message))


def session_file(directory: Path, session_id: str | None = None) -> Path:
    with SessionStore.create("/proj", session_dir=directory, session_id=session_id) as store:
        store.append(user("question"))
        store.append(assistant("answer"))
        return store.path


def lock_is_free(path: Path) -> bool:
    """Whether the file can be opened for writing (nobody holds its lock)."""
    with SessionStore.open(path):
        return True


async def test_concurrent_opens_of_one_file_share_one_open(tmp_path: Path, gate: Gate) -> None:
    path = session_file(tmp_path)
    sessions = registry()
    first = asyncio.create_task(sessions.open(path, 1))
    second = asyncio.create_task(sessions.open(path, 2))
    third = asyncio.create_task(sessions.open(path, 2))
    await asyncio.sleep(0)
    await gate.open()
    results = await asyncio.gather(first, second, third)
    actors = {id(actor) for actor, _ in results}
    assert len(actors) == 1 and len(sessions) == 1
    assert [opened for _, opened in results] == [True, False, False]
    actor = results[0][0]
    assert actor.subscribers == {1, 2} and actor.store.entry_count == 2
    assert sessions.close(actor.session_id, 1) is False
    assert sessions.close(actor.session_id, 2) is True
    assert lock_is_free(path)


@pytest.mark.parametrize("how", ["cancelled", "disconnected"])
async def test_an_open_nobody_waits_for_any_more_is_closed(
    tmp_path: Path, gate: Gate, how: str
) -> None:
    path = session_file(tmp_path)
    sessions = registry()
    waiting = asyncio.create_task(sessions.open(path, 1))
    await asyncio.sleep(0)
    if how == "cancelled":
        waiting.cancel()
    else:
        sessions.client_gone(1)
    await gate.open()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    # Whether the first open is still finishing or done, the next one is this
    # client's own: a fresh open (reported as such), nobody else subscribed.
    actor, opened = await sessions.open(path, 2)
    assert opened and actor.subscribers == {2} and len(sessions) == 1
    assert sessions.close(actor.session_id, 2) is True
    assert lock_is_free(path)


async def test_the_same_session_id_at_two_paths_opens_once(tmp_path: Path, gate: Gate) -> None:
    one = session_file(tmp_path / "one", session_id="same-id")
    two = session_file(tmp_path / "two", session_id="same-id")
    sessions = registry()
    first = asyncio.create_task(sessions.open(one, 1))
    second = asyncio.create_task(sessions.open(two, 2))
    await asyncio.sleep(0)
    await gate.open()
    (actor, opened), refused = await asyncio.gather(first, second, return_exceptions=True)
    assert opened and actor.store.path == one
    assert isinstance(refused, ConflictError) and refused.details["sessionId"] == "same-id"
    assert len(sessions) == 1 and sessions.find_by_path(two) is None
    assert lock_is_free(two)
    sessions.close_all()
    assert lock_is_free(one)
