"""Every open session of the daemon, one actor each (``actor``), by id and by file.

Opening a file reads all of it, in a worker thread; concurrent opens of one file share
that one open. A task looks at every open file each ``FOLLOW_INTERVAL_S`` (one ``stat``
each) so that clients hear of other programs' writes even when nobody asks; what it
finds is read in a worker thread. How many sessions one client, and the daemon, may
hold open is bounded (``SessionLimits``).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Final

from sessiond.errors import ConflictError, LimitExceededError, NotFoundError
from sessiond.settings import Settings, StorageSettings
from sessiond.store.session import SessionStore

from .actor import ClientId, FollowListener, Publisher, SessionActor
from .hooks import Hooks

_log = logging.getLogger(__name__)
FOLLOW_INTERVAL_S: Final = 0.25


@dataclass(frozen=True)
class SessionLimits:
    """How many sessions one client may hold open (opening ones included), and the daemon
    in all. Each open session holds up to three file descriptors (its lock, a reader, an
    appender) and its index: one client opening file after file must not take them from
    every other client, nor the daemon's descriptors from everyone."""

    per_client: int = 64
    total: int = 1024

    @classmethod
    def fitted(cls, file_limit: int, connections: int, reserve: int) -> SessionLimits:
        """Limits that leave ``connections`` and ``reserve`` descriptors of ``file_limit``
        free, at three descriptors a session."""
        total = max(16, (file_limit - connections - reserve) // 3)
        return cls(per_client=min(cls.per_client, total), total=total)


class _Opening:
    """A session file being opened in a worker thread, and who waits for it (in order)."""

    def __init__(self) -> None:
        self.waiters: dict[object, ClientId] = {}
        self.task: asyncio.Task[tuple[SessionActor, object]]


async def _in_worker_thread(make_store: Callable[[], SessionStore]) -> SessionStore:
    """``make_store()`` in a worker thread. If the caller is cancelled meanwhile, the
    store the thread still makes is closed when it is done (its lock released)."""
    made = asyncio.get_running_loop().run_in_executor(None, make_store)
    try:
        return await asyncio.shield(made)
    except asyncio.CancelledError:
        made.add_done_callback(_close_unwanted)
        raise


def _close_unwanted(made: asyncio.Future[SessionStore]) -> None:
    if not made.cancelled() and made.exception() is None:
        try:
            made.result().close()
        except Exception:
            _log.exception("closing a session nobody waits for failed")


def _consume_outcome(task: asyncio.Task[Any]) -> None:
    """An open whose waiters all left still ends in a result or an error: take it, so
    asyncio does not report an exception nobody retrieved."""
    if not task.cancelled():
        task.exception()


class SessionRegistry:
    """Every open session of the daemon, by id and by file."""

    def __init__(
        self,
        settings: Callable[[], Settings],
        publish: Publisher,
        hooks: Callable[[SessionActor], Hooks] | None = None,
        on_followed: FollowListener | None = None,
        limits: SessionLimits | None = None,
    ) -> None:
        self._settings = settings
        self._limits = limits or SessionLimits()
        self._publish = publish
        self._hooks = hooks
        self._on_followed = on_followed
        self._follower: asyncio.Task[None] | None = None
        self._by_id: dict[str, SessionActor] = {}
        self._by_path: dict[str, SessionActor] = {}
        # Files being opened in a worker thread, by real path.
        self._opening: dict[str, _Opening] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def actors(self) -> list[SessionActor]:
        return list(self._by_id.values())

    def get(self, session_id: str) -> SessionActor:
        """The open session (whether it is up to date with what other programs wrote to
        its file is the actor's to tell: ``SessionActor.ready_now``, ``use``)."""
        actor = self._by_id.get(session_id)
        if actor is None:
            raise NotFoundError(
                f"Session {session_id} is not open (open it with session/open)",
                sessionId=session_id,
            )
        return actor

    def _keep_following(self) -> None:
        if self._follower is None or self._follower.done():
            self._follower = asyncio.get_running_loop().create_task(self._follow_all())

    async def _follow_all(self) -> None:
        """Look at every open file now and then, and read what changed in a worker thread
        (a session at a time, so one huge change does not take every worker); ends when
        no session is open."""
        while self._by_id:
            await asyncio.sleep(FOLLOW_INTERVAL_S)
            for actor in list(self._by_id.values()):
                if self._by_id.get(actor.session_id) is not actor:
                    continue
                try:
                    if not actor.ready_now() and actor.idle:
                        await actor.catch_up()
                except Exception:
                    # One file's surprise must not stop following the others.
                    _log.exception("following %s failed", actor.store.path)

    async def open(
        self, path: Path, client: ClientId, storage: StorageSettings | None = None
    ) -> tuple[SessionActor, bool]:
        """The actor of a session file, opening it unless it is open already.

        The file is read (scanned, repaired, migrated) in a worker thread: a big one
        takes a while, and the daemon serves everyone else meanwhile. Whoever asks for
        the same file while that runs waits for the same open; the file is opened once.

        Returns the actor and whether this call opened the file (of the callers that
        waited for one open, exactly one gets True). ``storage``: the opening client's
        storage settings (default: the daemon's)."""
        key = os.path.realpath(path)
        actor = self._by_path.get(key)
        if actor is not None:
            if client not in actor.subscribers:
                self.check_room(client, new_file=False)
            actor.subscribers.add(client)
            return actor, False
        opening = self._opening.get(key)
        if opening is None or client not in opening.waiters.values():
            self.check_room(client, new_file=opening is None)
        if opening is None:
            opening = _Opening()
            self._opening[key] = opening
            storage = storage or self._settings().storage
            opening.task = asyncio.create_task(self._open_file(key, path, storage, opening))
            opening.task.add_done_callback(_consume_outcome)
        ticket = object()
        opening.waiters[ticket] = client
        try:
            opened, opener = await asyncio.shield(opening.task)
        except BaseException:
            opening.waiters.pop(ticket, None)
            self._give_back(opening, client)
            raise
        return opened, opener is ticket

    def _give_back(self, opening: _Opening, client: ClientId) -> None:
        """A caller cancelled just after its open finished: it does not keep the session
        (unless another of its requests waited for the same open)."""
        task = opening.task
        if not task.done() or task.cancelled() or task.exception() is not None:
            return
        actor = task.result()[0]
        if client not in opening.waiters.values() and self._by_id.get(actor.session_id) is actor:
            self.close(actor.session_id, client)

    async def _open_file(
        self, key: str, path: Path, storage: StorageSettings, opening: _Opening
    ) -> tuple[SessionActor, object]:
        try:
            store = await _in_worker_thread(partial(SessionStore.open, path, storage=storage))
        finally:
            del self._opening[key]
        if not opening.waiters:
            # Everyone who asked has gone (cancelled, disconnected): nobody has it open.
            store.close()
            raise asyncio.CancelledError
        ticket, client = next(iter(opening.waiters.items()))
        actor = self._adopt(store, client)
        actor.subscribers.update(opening.waiters.values())
        return actor, ticket

    def create(
        self,
        store_factory: Callable[[], SessionStore],
        client: ClientId,
        session_id: str | None = None,
    ) -> SessionActor:
        """A new session. A ``session_id`` already open is refused before the file is
        made: two in the same millisecond would otherwise collide on its name (and
        its lock) first, which hides the real problem."""
        if session_id is not None and session_id in self._by_id:
            raise self._same_id(session_id)
        self.check_room(client)
        return self._adopt(store_factory(), client)

    def adopt(self, store: SessionStore, client: ClientId) -> SessionActor:
        """A session made elsewhere (a fork) for ``client``; call ``check_room`` before
        making it."""
        return self._adopt(store, client)

    def check_room(self, client: ClientId, *, new_file: bool = True) -> None:
        """``limitExceeded`` if ``client`` may not hold one more session (``SessionLimits``):
        ``openSessions`` for the client's own bound, ``daemonSessions`` (with ``new_file``,
        a file not open yet) for the daemon's."""
        held = sum(client in actor.subscribers for actor in self._by_id.values()) + sum(
            client in opening.waiters.values() for opening in self._opening.values()
        )
        if held >= self._limits.per_client:
            raise LimitExceededError(
                f"this client has {held} sessions open, the most one client may hold; "
                "close some (session/close) first",
                limit="openSessions",
                maximum=self._limits.per_client,
            )
        if new_file and len(self._by_id) + len(self._opening) >= self._limits.total:
            raise LimitExceededError(
                f"the daemon has {self._limits.total} sessions open, as many as its file "
                "descriptors allow; close some first",
                limit="daemonSessions",
                maximum=self._limits.total,
            )

    def _adopt(self, store: SessionStore, client: ClientId) -> SessionActor:
        if store.session_id in self._by_id:
            store.close()
            raise self._same_id(store.session_id)
        actor = SessionActor(store, self._settings, self._publish, self._hooks, self._on_followed)
        actor.subscribers.add(client)
        self._by_id[store.session_id] = actor
        self._by_path[os.path.realpath(store.path)] = actor
        with suppress(RuntimeError):  # no running loop: a caller outside the daemon
            self._keep_following()
        return actor

    def _same_id(self, session_id: str) -> ConflictError:
        other = self._by_id[session_id]
        return ConflictError(
            f"another open session ({other.store.path}) has the same id {session_id}",
            path=str(other.store.path),
            sessionId=session_id,
        )

    def close(self, session_id: str, client: ClientId) -> bool:
        """The client is done with the session; the file closes when nobody has it open."""
        actor = self.get(session_id)
        actor.subscribers.discard(client)
        if actor.subscribers:
            return False
        self._forget(actor)
        return True

    def client_gone(self, client: ClientId) -> None:
        for opening in self._opening.values():
            for ticket, waiting in list(opening.waiters.items()):
                if waiting == client:
                    del opening.waiters[ticket]
        for actor in list(self._by_id.values()):
            if client in actor.subscribers:
                actor.subscribers.discard(client)
                if not actor.subscribers and actor.busy_with is None:
                    self._forget(actor)

    def _forget(self, actor: SessionActor) -> None:
        self._by_id.pop(actor.session_id, None)
        self._by_path.pop(os.path.realpath(actor.store.path), None)
        try:
            actor.close()
        except Exception:
            _log.exception("closing %s failed", actor.store.path)

    def sync_all(self) -> None:
        for actor in self._by_id.values():
            try:
                actor.store.sync()
            except Exception:
                _log.exception("fsync of %s failed", actor.store.path)

    def close_all(self) -> None:
        if self._follower is not None:
            self._follower.cancel()
        for opening in self._opening.values():
            opening.waiters.clear()  # a file still being opened is closed once it is
        for actor in list(self._by_id.values()):
            self._forget(actor)

    def find_by_path(self, path: Path) -> SessionActor | None:
        return self._by_path.get(os.path.realpath(path))
