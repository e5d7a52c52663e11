"""Open sessions, one actor each: the state the daemon keeps per session file.

An actor owns its ``SessionStore`` and runs at most one long operation at a
time (a compaction or a navigation that writes a summary), so the two never
interleave; a manual compaction aborts whatever runs first, as pi does. Short
mutations (appends, labels) are synchronous on the event loop and so never
interleave either; reads need no waiting at all, not even behind a running
summarizer call. Sessions run concurrently with each other.

Opening a file reads all of it (scan, repair, migration), so it runs in a worker
thread while the event loop serves everyone else; concurrent opens of one file
share that one open, and an open nobody waits for any more is closed when done.

Notifications go out through a ``Publisher`` to the clients that have the
session open; the transport is not this module's business.

Other programs (pi itself) may append to or rewrite a file the daemon holds: every
request that names a session first looks at its file (one ``stat``), and a task looks
at every open file each ``FOLLOW_INTERVAL_S``, so that clients hear of such changes
within that time even when nobody asks. Polling a ``stat`` costs microseconds per open
session, works on every filesystem (network ones included, where inotify does not
see other machines' writes) and holds no watch descriptor.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from contextlib import suppress
from functools import partial
from pathlib import Path
from typing import Any, Final, Literal, Protocol, TypeVar

from sessiond.core.entries import Entry
from sessiond.core.tokens import Estimator
from sessiond.errors import BusyError, CancelledError, ConflictError, NotFoundError, SessiondError
from sessiond.settings import LayerCache, Settings, StorageSettings
from sessiond.store.following import Followed
from sessiond.store.session import SessionStore
from sessiond.tokenizer import estimator as estimator_named

from .hooks import Hooks, NoHooks
from .turns import OverflowGuard

_log = logging.getLogger(__name__)
FOLLOW_INTERVAL_S: Final = 0.25
T = TypeVar("T")
ClientId = int
LongKind = Literal["compaction", "navigation"]


class Publisher(Protocol):
    def __call__(self, clients: set[ClientId], method: str, params: Any) -> None: ...


FollowListener = Callable[["SessionActor", Followed], None]


class SessionActor:
    def __init__(
        self,
        store: SessionStore,
        settings: Callable[[], Settings],
        publish: Publisher,
        hooks: Callable[[SessionActor], Hooks] | None = None,
        on_followed: FollowListener | None = None,
    ) -> None:
        self.store = store
        self._on_followed = on_followed
        self._base_settings = settings
        self._layers = LayerCache(size=4)
        self._publish = publish
        self._hooks = hooks
        self.subscribers: set[ClientId] = set()
        self.overrides: dict[str, Any] = {}
        self.guard = OverflowGuard()
        self._long: asyncio.Task[Any] | None = None
        self._long_kind: LongKind | None = None
        self._abort_navigation: asyncio.Event | None = None
        self._sync_handle: asyncio.TimerHandle | None = None

    # -- identity and configuration

    @property
    def session_id(self) -> str:
        return self.store.session_id

    def settings(self) -> Settings:
        if not self.overrides:
            return self._base_settings()
        return self._layers.merge(self._base_settings(), self.overrides, "session")

    def estimator(self, settings: Settings | None = None) -> Estimator:
        settings = settings or self.settings()
        return estimator_named(settings.compaction.token_estimator)

    def hooks(self) -> Hooks:
        return self._hooks(self) if self._hooks is not None else NoHooks()

    # -- notifications

    def publish(self, method: str, params: Any) -> None:
        if self.subscribers:
            self._publish(set(self.subscribers), method, params)

    # -- other programs' writes

    def follow(self) -> None:
        """Take in what another program wrote to the file, and tell the clients."""
        try:
            followed = [*self.store.take_unannounced(), self.store.follow()]
        except SessiondError as exc:
            _log.warning("following %s: %s", self.store.path, exc.message)
            return
        except OSError as exc:
            _log.warning("following %s: %s", self.store.path, exc.strerror or exc)
            return
        for change in followed:
            if change is None:
                continue
            for entry_id in change.appended_ids:
                entry = self.store.get_entry(entry_id)
                if entry is not None:
                    self.guard.observe(entry)
            if self._on_followed is not None:
                self._on_followed(self, change)

    # -- mutations

    def appended(self, entries: list[Entry]) -> None:
        """Bookkeeping after entries were appended (by anyone)."""
        for entry in entries:
            self.guard.observe(entry)
        self.schedule_sync()

    def schedule_sync(self) -> None:
        """With the "batch" policy, fsync appended lines within the configured interval."""
        if not self.store.needs_sync or self._sync_handle is not None:
            return
        interval = self.settings().storage.fsync_interval_ms / 1000
        loop = asyncio.get_running_loop()
        self._sync_handle = loop.call_later(interval, self._sync_now)

    def _sync_now(self) -> None:
        self._sync_handle = None
        try:
            self.store.sync()
        except Exception:
            _log.exception("fsync of %s failed", self.store.path)

    # -- long operations

    @property
    def busy_with(self) -> LongKind | None:
        return self._long_kind

    async def run_long(
        self,
        kind: LongKind,
        work: Callable[[], Awaitable[T]],
        *,
        preempt: bool = False,
        abort_event: asyncio.Event | None = None,
    ) -> T:
        """Run ``work`` as this session's one long operation.

        With ``preempt`` (manual compaction) a running operation is aborted and
        awaited first; otherwise a running one makes this a ``busy`` error.
        Aborting (``abort``) cancels the work: a compaction then fails with
        pi's ``Compaction cancelled``; a navigation returns aborted by itself.
        """
        if self._long is not None:
            if not preempt:
                raise BusyError(
                    f"a {self._long_kind} is already running on this session; "
                    "wait for it or abort it",
                    running=self._long_kind,
                )
            await self.abort(self._long_kind)
            running = self._long
            if running is not None:
                with suppress(BaseException):
                    await running
        task: asyncio.Task[T] = asyncio.ensure_future(work())
        self._long, self._long_kind = task, kind
        self._abort_navigation = abort_event
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.cancelled() and not _current_task_cancelling():
                # Aborted through ``abort``, not by the caller's own cancellation.
                raise CancelledError("Compaction cancelled") from None
            task.cancel()
            with suppress(BaseException):
                await task
            raise
        finally:
            if self._long is task:
                self._long, self._long_kind, self._abort_navigation = None, None, None

    async def abort(self, kind: LongKind | None) -> bool:
        """Abort the running operation of ``kind`` (or any, with None)."""
        task = self._long
        if task is None or (kind is not None and kind != self._long_kind):
            return False
        if self._long_kind == "navigation" and self._abort_navigation is not None:
            self._abort_navigation.set()
        else:
            task.cancel()
        return True

    # -- closing

    def close(self) -> None:
        if self._sync_handle is not None:
            self._sync_handle.cancel()
            self._sync_handle = None
        if self._long is not None:
            self._long.cancel()
        self.store.close()


def _current_task_cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


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
    ) -> None:
        self._settings = settings
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
        """The open session, up to date with what other programs wrote to its file."""
        actor = self._by_id.get(session_id)
        if actor is None:
            raise NotFoundError(
                f"Session {session_id} is not open (open it with session/open)",
                sessionId=session_id,
            )
        actor.follow()
        return actor

    def _keep_following(self) -> None:
        if self._follower is None or self._follower.done():
            self._follower = asyncio.get_running_loop().create_task(self._follow_all())

    async def _follow_all(self) -> None:
        """Look at every open file now and then; ends when no session is open."""
        while self._by_id:
            await asyncio.sleep(FOLLOW_INTERVAL_S)
            for actor in list(self._by_id.values()):
                if self._by_id.get(actor.session_id) is not actor:
                    continue
                try:
                    actor.follow()
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
            actor.subscribers.add(client)
            return actor, False
        opening = self._opening.get(key)
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
        return self._adopt(store_factory(), client)

    def adopt(self, store: SessionStore, client: ClientId) -> SessionActor:
        return self._adopt(store, client)

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

    def settings_for(self, session_id: str | None) -> Settings:
        return self.get(session_id).settings() if session_id else self._settings()

    def overrides_of(self, session_id: str) -> Mapping[str, Any]:
        return self.get(session_id).overrides
