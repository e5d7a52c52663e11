"""Running one connection's requests and notifications, and answering them.

``async`` handlers run as tasks, so that ``$/cancelRequest`` can cancel them; plain ones
run inline (or raise ``AnswerLater``). A handler's exception never reaches the client as
a traceback: a ``SessiondError`` becomes its code and kind, anything else -32603,
logged. The lifecycle gate and the token check of ``initialize`` are here.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import UNSET

from sessiond.core.inert import inert, quoted
from sessiond.errors import (
    InvalidParamsError,
    InvalidRequestError,
    MethodNotFoundError,
    ParseError,
    RequestCancelledError,
    SessiondError,
    UnauthorizedError,
)
from sessiond.jsonrpc.auth_gate import AuthGate
from sessiond.jsonrpc.client_requests import PendingClientRequests
from sessiond.jsonrpc.diagnosis import diagnose
from sessiond.jsonrpc.envelopes import (
    UNDECODABLE,
    ErrorObject,
    ErrorResponse,
    IncomingMessage,
    RequestId,
    ResultResponse,
    error_object,
)
from sessiond.jsonrpc.frame_writer import FrameWriter
from sessiond.jsonrpc.handler_context import AnswerLater, NotificationContext, RequestContext
from sessiond.jsonrpc.header_framing import FrameError, FrameErrorKind
from sessiond.jsonrpc.incoming_queue import QueuedItem
from sessiond.jsonrpc.lifecycle import EXIT, INITIALIZE, SHUTDOWN, Lifecycle, State
from sessiond.jsonrpc.lsp_notifications import CANCEL_REQUEST, CancelParams
from sessiond.jsonrpc.router import NoParams, RequestSpec, Router

if TYPE_CHECKING:
    from sessiond.jsonrpc.connection import Connection

log = logging.getLogger("sessiond.jsonrpc")

# Unknown notification names a connection is warned about (once each); later ones are
# not logged, so that a client cannot grow the daemon or its log with new names.
MAX_WARNED_NOTIFICATIONS = 32
# How long a shutdown request waits for the requests received before it.
SHUTDOWN_DRAIN_SECONDS = 10.0

_encoder = msgspec.json.Encoder()
cancel_params_decoder = msgspec.json.Decoder(CancelParams)


# How much of a method name a client sent is repeated (in an error, a log line).
_SHOWN_NAME = 100


def _method_not_found(method: str) -> MethodNotFoundError:
    cut = "..." if len(method) > _SHOWN_NAME else ""
    return MethodNotFoundError(f"Method not found: {inert(method[:_SHOWN_NAME])}{cut}")


def _default_initialize(ctx: RequestContext, params: NoParams) -> dict[str, Any]:
    return {"capabilities": {}}


def _default_shutdown(ctx: RequestContext, params: NoParams) -> None:
    return None


_LIFECYCLE_REQUESTS = frozenset({INITIALIZE, SHUTDOWN})
_lifecycle_defaults = Router()
_lifecycle_defaults.add_request(INITIALIZE, NoParams, _default_initialize)
_lifecycle_defaults.add_request(SHUTDOWN, NoParams, _default_shutdown)


class Dispatcher:
    def __init__(
        self,
        router: Router,
        connection: Connection,
        *,
        writer: FrameWriter,
        pending: PendingClientRequests,
        gate: AuthGate | None,
        loop: asyncio.AbstractEventLoop,
        on_handler_done: Callable[[], None],
    ) -> None:
        self._requests = router.requests
        self._notifications = router.notifications
        self._connection = connection
        self._writer = writer
        self._pending = pending
        self._gate = gate
        self._loop = loop
        self._on_handler_done = on_handler_done
        self.lifecycle = Lifecycle()
        self.exit_requested = False
        self._running: dict[RequestId, asyncio.Task[None]] = {}
        self._other_tasks: set[asyncio.Task[None]] = set()
        self._warned_notifications: set[str] = set()

    @property
    def handlers(self) -> int:
        """Handler tasks running now."""
        return len(self._running) + len(self._other_tasks)

    def cancel_running(self, request_id: RequestId) -> bool:
        """Cancel the running request with this id; False when none is running."""
        task = self._running.get(request_id)
        if task is None:
            return False
        task.cancel()
        return True

    def stop(self) -> list[asyncio.Task[None]]:
        """Cancel every running handler; returns them (to wait for their unwinding)."""
        handlers = [*self._running.values(), *self._other_tasks]
        for task in handlers:
            task.cancel()
        return handlers

    def handle(self, item: QueuedItem) -> None:
        """A message, a body that is not one, or a framing problem, in its turn."""
        if type(item) is not IncomingMessage:
            if type(item) is bytes:
                self._reject(item)
            else:
                assert isinstance(item, FrameError)
                self._frame_error(item)
            return
        method = item.method
        if type(method) is not str:
            self.on_answer(item)
            return
        request_id = item.id
        if request_id is UNSET:
            self._on_notification(method, item.params)
        else:
            assert not isinstance(request_id, msgspec.UnsetType)
            self._on_request(request_id, method, item.params)

    def on_answer(self, message: IncomingMessage) -> None:
        """The client's answer to one of the daemon's own requests. Like every message, it
        cannot end the connection by failing: the request it answers fails instead."""
        error = None if isinstance(message.error, msgspec.UnsetType) else message.error
        try:
            resolved = self._pending.resolve(message.id, message.result, error)
        except Exception:
            log.exception("connection %s: failed to take an answer", self._connection.id)
            resolved = self._pending.reject(message.id, "the answer could not be read")
        if not resolved:
            log.info(
                "connection %s: answer for unknown request id %r", self._connection.id, message.id
            )

    # -- requests --------------------------------------------------------------------------------

    def _on_request(self, request_id: RequestId | None, method: str, raw: msgspec.Raw) -> None:
        if self.lifecycle.state is not State.READY or method in _LIFECYCLE_REQUESTS:
            self._on_lifecycle_request(request_id, method, raw)
            return
        spec = self._requests.get(method)
        if spec is None:
            self.send_error(request_id, _method_not_found(method))
            return
        if request_id in self._running:
            self._refuse_duplicate(request_id)
            return
        try:
            params = spec.decode_params(raw)
        except InvalidParamsError as err:
            self.send_error(request_id, err)
            return
        self._dispatch(spec, RequestContext(self._connection, request_id, method, raw), params, ())

    def _on_lifecycle_request(
        self, request_id: RequestId | None, method: str, raw: msgspec.Raw
    ) -> None:
        """A request outside the READY state, or initialize/shutdown: the gated slow path."""
        lifecycle = self.lifecycle
        refusal = lifecycle.refuse_request(method)
        if refusal is not None:
            self.send_error(request_id, refusal)
            return
        spec = self._requests.get(method) or _lifecycle_defaults.requests.get(method)
        if spec is None:
            self.send_error(request_id, _method_not_found(method))
            return
        if request_id in self._running:
            self._refuse_duplicate(request_id)
            return
        # The token is checked first, so a stranger learns nothing, not even about params.
        gate = self._gate
        if method == INITIALIZE and gate is not None and not gate.passed and not gate.verify(raw):
            connection = self._connection
            log.warning(
                "connection %s (%s): unauthorized initialize", connection.id, connection.peer
            )
            self.send_error(
                request_id, UnauthorizedError("Unauthorized: missing or wrong authToken")
            )
            connection.close()
            return
        try:
            params = spec.decode_params(raw)
        except InvalidParamsError as err:
            self.send_error(request_id, err)
            return
        earlier: tuple[asyncio.Task[None], ...] = ()
        if method == INITIALIZE:
            lifecycle.initialize_started()
        elif method == SHUTDOWN:
            lifecycle.shutdown_started()
            # shutdown is answered once the requests before it have: "answered" means "done".
            earlier = (*self._running.values(), *self._other_tasks)
        ctx = RequestContext(self._connection, request_id, method, raw)
        self._dispatch(spec, ctx, params, earlier)

    def _dispatch(
        self,
        spec: RequestSpec[Any],
        ctx: RequestContext,
        params: object,
        earlier: tuple[asyncio.Task[None], ...],
    ) -> None:
        if spec.is_async or earlier:
            self._run_as_task(ctx, self._run_request(ctx, spec.handler, params, earlier))
            return
        try:
            result = spec.handler(ctx, params)
        except AnswerLater as later:
            # A plain handler that must wait this time (its session is busy with a file
            # job): the answer comes from a task, cancellable like any other.
            pending = later.pending
            self._run_as_task(ctx, self._run_request(ctx, lambda _c, _p: pending, None, ()))
        except SessiondError as err:
            self._answer_error(ctx, err)
        except Exception as exc:
            self._answer_internal_error(ctx, exc)
        else:
            self._answer(ctx, result)

    def _run_as_task(self, ctx: RequestContext, work: Coroutine[Any, Any, None]) -> None:
        task = self._loop.create_task(work)
        if ctx.request_id is not None:
            self._running[ctx.request_id] = task
        else:
            self._other_tasks.add(task)
        task.add_done_callback(functools.partial(self._request_finished, ctx))

    def _refuse_duplicate(self, request_id: RequestId | None) -> None:
        duplicate = f"Invalid Request: request id {request_id!r} is already in use"
        self.send_error(request_id, InvalidRequestError(duplicate))

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
        self._on_handler_done()

    # -- answers ---------------------------------------------------------------------------------

    def _answer(self, ctx: RequestContext, result: object) -> None:
        try:
            body = _encoder.encode(ResultResponse(id=ctx.request_id, result=result))
        except Exception as exc:
            self._answer_internal_error(ctx, exc, "result could not be encoded")
            return
        if ctx.method == INITIALIZE:
            self.lifecycle.initialize_finished(True)
        self._writer.send(body)

    def _answer_error(self, ctx: RequestContext, err: SessiondError) -> None:
        if ctx.method == INITIALIZE:
            self.lifecycle.initialize_finished(False)
        self.send_error(ctx.request_id, err)

    def _answer_internal_error(
        self, ctx: RequestContext, exc: BaseException, what: str = "handler failed"
    ) -> None:
        log.error(
            "connection %s: %s (id %r): %s",
            self._connection.id,
            ctx.method,
            ctx.request_id,
            what,
            exc_info=exc,
        )
        self._answer_error(ctx, SessiondError("Internal error"))

    def send_error(self, request_id: RequestId | None, err: SessiondError) -> None:
        if self._connection.closed:
            return
        try:
            body = _encoder.encode(ErrorResponse(id=request_id, error=error_object(err)))
        except Exception:
            # The error's details are not JSON-encodable: send it without them.
            log.exception("connection %s: could not encode error details", self._connection.id)
            bare = ErrorObject(code=err.code, message=err.message, data={"kind": err.kind})
            body = _encoder.encode(ErrorResponse(id=request_id, error=bare))
        self._writer.send(body)

    def _reject(self, body: bytes) -> None:
        diagnosis = diagnose(body)
        log.warning("connection %s: %s", self._connection.id, diagnosis.problem)
        if diagnosis.bad_answer_id is not None:
            answered = self._pending.reject(diagnosis.bad_answer_id, diagnosis.problem)
            if answered or not diagnosis.replies:
                return
        if diagnosis.as_batch:
            self._writer.send(
                _encoder.encode(
                    [
                        ErrorResponse(id=request_id, error=error_object(err))
                        for request_id, err in diagnosis.replies
                    ]
                )
            )
            return
        for request_id, err in diagnosis.replies:
            self.send_error(request_id, err)

    def _frame_error(self, problem: FrameError) -> None:
        log.warning("connection %s: framing: %s", self._connection.id, problem.message)
        if problem.kind is FrameErrorKind.TOO_LARGE:
            err: SessiondError = InvalidRequestError(
                f"Invalid Request: {problem.message}", reason="tooLarge"
            )
            self.send_error(problem.request_id, err)
            return
        self.send_error(None, ParseError(f"Parse error: {problem.message}"))

    # -- notifications ---------------------------------------------------------------------------

    def _on_notification(self, method: str, raw: msgspec.Raw) -> None:
        connection = self._connection
        if method == CANCEL_REQUEST:
            self._cancel(raw)
            return
        if method == EXIT:
            self.exit_requested = True
            log.info("connection %s (%s): exit", connection.id, connection.peer)
            connection.close()
            return
        if not self.lifecycle.accepts_notification(method):
            log.debug(
                "connection %s: dropped %s in state %s", connection.id, method, self.lifecycle.state
            )
            return
        spec = self._notifications.get(method)
        if spec is None:
            warned = self._warned_notifications
            if (
                not method.startswith("$/")
                and len(warned) < MAX_WARNED_NOTIFICATIONS
                and method not in warned
            ):
                warned.add(method[:_SHOWN_NAME])
                log.info(
                    "connection %s: ignoring unknown notification %s",
                    connection.id,
                    quoted(method, _SHOWN_NAME),
                )
            return
        try:
            params = spec.decode_params(raw)
        except InvalidParamsError as err:
            log.warning("connection %s: %s: %s", connection.id, method, err.message)
            return
        ctx = NotificationContext(connection, method)
        if spec.is_async:
            task = self._loop.create_task(self._run_notification(ctx, spec.handler, params))
            self._other_tasks.add(task)
            return
        try:
            spec.handler(ctx, params)
        except Exception:
            log.exception("connection %s: handler of notification %s failed", connection.id, method)

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
            log.exception(
                "connection %s: handler of notification %s failed", ctx.connection.id, ctx.method
            )
        finally:
            self._other_tasks.discard(asyncio.current_task())
            self._loop.call_soon(self._on_handler_done)

    def _cancel(self, raw: msgspec.Raw) -> None:
        try:
            request_id = cancel_params_decoder.decode(raw).id
        except UNDECODABLE as exc:
            log.warning("connection %s: bad $/cancelRequest: %s", self._connection.id, exc)
            return
        self.cancel_running(request_id)
