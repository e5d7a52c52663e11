"""Notifications from the daemon: typed decoding, callbacks and async iterators.

Callbacks run in the order notifications arrive, on the connection's reader task, so
they must be quick; a callback that returns an awaitable has it scheduled as a task.
A failing callback is logged and does not disturb the others.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeAlias

import msgspec

from .protocol import NOTIFICATIONS
from .types import (
    CancelParams,
    CompactHookParams,
    CompactionEndedNotification,
    CompactionStartedNotification,
    LogMessageParams,
    ProgressParams,
    SessionChanged,
    SessionRecovered,
    TreeHookParams,
)

log = logging.getLogger("sessiond_client")

NotificationParams: TypeAlias = (
    SessionChanged
    | SessionRecovered
    | CompactionStartedNotification
    | CompactionEndedNotification
    | ProgressParams
    | LogMessageParams
    | CompactHookParams
    | TreeHookParams
    | CancelParams
    | Any
)
# Every notification the daemon sends, with its params type (from the schema).
PARAMS_TYPES: dict[str, type[msgspec.Struct]] = dict(NOTIFICATIONS)
_decoders = {method: msgspec.json.Decoder(kind) for method, kind in PARAMS_TYPES.items()}
_any_decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder()


@dataclass(frozen=True, slots=True)
class Notification:
    """``params`` is the method's type from ``PARAMS_TYPES``, or plain JSON for other methods."""

    method: str
    params: NotificationParams


Callback: TypeAlias = Callable[[Notification], object]


def decode_notification(method: str, raw: msgspec.Raw) -> Notification:
    body = bytes(raw) if len(raw) else b"null"
    decoder = _decoders.get(method)
    if decoder is not None:
        try:
            return Notification(method, decoder.decode(body))
        except msgspec.ValidationError as exc:
            # Newer daemon, older client: hand over the JSON rather than lose it.
            log.warning("%s params not as expected (%s); passing them on as JSON", method, exc)
    return Notification(method, _any_decoder.decode(body))


def call_soon(callback: Callable[[Any], object], value: Any, tasks: set[asyncio.Task[Any]]) -> None:
    """Run a callback; schedule what it returns if that is awaitable; log its failure."""
    try:
        outcome = callback(value)
    except Exception:
        log.exception("notification callback %r failed", callback)
        return
    if inspect.isawaitable(outcome):
        task = asyncio.ensure_future(_logged(outcome))
        tasks.add(task)
        task.add_done_callback(tasks.discard)


async def _logged(awaitable: Awaitable[object]) -> None:
    try:
        await awaitable
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("async notification callback failed")


class NotificationStream:
    """An async iterator over the notifications of some methods (all when none are named).

    It buffers without limit from the moment it is created and ends when the client
    closes. Use it as an async context manager to unsubscribe when done.
    """

    def __init__(self, hub: NotificationHub, methods: frozenset[str] | None) -> None:
        self._hub = hub
        self.methods = methods
        self._queue: asyncio.Queue[Notification | None] = asyncio.Queue()
        self._ended = False

    def _put(self, notification: Notification | None) -> None:
        self._queue.put_nowait(notification)

    def __aiter__(self) -> AsyncIterator[Notification]:
        return self

    async def __anext__(self) -> Notification:
        if self._ended:
            raise StopAsyncIteration
        item = await self._queue.get()
        if item is None:
            self._ended = True
            raise StopAsyncIteration
        return item

    async def wait_for(
        self, predicate: Callable[[Notification], bool], timeout: float | None = None
    ) -> Notification:
        """The next notification that satisfies ``predicate`` (others are consumed).

        Raises ``TimeoutError`` after ``timeout`` seconds, ``EOFError`` if the client closes.
        """
        async with asyncio.timeout(timeout):
            async for notification in self:
                if predicate(notification):
                    return notification
        raise EOFError("the client closed before a matching notification arrived")

    def pending(self) -> list[Notification]:
        """What has arrived and was not consumed yet, consuming it."""
        items: list[Notification] = []
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if item is None:
                self._queue.put_nowait(None)  # keep the end marker for the iterator
                break
            items.append(item)
        return items

    def close(self) -> None:
        self._hub.remove_stream(self)

    async def __aenter__(self) -> NotificationStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class NotificationHub:
    """Who wants which notifications; the client feeds it everything the daemon sends."""

    def __init__(self) -> None:
        self._callbacks: list[tuple[frozenset[str] | None, Callback]] = []
        self._streams: list[NotificationStream] = []
        self._progress: dict[int | str, Callable[[Any], object]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False

    def subscribe(
        self, callback: Callback, methods: Iterable[str] | None = None
    ) -> Callable[[], None]:
        entry = (frozenset(methods) if methods is not None else None, callback)
        self._callbacks.append(entry)

        def unsubscribe() -> None:
            if entry in self._callbacks:
                self._callbacks.remove(entry)

        return unsubscribe

    def stream(self, methods: Iterable[str] | None = None) -> NotificationStream:
        stream = NotificationStream(self, frozenset(methods) if methods is not None else None)
        if self._closed:
            stream._put(None)
        else:
            self._streams.append(stream)
        return stream

    def remove_stream(self, stream: NotificationStream) -> None:
        if stream in self._streams:
            self._streams.remove(stream)
            stream._put(None)

    def explicitly_wanted(self) -> set[str]:
        """Methods some subscriber named (for declaring notification hooks)."""
        named: set[str] = set()
        for methods, _ in self._callbacks:
            named |= methods or set()
        for stream in self._streams:
            named |= stream.methods or set()
        return named

    def track_progress(self, token: int | str, callback: Callable[[Any], object]) -> None:
        self._progress[token] = callback

    def untrack_progress(self, token: int | str) -> None:
        self._progress.pop(token, None)

    def dispatch(self, notification: Notification) -> None:
        params = notification.params
        if isinstance(params, ProgressParams):
            callback = self._progress.get(params.token)
            if callback is not None:
                call_soon(callback, params.value, self._tasks)
        for methods, subscriber in list(self._callbacks):
            if methods is None or notification.method in methods:
                call_soon(subscriber, notification, self._tasks)
        for stream in self._streams:
            if stream.methods is None or notification.method in stream.methods:
                stream._put(notification)

    def end(self) -> None:
        """The connection is gone: end every stream (their iterations stop)."""
        self._closed = True
        streams, self._streams = self._streams, []
        for stream in streams:
            stream._put(None)

    async def close(self) -> None:
        """End every stream; let async callbacks already started finish (briefly)."""
        self.end()
        if self._tasks:
            _, stuck = await asyncio.wait(set(self._tasks), timeout=1.0)
            for task in stuck:
                task.cancel()
