"""One open session: the state the daemon keeps per session file, and its file jobs.

An actor owns its ``SessionStore`` and runs at most one long operation at a time (a
compaction, or a navigation that writes a summary); a manual compaction aborts whatever
runs first, as pi does. Short mutations run on the event loop and never interleave.

Other programs' changes to the file are file work of any size, never done on the event
loop: a request first looks at the file (``ready_now``, one ``stat``); if it changed,
the request waits at the session's ``Gate`` while a worker thread reads the changes,
and the session's later requests wait behind it, in order. Work that must not run
beside unread changes (an append) reads at most ``INLINE_FOLLOW_BYTES`` of them in place
(``CatchUpNeeded``) and is retried after a catch-up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import suppress
from pathlib import Path
from typing import Any, Final, Literal, Protocol, TypeVar

from sessiond.core.entries import Entry
from sessiond.core.tokens import Estimator
from sessiond.errors import (
    BusyError,
    NotFoundError,
    OperationCancelledError,
    SessiondError,
    StorageError,
)
from sessiond.settings import LayerCache, Settings
from sessiond.store.catching_up import read_changes
from sessiond.store.foreign_writes import Followed
from sessiond.store.session import SessionStore
from sessiond.tiktoken_offline import estimator as estimator_named

from .background import BackgroundSummaries
from .gate import Gate
from .hooks import Hooks, NoHooks
from .loop_rule import CompactionsLeft
from .turns import OverflowGuard
from .workers import in_worker

_log = logging.getLogger(__name__)
T = TypeVar("T")
ClientId = int
LongKind = Literal["compaction", "navigation"]
# Bytes of others' changes read in place (an append's own look at the file); more is
# read in a worker thread.
INLINE_FOLLOW_BYTES: Final = 256 * 1024
# Changes read one after another before a request is served anyway (a file that keeps
# changing must not hold its requests for ever).
_CATCH_UP_ROUNDS: Final = 4


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
        # The summary written in the background, and what recent compactions left.
        self.background = BackgroundSummaries()
        self.compactions_left = CompactionsLeft()
        # Rewrites and other programs' writes seen so far (a background summary written
        # before one is stale).
        self.changes = 0
        self._long: asyncio.Task[Any] | None = None
        self._long_kind: LongKind | None = None
        self._abort_navigation: asyncio.Event | None = None
        self._sync_handle: asyncio.TimerHandle | None = None
        self._gate = Gate()
        self._closed = False
        # Why the last catch-up could not read the file's changes (None: it could).
        self.follow_error: SessiondError | None = None
        # What a daemon reads of others' changes where its clients are served; the rest
        # is read in a worker thread (``catch_up``).
        store.inline_follow_bytes = INLINE_FOLLOW_BYTES

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

    def ready_now(self) -> bool:
        """Whether a request may use the store at once: no file job holds the session and
        the file shows no change since it was last read (one ``stat``). What an append
        took in meanwhile is announced here."""
        if not self._gate.free or self._closed:
            return False
        try:
            pending = self.store.plan_changes() is not None
        except (OSError, SessiondError):
            pending = False  # cannot look: serve what is held, as before
        if not pending:
            self._announce(self.store.take_unannounced())
        return not pending

    async def use(self, work: Callable[[SessionActor], T], *, repair: bool = False) -> T:
        """``work(self)``, after everything that came before it and after reading what
        other programs changed in the file (in a worker thread; ``repair`` also cuts off
        a line a crashed writer left unfinished, so that an append can go after it)."""
        async with self._gate.held():
            await self._catch_up(repair=repair)
            self._check_open()
            return work(self)

    @property
    def idle(self) -> bool:
        """Whether no request holds or waits for the session (then a catch-up here would
        only make them wait)."""
        return self._gate.free

    async def file_job(self, prepare: Callable[[SessionActor], Callable[[], T]]) -> T:
        """File work on the session's behalf (a fork's copy) in a worker thread: decided by
        ``prepare(self)`` from the up-to-date index, done while the session's requests
        wait behind it, so that nothing rereads the file under it."""
        async with self._gate.held():
            await self._catch_up()
            self._check_open()
            job = prepare(self)
            return await in_worker(job)

    async def exclusive(self, work: Callable[[], Awaitable[T]]) -> T:
        """``work()`` alone on the session's file (a rewrite in a worker thread): after a
        catch-up, with the session's requests waiting behind it and every append refused
        meanwhile (``SessionStore.appends_held``), so that nothing is written to the file
        the rewrite replaces."""
        async with self._gate.held():
            await self._catch_up()
            self._check_open()
            self.store.appends_held = True
            self.changes += 1
            try:
                return await work()
            finally:
                self.store.appends_held = False

    def _check_open(self) -> None:
        if self._closed:
            raise NotFoundError(
                f"Session {self.session_id} is not open (open it with session/open)",
                sessionId=self.session_id,
            )

    async def catch_up(self) -> None:
        """Read what other programs changed in the file (in a worker thread), tell the
        clients; the session's requests wait meanwhile, nobody else's."""
        async with self._gate.held():
            await self._catch_up()

    async def _catch_up(self, *, repair: bool = False) -> None:
        self.follow_error = None
        for _ in range(_CATCH_UP_ROUNDS):
            if self._closed:
                return
            try:
                plan = self.store.plan_changes()
                if plan is None:
                    break
                changes = await in_worker(read_changes, plan)
                taken = self.store.take_changes(changes)
            except (SessiondError, OSError) as exc:
                # What was read stays served; a write, which must first take the changes
                # in, fails with this (see ``rpc.daemon``).
                self.follow_error = _as_sessiond_error(exc, self.store.path)
                self._warn_following(exc)
                return
            self._announce([taken] if taken is not None else [])
        self._announce(self.store.take_unannounced())
        if repair:
            await self._cut_stale_tail()

    async def _cut_stale_tail(self) -> None:
        job = self.store.stale_tail_cut()
        if job is None:
            return
        torn, cut = job
        try:
            seen = await in_worker(cut)
        except (SessiondError, OSError) as exc:
            self._warn_following(exc)
            return
        if not self._closed:
            self.store.take_cut(torn, seen)

    def _warn_following(self, exc: Exception) -> None:
        what = exc.message if isinstance(exc, SessiondError) else exc
        _log.warning("following %s: %s", self.store.path, what)

    def _announce(self, changes: list[Followed]) -> None:
        self.changes += len(changes)
        for change in changes:
            self._observe(change.appended_ids)
            if self._on_followed is not None:
                self._on_followed(self, change)

    def _observe(self, appended_ids: list[str]) -> None:
        """What others appended re-arms the overflow guard as the session's own appends do
        (a user message, an answer that is not an error): decided from the index where it
        can be, so that a big append is not decoded here."""
        records = [self.store.record(entry_id) for entry_id in appended_ids]
        if any(record.role == "user" for record in records):
            self.guard.attempted = False
            return
        for record in reversed(records):
            if record.role == "assistant":
                self.guard.observe(self.store.entry_of(record))
                return

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
            self._abort_long(self._long_kind)
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
                raise OperationCancelledError("Compaction cancelled") from None
            task.cancel()
            with suppress(BaseException):
                await task
            raise
        finally:
            if self._long is task:
                self._long, self._long_kind, self._abort_navigation = None, None, None

    async def abort(self, kind: LongKind | None) -> bool:
        """Abort the running operation of ``kind`` (or any, with None); aborting a
        compaction also drops the summary being written in the background."""
        dropped = kind != "navigation" and self.background.abort()
        return self._abort_long(kind) or dropped

    def _abort_long(self, kind: LongKind | None) -> bool:
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
        self._closed = True
        if self._sync_handle is not None:
            self._sync_handle.cancel()
            self._sync_handle = None
        if self._long is not None:
            self._long.cancel()
        self.background.abort()
        self.store.close()


def _current_task_cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _as_sessiond_error(exc: Exception, path: Path) -> SessiondError:
    if isinstance(exc, SessiondError):
        return exc
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return StorageError(f"cannot read {path}: {reason}", path=str(path))
