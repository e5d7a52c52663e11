"""The client's plumbing: connecting, handlers for the daemon's requests, notifications, closing.

``SessiondClient`` (client.py) adds one typed method per daemon request on top.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Generator, Iterable
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

import msgspec

from .errors import SessiondClientError
from .notifications import (
    Callback,
    NotificationHub,
    NotificationStream,
    decode_notification,
)
from .rpc import RpcConnection, Tracer
from .transport import Transport
from .types import (
    BeforeCompactHookParams,
    BeforeCompactHookResult,
    BeforeTreeHookParams,
    BeforeTreeHookResult,
    CompactingHookParams,
    CompactingHookResult,
    LlmCompleteParams,
    LlmCompleteResult,
    WorkDoneProgress,
)

log = logging.getLogger("sessiond_client")

T = TypeVar("T")
C = TypeVar("C", bound="ClientBase")
P = TypeVar("P", bound=msgspec.Struct)
R = TypeVar("R", bound=msgspec.Struct)

BeforeCompactHandler = Callable[
    [BeforeCompactHookParams], Awaitable[BeforeCompactHookResult | None]
]
CompactingHandler = Callable[[CompactingHookParams], Awaitable[CompactingHookResult | None]]
BeforeTreeHandler = Callable[[BeforeTreeHookParams], Awaitable[BeforeTreeHookResult | None]]
LlmCompleteHandler = Callable[[LlmCompleteParams], Awaitable[str]]
ProgressCallback = Callable[[WorkDoneProgress], object]

# The hooks that are daemon->client requests, by the method the daemon sends.
REQUEST_HOOKS = {
    "hooks/session_before_compact": "session_before_compact",
    "hooks/session.compacting": "session.compacting",
    "hooks/session_before_tree": "session_before_tree",
}
NOTIFICATION_HOOKS = {
    "hooks/session_compact": "session_compact",
    "hooks/session_tree": "session_tree",
}
LLM_COMPLETE = "llm/complete"
WORK_DONE_PROGRESS_CREATE = "window/workDoneProgress/create"
_any_decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder()
_tokens = itertools.count(1)


class ClientBase:
    def __init__(
        self,
        transport: Transport,
        *,
        auth_token: str | None = None,
        trace: Tracer | None = None,
    ) -> None:
        self.transport = transport
        self._auth_token = auth_token
        self._hub = NotificationHub()
        self._rpc = RpcConnection(
            transport.reader,
            transport.writer,
            on_notification=self._notified,
            trace=trace,
            describe_end=transport.describe_end,
            on_ended=self._hub.end,
        )
        self._rpc.start()
        self.initialized = False
        self._shutdown_done = False
        self._closed: asyncio.Event | None = None

    # -- state ----------------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        """Connected, and not closing."""
        return self._rpc.is_open and self._closed is None

    @property
    def failure(self) -> SessiondClientError | None:
        """Why the connection ended, once it has (None while it is open)."""
        return self._rpc.failure

    # -- requests -------------------------------------------------------------------------------

    async def request(self, method: str, params: Any, result_type: type[T]) -> T:
        """Send any request (``params``: a Struct, a dict, or None) and decode its result."""
        return await self._rpc.request(method, params if params is not None else {}, result_type)

    async def _with_progress(
        self,
        method: str,
        params: msgspec.Struct,
        result_type: type[T],
        progress: ProgressCallback | None,
    ) -> T:
        """A request that carries a ``workDoneToken`` when the caller wants ``$/progress``."""
        if progress is None:
            return await self.request(method, params, result_type)
        token = f"sessiond-client-{next(_tokens)}"
        body = msgspec.to_builtins(params)
        body["workDoneToken"] = token
        self._hub.track_progress(token, progress)
        try:
            return await self.request(method, body, result_type)
        finally:
            # $/progress "end" is sent before the answer, so nothing is lost by stopping here.
            self._hub.untrack_progress(token)

    def notify(self, method: str, params: Any = None) -> None:
        self._rpc.notify(method, params if params is not None else msgspec.UNSET)

    # -- the daemon's requests ------------------------------------------------------------------

    def handle_request(self, method: str, handler: Callable[[Any], Awaitable[Any]] | None) -> None:
        """Answer the daemon's ``method`` requests with ``handler(params as plain JSON)``.

        ``None`` removes the handler (the daemon then gets -32601).
        """
        if handler is None:
            self._rpc.handlers.pop(method, None)
            return

        async def call(raw: msgspec.Raw) -> Any:
            return await handler(_any_decoder.decode(raw) if len(raw) else None)

        self._rpc.handlers[method] = call

    def _typed_handler(
        self,
        method: str,
        params_type: type[P],
        handler: Callable[[P], Awaitable[R | None]],
        empty: Callable[[], R],
    ) -> None:
        decoder = msgspec.json.Decoder(params_type)

        async def call(raw: msgspec.Raw) -> R:
            answer = await handler(decoder.decode(raw))
            # "No answer" is an empty object: null would not decode as the daemon's type.
            return answer if answer is not None else empty()

        self._rpc.handlers[method] = call

    def handle_before_compact(self, handler: BeforeCompactHandler) -> BeforeCompactHandler:
        """``hooks/session_before_compact``: return ``cancel=True``, a compaction, or None."""
        self._typed_handler(
            "hooks/session_before_compact",
            BeforeCompactHookParams,
            handler,
            BeforeCompactHookResult,
        )
        return handler

    def handle_compacting(self, handler: CompactingHandler) -> CompactingHandler:
        """``hooks/session.compacting``: return a prompt, extra context, preserved data, or None."""
        self._typed_handler(
            "hooks/session.compacting", CompactingHookParams, handler, CompactingHookResult
        )
        return handler

    def handle_before_tree(self, handler: BeforeTreeHandler) -> BeforeTreeHandler:
        """``hooks/session_before_tree``: return ``cancel=True``, a summary, or None."""
        self._typed_handler(
            "hooks/session_before_tree", BeforeTreeHookParams, handler, BeforeTreeHookResult
        )
        return handler

    def handle_llm_complete(self, handler: LlmCompleteHandler) -> LlmCompleteHandler:
        """``llm/complete``: summarize with the client's own model; return the text.

        Raise ``OperationCancelledError`` to cancel the summary (and the compaction).
        """
        decoder = msgspec.json.Decoder(LlmCompleteParams)

        async def call(raw: msgspec.Raw) -> LlmCompleteResult:
            return LlmCompleteResult(text=await handler(decoder.decode(raw)))

        self._rpc.handlers[LLM_COMPLETE] = call
        return handler

    def _declared_hooks(self) -> list[str]:
        handled = [hook for method, hook in REQUEST_HOOKS.items() if method in self._rpc.handlers]
        wanted = self._hub.explicitly_wanted()
        return handled + [hook for method, hook in NOTIFICATION_HOOKS.items() if method in wanted]

    # -- notifications --------------------------------------------------------------------------

    def _notified(self, method: str, raw: msgspec.Raw) -> None:
        self._hub.dispatch(decode_notification(method, raw))

    def subscribe(
        self, callback: Callback, methods: Iterable[str] | None = None
    ) -> Callable[[], None]:
        """Call ``callback(notification)`` for ``methods`` (all when None); returns unsubscribe."""
        return self._hub.subscribe(callback, methods)

    def notifications(self, *methods: str) -> NotificationStream:
        """An async iterator over notifications of ``methods`` (all when none are named)."""
        return self._hub.stream(methods or None)

    # -- closing --------------------------------------------------------------------------------

    async def close(self, timeout: float = 5.0) -> None:
        """``shutdown`` then ``exit``, close the connection, wait for a spawned daemon to exit.

        Requests still waiting fail with ``ConnectionClosedError`` (and the daemon is asked
        to cancel them). A daemon that has not exited ``timeout`` seconds after ``exit`` is
        terminated, then killed. Safe to call more than once, and after the connection was lost.
        """
        if self._closed is not None:
            await self._closed.wait()
            return
        self._closed = asyncio.Event()
        try:
            if self._rpc.is_open:
                self._rpc.abandon_pending()
                if self.initialized and not self._shutdown_done:
                    try:
                        async with asyncio.timeout(timeout):
                            await self._rpc.request("shutdown", {}, type(None))
                    except (SessiondClientError, TimeoutError) as exc:
                        log.info("shutdown was not answered: %s", exc)
                self._rpc.notify("exit")
                # Let the daemon end the stream itself: our close is then not a disconnect.
                await self._rpc.wait_ended(min(timeout, 1.0))
            await self._rpc.aclose()
            await self.transport.aclose(timeout)
        finally:
            await self._hub.close()
            self._closed.set()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()


class Connecting(Generic[C]):
    """What ``SessiondClient.spawn()`` and friends return: await it, or ``async with`` it."""

    def __init__(self, connect: Callable[[], Awaitable[C]]) -> None:
        self._connect = connect
        self._client: C | None = None

    def __await__(self) -> Generator[Any, None, C]:
        return self._connect().__await__()

    async def __aenter__(self) -> C:
        self._client = await self._connect()
        return self._client

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._client is not None:
            await self._client.close()
