"""One client connection: framing in, dispatch, answers out, and the server's own requests.

A connection is transport-neutral: a transport feeds it bytes (``feed``) and gives it a
``ByteSink`` to write to. Each request whose handler is ``async`` runs as its own task so
that ``$/cancelRequest`` can cancel it; plain ``def`` handlers run inline. No exception
from a handler ever reaches the client as a traceback: ``SessiondError``s become their
code/kind, anything else becomes -32603 "Internal error" and is logged with its traceback.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Callable
from enum import IntEnum
from typing import Any, Protocol, TypeVar, overload

import msgspec
from msgspec import UNSET

from sessiond.core.jsjson import replace_lone_surrogates
from sessiond.errors import (
    InvalidParamsError,
    InvalidRequestError,
    MethodNotFoundError,
    ParseError,
    RequestCancelledError,
    SessiondError,
    UnauthorizedError,
)
from sessiond.server.context import NotificationContext, RequestContext
from sessiond.server.framing import (
    DEFAULT_MAX_FRAME_BYTES,
    FrameError,
    FrameErrorKind,
    FrameParser,
)
from sessiond.server.lifecycle import EXIT, INITIALIZE, SHUTDOWN, Lifecycle, State
from sessiond.server.messages import (
    CancelParams,
    ErrorObject,
    ErrorResponse,
    IncomingMessage,
    LogMessageParams,
    OutgoingNotification,
    OutgoingRequest,
    ProgressParams,
    RequestId,
    ResultResponse,
    diagnose,
    error_object,
)
from sessiond.server.outbox import Outbox
from sessiond.server.outgoing import ClientDisconnected, ClientRequestTimeout, PendingRequests
from sessiond.server.router import NoParams, RequestSpec, Router

log = logging.getLogger("sessiond.server")

T = TypeVar("T")

CANCEL_REQUEST = "$/cancelRequest"
DEFAULT_CLIENT_REQUEST_TIMEOUT = 30.0
# Before a TCP client has shown its token it may send only small messages, for a while.
PRE_AUTH_MAX_FRAME_BYTES = 1024 * 1024
AUTH_DEADLINE_SECONDS = 10.0
# When the client's input ends, running requests get this long to answer before the close.
END_OF_INPUT_GRACE_SECONDS = 2.0
# How long a shutdown request waits for the requests received before it.
SHUTDOWN_DRAIN_SECONDS = 10.0
# How long closing waits for cancelled handlers to unwind before the close callbacks run.
_HANDLER_UNWIND_SECONDS = 5.0


class MessageType(IntEnum):
    """LSP ``MessageType`` of ``window/logMessage``."""

    ERROR = 1
    WARNING = 2
    INFO = 3
    LOG = 4
    DEBUG = 5


class ByteSink(Protocol):
    """The writing (and read-pausing) side of a transport; asyncio transports are ByteSinks."""

    def write(self, data: bytes) -> None: ...
    def close(self) -> None: ...
    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...


class _AuthField(msgspec.Struct, rename="camel"):
    auth_token: str | None = None


# What a decode of untrusted bytes raises: msgspec gives up on very deep nesting with a
# RecursionError, not a DecodeError.
_UNDECODABLE = (msgspec.DecodeError, RecursionError)
_encoder = msgspec.json.Encoder()
_message_decoder = msgspec.json.Decoder(IncomingMessage)
_cancel_decoder = msgspec.json.Decoder(CancelParams)
_auth_decoder = msgspec.json.Decoder(_AuthField)


def _decoded(body: bytes) -> IncomingMessage | None:
    try:
        return _message_decoder.decode(body)
    except _UNDECODABLE:
        return None


def _default_initialize(ctx: RequestContext, params: NoParams) -> dict[str, Any]:
    return {"capabilities": {}}


def _default_shutdown(ctx: RequestContext, params: NoParams) -> None:
    return None


_LIFECYCLE_REQUESTS = frozenset({INITIALIZE, SHUTDOWN})
_lifecycle_defaults = Router()
_lifecycle_defaults.add_request(INITIALIZE, NoParams, _default_initialize)
_lifecycle_defaults.add_request(SHUTDOWN, NoParams, _default_shutdown)


class Connection:
    """One client. The daemon sees it as ``ctx.connection`` in every handler."""

    def __init__(
        self,
        router: Router,
        sink: ByteSink,
        *,
        loop: asyncio.AbstractEventLoop,
        connection_id: int = 0,
        peer: str = "client",
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        auth_token: str | None = None,
        on_finished: Callable[[Connection], None] | None = None,
    ) -> None:
        self.id = connection_id
        self.peer = peer
        self._requests = router._requests
        self._notifications = router._notifications
        self._sink = sink
        self._loop = loop
        self._max_frame_bytes = max_frame_bytes
        self._parser = FrameParser(max_frame_bytes)
        self._outbox = Outbox(sink.write)
        self._lifecycle = Lifecycle()
        self._pending = PendingRequests()
        self._running: dict[RequestId, asyncio.Task[None]] = {}
        self._other_tasks: set[asyncio.Task[None]] = set()
        self._close_callbacks: list[Callable[[Connection], object]] = []
        self._on_finished = on_finished
        self._closed = False
        self._close_task: asyncio.Task[None] | None = None
        self._write_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._warned_notifications: set[str] = set()
        self.exit_requested = False
        self._input_ended = False
        self._eof_timer: asyncio.TimerHandle | None = None
        self._auth_token = auth_token.encode() if auth_token is not None else None
        self._auth_timer: asyncio.TimerHandle | None = None
        if self._auth_token is not None:
            self._parser.max_frame_bytes = min(max_frame_bytes, PRE_AUTH_MAX_FRAME_BYTES)
            self._auth_timer = loop.call_later(AUTH_DEADLINE_SECONDS, self._auth_expired)

    # -- state ---------------------------------------------------------------------------------

    @property
    def state(self) -> State:
        return self._lifecycle.state

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def busy(self) -> bool:
        """Whether handlers of this connection are still running."""
        return bool(self._running or self._other_tasks)

    @property
    def shutdown_received(self) -> bool:
        return self._lifecycle.shutdown_received

    @property
    def exit_code(self) -> int:
        """What a stdio server should exit with once this connection ends."""
        return self._lifecycle.exit_code if self.exit_requested else 0

    def on_close(self, callback: Callable[[Connection], object]) -> None:
        """Call ``callback(connection)`` once the connection has closed (it may be async).

        Handlers of the connection have been cancelled and have finished by then.
        """
        self._close_callbacks.append(callback)

    # -- sending ---------------------------------------------------------------------------------

    def notify(self, method: str, params: Any = None) -> None:
        """Send a notification; dropped once the connection is closed."""
        if self._closed:
            return
        message = OutgoingNotification(method=method, params=UNSET if params is None else params)
        self._outbox.send(_encoder.encode(message))

    def progress(self, token: RequestId, value: Any) -> None:
        """Send ``$/progress`` (``value``: a ``WorkDoneBegin/Report/End`` or any JSON value)."""
        self.notify("$/progress", ProgressParams(token, value))

    def log_message(self, message: str, type: MessageType = MessageType.INFO) -> None:
        """Send ``window/logMessage``, for the client to show in its log."""
        self.notify("window/logMessage", LogMessageParams(int(type), message))

    @overload
    async def request(
        self,
        method: str,
        params: Any = None,
        *,
        result_type: type[T],
        timeout: float | None = DEFAULT_CLIENT_REQUEST_TIMEOUT,
    ) -> T: ...

    @overload
    async def request(
        self,
        method: str,
        params: Any = None,
        *,
        timeout: float | None = DEFAULT_CLIENT_REQUEST_TIMEOUT,
    ) -> Any: ...

    async def request(
        self,
        method: str,
        params: Any = None,
        *,
        result_type: Any = Any,
        timeout: float | None = DEFAULT_CLIENT_REQUEST_TIMEOUT,
    ) -> Any:
        """Send a request to the client and wait for its result, decoded as ``result_type``.

        Raises ``ClientRequestTimeout``, ``ClientReturnedError``, ``ClientDisconnected`` or
        ``ClientResultInvalid`` (all ``ClientRequestFailed``). On a timeout, or when the
        caller is cancelled, the client is sent ``$/cancelRequest`` for it.
        """
        if self._closed:
            raise ClientDisconnected(method)
        request_id, future = self._pending.open(method, result_type, self._loop)
        message = OutgoingRequest(
            id=request_id, method=method, params=UNSET if params is None else params
        )
        try:
            self._outbox.send(_encoder.encode(message))
        except BaseException:
            self._pending.discard(request_id)
            raise
        try:
            if timeout is None:
                return await future
            try:
                async with asyncio.timeout(timeout):
                    return await future
            except TimeoutError:
                raise ClientRequestTimeout(method, timeout) from None
        finally:
            if self._pending.discard(request_id) and not self._closed:
                self.notify(CANCEL_REQUEST, CancelParams(request_id))

    async def drain(self) -> None:
        """Wait while the client is not reading fast enough (call between big notifications)."""
        if self._write_paused and not self._closed:
            waiter: asyncio.Future[None] = self._loop.create_future()
            self._drain_waiters.append(waiter)
            await waiter

    def close(self) -> None:
        """Send what is queued, close the transport, cancel handlers, run the close callbacks."""
        if self._closed:
            return
        self._outbox.close()
        self._sink.close()
        self._finish()

    @property
    def close_finished(self) -> bool:
        """Closed, and the close callbacks have run."""
        return self._close_task is not None and self._close_task.done()

    async def wait_closed(self) -> None:
        """Wait until the close callbacks have run (after ``close`` or a lost connection)."""
        if self._close_task is not None:
            await asyncio.shield(self._close_task)

    # -- transport events ------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """Bytes received from the client."""
        if self._closed:
            return
        events = self._parser.feed(data)
        if not events:
            return
        outbox = self._outbox
        outbox.hold()
        try:
            for event in events:
                if self.closed:  # an exit, or a refused token, ends the batch
                    break
                try:
                    if type(event) is bytes:
                        self._receive(event)
                    else:
                        assert isinstance(event, FrameError)
                        self._frame_error(event)
                except Exception:
                    log.exception("connection %s: failed to process a message", self.id)
        finally:
            outbox.release()

    def end_of_input(self) -> None:
        """The client will send nothing more: let running requests answer (briefly), then close."""
        if self._closed or self._input_ended:
            return
        self._input_ended = True
        if not self.busy:
            self.close()
            return
        self._eof_timer = self._loop.call_later(END_OF_INPUT_GRACE_SECONDS, self.close)

    def connection_lost(self, exc: BaseException | None) -> None:
        if exc is not None and not self._closed:
            log.info("connection %s (%s) lost: %s", self.id, self.peer, exc)
        self._outbox.abandon()
        self._finish()

    def pause_writing(self) -> None:
        self._write_paused = True
        if not self._closed:
            self._sink.pause_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        if not self._closed:
            self._sink.resume_reading()
        self._wake_drain_waiters()

    # -- dispatch --------------------------------------------------------------------------------

    def _receive(self, body: bytes) -> None:
        message = _decoded(body)
        if message is None:
            # JavaScript clients send a string cut inside an emoji as a lone surrogate
            # escape, which JSON.parse accepts: read it as U+FFFD rather than refuse.
            readable = replace_lone_surrogates(body)
            message = None if readable is body else _decoded(readable)
        if message is None:
            self._reject(body)
            return
        method = message.method
        if isinstance(method, str):
            request_id = message.id
            if request_id is UNSET:
                self._on_notification(method, message.params)
            else:
                assert not isinstance(request_id, msgspec.UnsetType)
                self._on_request(request_id, method, message.params)
        elif len(message.result) or message.error is not UNSET:
            error = None if isinstance(message.error, msgspec.UnsetType) else message.error
            if not self._pending.resolve(message.id, message.result, error):
                log.info("connection %s: answer for unknown request id %r", self.id, message.id)
        else:
            self._reject(body)

    def _on_request(self, request_id: RequestId | None, method: str, raw: msgspec.Raw) -> None:
        if self._lifecycle.state is not State.READY or method in _LIFECYCLE_REQUESTS:
            self._on_lifecycle_request(request_id, method, raw)
            return
        spec = self._requests.get(method)
        if spec is None:
            self._send_error(request_id, MethodNotFoundError(f"Method not found: {method}"))
            return
        if request_id in self._running:
            self._refuse_duplicate(request_id)
            return
        try:
            # More than 4 bytes: neither absent nor null, so no need for decode_params' checks.
            params = spec.decoder.decode(raw) if len(raw) > 4 else spec.decode_params(raw)
        except _UNDECODABLE as exc:
            self._send_error(request_id, _invalid_params(exc))
            return
        self._dispatch(spec, RequestContext(self, request_id, method, raw), params, ())

    def _on_lifecycle_request(
        self, request_id: RequestId | None, method: str, raw: msgspec.Raw
    ) -> None:
        """A request outside the READY state, or initialize/shutdown: the gated slow path."""
        lifecycle = self._lifecycle
        refusal = lifecycle.refuse_request(method)
        if refusal is not None:
            self._send_error(request_id, refusal)
            return
        spec = self._requests.get(method) or _lifecycle_defaults._requests.get(method)
        if spec is None:
            self._send_error(request_id, MethodNotFoundError(f"Method not found: {method}"))
            return
        if request_id in self._running:
            self._refuse_duplicate(request_id)
            return
        # The token is checked first, so a stranger learns nothing, not even about params.
        if method == INITIALIZE and not self._authorized(raw):
            log.warning("connection %s (%s): unauthorized initialize", self.id, self.peer)
            self._send_error(
                request_id, UnauthorizedError("Unauthorized: missing or wrong authToken")
            )
            self.close()
            return
        try:
            params = spec.decode_params(raw)
        except _UNDECODABLE as exc:
            self._send_error(request_id, _invalid_params(exc))
            return
        earlier: tuple[asyncio.Task[None], ...] = ()
        if method == INITIALIZE:
            lifecycle.initialize_started()
        elif method == SHUTDOWN:
            lifecycle.shutdown_started()
            # shutdown is answered once the requests before it have: "answered" means "done".
            earlier = (*self._running.values(), *self._other_tasks)
        self._dispatch(spec, RequestContext(self, request_id, method, raw), params, earlier)

    def _dispatch(
        self,
        spec: RequestSpec[Any],
        ctx: RequestContext,
        params: object,
        earlier: tuple[asyncio.Task[None], ...],
    ) -> None:
        if spec.is_async or earlier:
            task = self._loop.create_task(self._run_request(ctx, spec.handler, params, earlier))
            if ctx.request_id is not None:
                self._running[ctx.request_id] = task
            else:
                self._other_tasks.add(task)
            task.add_done_callback(functools.partial(self._request_finished, ctx))
            return
        try:
            result = spec.handler(ctx, params)
        except SessiondError as err:
            self._answer_error(ctx, err)
        except Exception as exc:
            self._answer_internal_error(ctx, exc)
        else:
            self._answer(ctx, result)

    def _refuse_duplicate(self, request_id: RequestId | None) -> None:
        duplicate = f"Invalid Request: request id {request_id!r} is already in use"
        self._send_error(request_id, InvalidRequestError(duplicate))

    async def _run_request(
        self,
        ctx: RequestContext,
        handler: Callable[..., object],
        params: object,
        earlier: tuple[asyncio.Task[None], ...],
    ) -> None:
        try:
            if earlier:
                await asyncio.wait(earlier, timeout=SHUTDOWN_DRAIN_SECONDS)
            # The handler's coroutine is made here, so a task cancelled before it ever ran
            # leaves no coroutine that was never awaited.
            result = handler(ctx, params)
            if inspect.isawaitable(result):
                result = await result
        except asyncio.CancelledError:
            self._answer_error(ctx, RequestCancelledError("Request cancelled"))
        except SessiondError as err:
            self._answer_error(ctx, err)
        except Exception as exc:
            self._answer_internal_error(ctx, exc)
        else:
            self._answer(ctx, result)

    def _request_finished(self, ctx: RequestContext, task: asyncio.Task[None]) -> None:
        # A task cancelled before its first step never runs its coroutine, so the
        # except clause above cannot answer it: a request and its $/cancelRequest in
        # one read would otherwise stay unanswered forever.
        if task.cancelled():
            self._answer_error(ctx, RequestCancelledError("Request cancelled"))
        if ctx.request_id is None:
            self._other_tasks.discard(task)
        elif self._running.get(ctx.request_id) is task:
            del self._running[ctx.request_id]
        if self._input_ended and not self.busy:
            self.close()

    def _answer(self, ctx: RequestContext, result: object) -> None:
        try:
            body = _encoder.encode(ResultResponse(id=ctx.request_id, result=result))
        except Exception as exc:
            self._answer_internal_error(ctx, exc, "result could not be encoded")
            return
        if ctx.method == INITIALIZE:
            self._initialize_finished(True)
        self._outbox.send(body)

    def _answer_error(self, ctx: RequestContext, err: SessiondError) -> None:
        if ctx.method == INITIALIZE:
            self._initialize_finished(False)
        self._send_error(ctx.request_id, err)

    def _answer_internal_error(
        self, ctx: RequestContext, exc: BaseException, what: str = "handler failed"
    ) -> None:
        log.error(
            "connection %s: %s (id %r): %s", self.id, ctx.method, ctx.request_id, what, exc_info=exc
        )
        self._answer_error(ctx, SessiondError("Internal error"))

    def _initialize_finished(self, succeeded: bool) -> None:
        self._lifecycle.initialize_finished(succeeded)
        if succeeded and self._auth_token is not None:
            self._parser.max_frame_bytes = self._max_frame_bytes
            if self._auth_timer is not None:
                self._auth_timer.cancel()
                self._auth_timer = None

    def _send_error(self, request_id: RequestId | None, err: SessiondError) -> None:
        if self._closed:
            return
        try:
            body = _encoder.encode(ErrorResponse(id=request_id, error=error_object(err)))
        except Exception:
            # The error's details are not JSON-encodable: send it without them.
            log.exception("connection %s: could not encode error details", self.id)
            bare = ErrorObject(code=err.code, message=err.message, data={"kind": err.kind})
            body = _encoder.encode(ErrorResponse(id=request_id, error=bare))
        self._outbox.send(body)

    def _on_notification(self, method: str, raw: msgspec.Raw) -> None:
        if method == CANCEL_REQUEST:
            self._cancel(raw)
            return
        if method == EXIT:
            self.exit_requested = True
            log.info("connection %s (%s): exit", self.id, self.peer)
            self.close()
            return
        if not self._lifecycle.accepts_notification(method):
            log.debug("connection %s: dropped %s in state %s", self.id, method, self.state)
            return
        spec = self._notifications.get(method)
        if spec is None:
            if not method.startswith("$/") and method not in self._warned_notifications:
                self._warned_notifications.add(method)
                log.info("connection %s: ignoring unknown notification %s", self.id, method)
            return
        try:
            params = spec.decode_params(raw)
        except _UNDECODABLE as exc:
            log.warning("connection %s: %s: %s", self.id, method, _invalid_params(exc).message)
            return
        ctx = NotificationContext(self, method)
        if spec.is_async:
            task = self._loop.create_task(self._run_notification(ctx, spec.handler, params))
            self._other_tasks.add(task)
            return
        try:
            spec.handler(ctx, params)
        except Exception:
            log.exception("connection %s: handler of notification %s failed", self.id, method)

    async def _run_notification(
        self, ctx: NotificationContext, handler: Callable[..., object], params: object
    ) -> None:
        try:
            outcome = handler(ctx, params)
            if inspect.isawaitable(outcome):
                await outcome
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("connection %s: handler of notification %s failed", self.id, ctx.method)
        finally:
            self._other_tasks.discard(asyncio.current_task())
            if self._input_ended and not self.busy:
                self.close()

    def _cancel(self, raw: msgspec.Raw) -> None:
        try:
            request_id = _cancel_decoder.decode(raw).id
        except _UNDECODABLE as exc:
            log.warning("connection %s: bad $/cancelRequest: %s", self.id, exc)
            return
        task = self._running.get(request_id)
        if task is not None:
            task.cancel()

    def _reject(self, body: bytes) -> None:
        diagnosis = diagnose(body)
        log.warning("connection %s: %s", self.id, diagnosis.problem)
        if diagnosis.bad_answer_id is not None:
            self._pending.reject(diagnosis.bad_answer_id, diagnosis.problem)
            return
        if diagnosis.as_batch:
            self._outbox.send(
                _encoder.encode(
                    [
                        ErrorResponse(id=request_id, error=error_object(err))
                        for request_id, err in diagnosis.replies
                    ]
                )
            )
            return
        for request_id, err in diagnosis.replies:
            self._send_error(request_id, err)

    def _frame_error(self, problem: FrameError) -> None:
        log.warning("connection %s: framing: %s", self.id, problem.message)
        if problem.kind is FrameErrorKind.TOO_LARGE:
            err: SessiondError = InvalidRequestError(
                f"Invalid Request: {problem.message}", reason="tooLarge"
            )
            self._send_error(problem.request_id, err)
            if self._auth_token is not None and self._lifecycle.state is State.UNINITIALIZED:
                self.close()
            return
        self._send_error(None, ParseError(f"Parse error: {problem.message}"))

    def _authorized(self, raw: msgspec.Raw) -> bool:
        expected = self._auth_token
        if expected is None:
            return True
        try:
            presented = _auth_decoder.decode(raw).auth_token if len(raw) else None
        except _UNDECODABLE:
            presented = None
        if presented is None:
            return False
        import hmac  # only TCP connections get here

        return hmac.compare_digest(expected, presented.encode())

    def _auth_expired(self) -> None:
        self._auth_timer = None
        if self._lifecycle.state is not State.READY and not self._closed:
            log.warning("connection %s (%s): no initialize in time, closing", self.id, self.peer)
            self.close()

    # -- closing ---------------------------------------------------------------------------------

    def _finish(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._lifecycle.closed()
        for timer in (self._auth_timer, self._eof_timer):
            if timer is not None:
                timer.cancel()
        self._auth_timer = self._eof_timer = None
        handlers = [*self._running.values(), *self._other_tasks]
        for task in handlers:
            task.cancel()
        self._pending.fail_all()
        self._wake_drain_waiters()
        self._close_task = self._loop.create_task(self._after_close(handlers))
        if self._on_finished is not None:
            self._on_finished(self)

    async def _after_close(self, handlers: list[asyncio.Task[None]]) -> None:
        if handlers:
            _, stuck = await asyncio.wait(handlers, timeout=_HANDLER_UNWIND_SECONDS)
            if stuck:
                log.warning("connection %s: %d handlers ignored cancellation", self.id, len(stuck))
        for callback in self._close_callbacks:
            try:
                outcome = callback(self)
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception:
                log.exception("connection %s: close callback failed", self.id)

    def _wake_drain_waiters(self) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


def _invalid_params(exc: Exception) -> InvalidParamsError:
    """-32602 naming the offending field: msgspec's message with ``$`` spelled ``params``."""
    text = str(exc)
    message, _, where = text.partition(" - at `")
    if where:
        path = "params" + where.rstrip("`")[1:]
        return InvalidParamsError(f"Invalid params: {message} - at `{path}`", path=path)
    return InvalidParamsError(f"Invalid params: {message}")
