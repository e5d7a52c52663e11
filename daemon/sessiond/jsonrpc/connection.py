"""One client connection: bytes in, flow control, the server's own messages out, closing.

Transport-neutral: a transport feeds it bytes (``feed``) and gives it a ``ByteSink`` to
write to. What arrives is queued in order (``IncomingQueue``) and handled by its
``Dispatcher``; a connection that must show a token goes through its ``AuthGate`` first.
While the client is not reading, or ``MAX_CONCURRENT_REQUESTS`` handlers run, messages
wait and the connection stops reading. Answers to the daemon's own requests and
``$/cancelRequest`` skip the queue: a handler may be waiting for them.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, overload

import msgspec
from msgspec import UNSET

from sessiond.core.inert import inert
from sessiond.jsonrpc.auth_gate import AuthGate
from sessiond.jsonrpc.client_requests import (
    ClientDisconnected,
    ClientRequestTimeout,
    PendingClientRequests,
)
from sessiond.jsonrpc.connection_limits import (
    MAX_CONCURRENT_REQUESTS,
    OUTPUT_HIGH_WATER,
    UNREAD_NOTIFICATIONS_LIMIT,
)
from sessiond.jsonrpc.dispatch import Dispatcher, cancel_params_decoder
from sessiond.jsonrpc.envelopes import (
    UNDECODABLE,
    IncomingMessage,
    OutgoingNotification,
    OutgoingRequest,
    RequestId,
    decode_envelope,
)
from sessiond.jsonrpc.frame_writer import FrameWriter
from sessiond.jsonrpc.header_framing import DEFAULT_MAX_FRAME_BYTES, FrameParser
from sessiond.jsonrpc.incoming_queue import IncomingQueue, QueuedItem
from sessiond.jsonrpc.lifecycle import State
from sessiond.jsonrpc.lsp_notifications import (
    CANCEL_REQUEST,
    LOG_MESSAGE,
    PROGRESS,
    WORK_DONE_PROGRESS_CREATE,
    CancelParams,
    LogMessageParams,
    MessageType,
    ProgressNotificationParams,
    WorkDoneProgressCreateParams,
)
from sessiond.jsonrpc.receive_budget import COUNTED_FROM_BYTES, ReceiveBudget
from sessiond.jsonrpc.router import Router

log = logging.getLogger("sessiond.jsonrpc")

T = TypeVar("T")

DEFAULT_CLIENT_REQUEST_TIMEOUT = 30.0
# When the client's input ends, running requests get this long to answer before the close.
END_OF_INPUT_GRACE_SECONDS = 2.0
# How long closing waits for cancelled handlers to unwind before the close callbacks run.
_HANDLER_UNWIND_SECONDS = 5.0


class ByteSink(Protocol):
    """The writing (and read-pausing) side of a transport; asyncio transports are ByteSinks."""

    def write(self, data: bytes) -> None: ...
    def close(self) -> None: ...
    def abort(self) -> None: ...
    def pause_reading(self) -> None: ...
    def resume_reading(self) -> None: ...


_encoder = msgspec.json.Encoder()


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
        receive_budget: ReceiveBudget | None = None,
    ) -> None:
        self.id = connection_id
        self.peer = peer
        self._sink = sink
        self._loop = loop
        self._parser = FrameParser(max_frame_bytes)
        self._receive_budget = receive_budget
        self._budgeted = False  # whether the budget counts an unfinished frame of ours
        self._queue = IncomingQueue()
        self._writer = FrameWriter(sink.write)
        self._pending = PendingClientRequests()
        self._close_callbacks: list[Callable[[Connection], object]] = []
        self._on_finished = on_finished
        self._closed = False
        self._close_task: asyncio.Task[None] | None = None
        self._reading = True
        self._pumping = False
        self._write_paused = False
        # Bytes the client did not ask for, sent since it last caught up with its reading.
        self._unread_unsolicited = 0
        self._input_ended = False
        self._eof_timer: asyncio.TimerHandle | None = None
        self._gate = (
            AuthGate(auth_token, self, self._parser, loop=loop) if auth_token is not None else None
        )
        self._dispatcher = Dispatcher(
            router,
            self,
            writer=self._writer,
            pending=self._pending,
            gate=self._gate,
            loop=loop,
            on_handler_done=self._pump,
        )

    # -- state ---------------------------------------------------------------------------------

    @property
    def state(self) -> State:
        return self._dispatcher.lifecycle.state

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def authenticated(self) -> bool:
        """Whether the client has shown the token (always, when none is required)."""
        return self._gate is None or self._gate.passed

    @property
    def busy(self) -> bool:
        """Whether handlers of this connection are still running, or messages wait their turn."""
        return bool(self._dispatcher.handlers or self._queue)

    @property
    def exit_requested(self) -> bool:
        """Whether the client sent ``exit``."""
        return self._dispatcher.exit_requested

    @property
    def exit_code(self) -> int:
        """What a stdio server should exit with once this connection ends."""
        lifecycle = self._dispatcher.lifecycle
        return lifecycle.exit_code if self.exit_requested else 0

    def on_close(self, callback: Callable[[Connection], object]) -> None:
        """Call ``callback(connection)`` once the connection has closed (it may be async).

        Handlers of the connection have been cancelled and have finished by then.
        """
        self._close_callbacks.append(callback)

    # -- sending ---------------------------------------------------------------------------------

    def notify(self, method: str, params: Any = None) -> None:
        """Send a notification; dropped once the connection is closed.

        A client that lets more than ``UNREAD_NOTIFICATIONS_LIMIT`` bytes of notifications
        pile up unread is disconnected (it could not follow its sessions any more).
        """
        if self._closed:
            return
        message = OutgoingNotification(method=method, params=UNSET if params is None else params)
        self._send_unsolicited(_encoder.encode(message))

    def progress(self, token: RequestId, value: Any) -> None:
        """Send ``$/progress`` (``value``: a ``WorkDoneBegin/Report/End`` or any JSON value)."""
        self.notify(PROGRESS, ProgressNotificationParams(token, value))

    async def create_progress(self, token: RequestId, *, timeout: float) -> None:
        """Ask the client to accept ``$/progress`` on ``token`` (LSP's
        ``window/workDoneProgress/create``), as LSP requires before progress of work the
        client did not request. Raises ``ClientRequestFailed`` when it refuses or does not
        answer within ``timeout``."""
        await self.request(
            WORK_DONE_PROGRESS_CREATE, WorkDoneProgressCreateParams(token), timeout=timeout
        )

    def log_message(self, message: str, type: MessageType = MessageType.INFO) -> None:
        """Send ``window/logMessage``, for the client to show in its log: always one line
        without control characters, so that words quoted in it cannot start a message of
        their own (``core.inert``)."""
        self.notify(LOG_MESSAGE, LogMessageParams(int(type), inert(message)))

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
            self._send_unsolicited(_encoder.encode(message))
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

    def close(self) -> None:
        """Send what is queued, close the transport, cancel handlers, run the close callbacks."""
        if self._closed:
            return
        self._writer.close()
        self._sink.close()
        self._finish()

    def abort(self) -> None:
        """Close at once, dropping whatever the client has not read."""
        if self._closed:
            return
        self._writer.abandon()
        self._sink.abort()
        self._finish()

    @property
    def close_finished(self) -> bool:
        """Closed, and the close callbacks have run."""
        return self._close_task is not None and self._close_task.done()

    async def wait_closed(self) -> None:
        """Wait until the close callbacks have run (after ``close`` or a lost connection)."""
        if self._close_task is not None:
            await asyncio.shield(self._close_task)

    def _send_unsolicited(self, body: bytes) -> None:
        if self._write_paused:
            self._unread_unsolicited += len(body)
            if self._unread_unsolicited > UNREAD_NOTIFICATIONS_LIMIT:
                log.warning(
                    "connection %s (%s): the client is not reading (over %d bytes of"
                    " notifications unread); disconnecting it",
                    self.id,
                    self.peer,
                    UNREAD_NOTIFICATIONS_LIMIT,
                )
                self.abort()
                return
        self._writer.send(body)

    # -- transport events ------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """Bytes received from the client."""
        if self._closed:
            return
        parser = self._parser
        events = parser.feed(data)
        budget = self._receive_budget
        if budget is not None and (self._budgeted or parser.buffered >= COUNTED_FROM_BYTES):
            if not budget.hold(self, parser.buffered):
                events += parser.abandon_frame(
                    f"the daemon already holds {budget.total} bytes of unfinished messages"
                    f" (at most {budget.limit}); send it again later"
                )
                budget.hold(self, parser.buffered)
            self._budgeted = parser.buffered >= COUNTED_FROM_BYTES
        if not events:
            return
        push = self._queue.push
        # Before the token, everything takes its turn (and is counted) in the queue.
        skip_allowed = self.authenticated
        for event in events:
            if type(event) is not bytes:
                push(event, 0)
                continue
            message = decode_envelope(event)
            if message is None:
                push(event, len(event))  # answered with what ``diagnose`` finds
                continue
            method = message.method
            if type(method) is str:
                if method != CANCEL_REQUEST or not skip_allowed or not self._cancelled_now(message):
                    push(message, len(event))
            elif len(message.result) or message.error is not UNSET:
                if skip_allowed:
                    self._dispatcher.on_answer(message)
                else:
                    push(message, len(event))
            else:
                push(event, len(event))  # neither a request nor an answer: ``diagnose`` it
        self._pump()

    def end_of_input(self) -> None:
        """The client will send nothing more: let running requests answer (briefly), then close.

        Messages still waiting their turn are handled first, as the client reads.
        """
        if self._closed or self._input_ended:
            return
        self._input_ended = True
        self._end_when_done()

    def connection_lost(self, exc: BaseException | None) -> None:
        if exc is not None and not self._closed:
            log.info("connection %s (%s) lost: %s", self.id, self.peer, exc)
        self._writer.abandon()
        self._finish()

    def pause_writing(self) -> None:
        self._write_paused = True
        self._steer_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._unread_unsolicited = 0
        self._pump()

    # -- flow control ----------------------------------------------------------------------------

    def _cancelled_now(self, message: IncomingMessage) -> bool:
        """``$/cancelRequest`` of a running request takes effect at once, ahead of waiting
        messages (the handlers may all be busy); True if it did. Answers to the daemon's own
        requests skip the queue too (``feed``): a handler may be waiting for them."""
        if message.id is not UNSET:
            return False  # a request named $/cancelRequest: refused in its turn
        try:
            request_id = cancel_params_decoder.decode(message.params).id
        except UNDECODABLE:
            return False  # reported in its turn
        # A request not running yet (or done) is cancelled in its turn, behind its request.
        return self._dispatcher.cancel_running(request_id)

    def _pump(self) -> None:
        """Handle waiting messages in order while the client reads and handlers have room."""
        if self._pumping or self._closed:
            return
        self._pumping = True
        queue = self._queue
        writer = self._writer
        dispatcher = self._dispatcher
        gate = self._gate
        handle: Callable[[QueuedItem], None] = dispatcher.handle
        if gate is not None and not gate.passed:
            handle = functools.partial(gate.screen, dispatch=dispatcher.handle)
        writer.hold()
        try:
            while queue and not self._closed:
                if writer.held_bytes >= OUTPUT_HIGH_WATER:
                    writer.flush()  # lets the transport tell whether the client keeps up
                if self._write_paused:
                    break
                if (
                    type(queue[0][0]) is IncomingMessage
                    and dispatcher.handlers >= MAX_CONCURRENT_REQUESTS
                ):
                    break
                try:
                    handle(queue.take())
                except Exception:
                    log.exception("connection %s: failed to process a message", self.id)
        finally:
            self._pumping = False
            writer.release()
        if not self._reading or self._write_paused or queue.full:
            self._steer_reading()
        if self._input_ended:
            self._end_when_done()

    def _steer_reading(self) -> None:
        """Read from the client only while it reads its answers and little waits here."""
        if self._closed:
            return
        wanted = not self._write_paused and not self._queue.full
        if wanted is self._reading:
            return
        self._reading = wanted
        if wanted:
            self._sink.resume_reading()
            return
        self._sink.pause_reading()
        why = "the client is not reading its answers" if self._write_paused else "messages wait"
        log.debug("connection %s: %s, reading paused", self.id, why)

    def _end_when_done(self) -> None:
        """After the end of input: close once nothing waits; running handlers get a grace."""
        if self._closed or self._queue:
            return
        if not self._dispatcher.handlers:
            self.close()
        elif self._eof_timer is None:
            self._eof_timer = self._loop.call_later(END_OF_INPUT_GRACE_SECONDS, self.close)

    # -- closing ---------------------------------------------------------------------------------

    def _finish(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._dispatcher.lifecycle.closed()
        if self._gate is not None:
            self._gate.cancel()
        if self._eof_timer is not None:
            self._eof_timer.cancel()
            self._eof_timer = None
        if self._receive_budget is not None:
            self._receive_budget.release(self)
        self._queue.discard_all()
        handlers = self._dispatcher.stop()
        self._pending.fail_all()
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
