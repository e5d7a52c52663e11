"""JSON-RPC 2.0 over one pair of asyncio streams: requests out, the daemon's requests in.

Our requests get increasing integer ids and wait on a future that the reader task
resolves. When the caller's task is cancelled, the daemon is sent ``$/cancelRequest``
and the caller still sees ``asyncio.CancelledError`` at once: the daemon's late answer
(-32800) is dropped. The daemon's own requests (hooks, ``llm/complete``) each run as a
task so that its ``$/cancelRequest`` can cancel them; whatever a handler raises goes
back as a JSON-RPC error, never as silence.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import msgspec
from msgspec import UNSET, UnsetType

from .errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    REQUEST_CANCELLED,
    ConnectionClosedError,
    ProtocolError,
    SessiondClientError,
    error_from_response,
)
from .framing import DEFAULT_MAX_FRAME_BYTES, encode_frame, read_frame
from .protocol import CancelParams

log = logging.getLogger("sessiond_client")

T = TypeVar("T")
RequestId = int | str
# A handler of a daemon->client request: raw params in, an encodable result out.
RequestHandler = Callable[[msgspec.Raw], Awaitable[Any]]
NotificationSink = Callable[[str, msgspec.Raw], None]
# ("send" | "recv", frame body): a wire trace for debugging and tests.
Tracer = Callable[[str, bytes], None]
CANCEL_REQUEST = "$/cancelRequest"


class _ErrorObject(msgspec.Struct, omit_defaults=True):
    code: int
    message: str
    data: Any = None


class _Incoming(msgspec.Struct):
    jsonrpc: str
    id: int | str | UnsetType | None = UNSET
    method: str | UnsetType = UNSET
    params: msgspec.Raw = msgspec.Raw()
    result: msgspec.Raw = msgspec.Raw()
    error: _ErrorObject | UnsetType = UNSET


class _Request(msgspec.Struct, kw_only=True):
    jsonrpc: str = "2.0"
    id: RequestId
    method: str
    params: Any = UNSET


class _Notification(msgspec.Struct, kw_only=True):
    jsonrpc: str = "2.0"
    method: str
    params: Any = UNSET


class _Result(msgspec.Struct, kw_only=True):
    jsonrpc: str = "2.0"
    id: RequestId
    result: Any


class _ErrorAnswer(msgspec.Struct, kw_only=True):
    jsonrpc: str = "2.0"
    id: RequestId
    error: _ErrorObject


_encoder = msgspec.json.Encoder()
_incoming_decoder = msgspec.json.Decoder(_Incoming)
_cancel_decoder = msgspec.json.Decoder(CancelParams)
_decoders: dict[Any, msgspec.json.Decoder[Any]] = {}


def _decoder(result_type: Any) -> msgspec.json.Decoder[Any]:
    decoder = _decoders.get(result_type)
    if decoder is None:
        decoder = _decoders[result_type] = msgspec.json.Decoder(result_type)
    return decoder


class RpcConnection:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        on_notification: NotificationSink,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        trace: Tracer | None = None,
        describe_end: Callable[[], Awaitable[str]] | None = None,
        on_ended: Callable[[], None] | None = None,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._on_notification = on_notification
        self._max_frame_bytes = max_frame_bytes
        self._trace = trace
        self._describe_end = describe_end
        self._on_ended = on_ended
        self.handlers: dict[str, RequestHandler] = {}
        self._next_id = 0
        self._pending: dict[int, asyncio.Future[msgspec.Raw]] = {}
        self._serving: dict[RequestId, asyncio.Task[None]] = {}
        self._peer_cancelled: set[RequestId] = set()
        self._failure: SessiondClientError | None = None
        self._closing = False
        self._reader_task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._reader_task = asyncio.get_running_loop().create_task(self._read_loop())

    @property
    def is_open(self) -> bool:
        return self._failure is None and not self._closing

    @property
    def failure(self) -> SessiondClientError | None:
        """Why the connection ended, once it has."""
        return self._failure

    # -- sending ------------------------------------------------------------------------------

    def _send(self, message: msgspec.Struct) -> None:
        body = _encoder.encode(message)
        if self._trace is not None:
            self._trace("send", body)
        self._writer.write(encode_frame(body))

    def notify(self, method: str, params: Any = UNSET) -> None:
        """Send a notification; silently dropped once the connection has ended."""
        if self._failure is not None or self._writer.is_closing():
            return
        self._send(_Notification(method=method, params=params))

    async def request(self, method: str, params: Any, result_type: type[T]) -> T:
        """Send a request and wait for its result, decoded as ``result_type``."""
        if self._failure is not None:
            raise self._failure
        if self._closing or self._writer.is_closing():
            raise ConnectionClosedError(f"{method}: the connection is closed")
        self._next_id += 1
        request_id = self._next_id
        future: asyncio.Future[msgspec.Raw] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            self._send(_Request(id=request_id, method=method, params=params))
            await self._writer.drain()
            raw = await future
        except asyncio.CancelledError:
            if self._pending.pop(request_id, None) is not None and self.is_open:
                self.notify(CANCEL_REQUEST, CancelParams(id=request_id))
            raise
        except ConnectionError as exc:
            raise self._failure or ConnectionClosedError(f"{method}: {exc}") from exc
        finally:
            self._pending.pop(request_id, None)
        try:
            return _decoder(result_type).decode(raw)  # type: ignore[no-any-return]
        except msgspec.ValidationError as exc:
            raise ProtocolError(f"{method}: unexpected result from the daemon: {exc}") from None

    # -- receiving ----------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        failure: SessiondClientError | None = None
        try:
            while True:
                body = await read_frame(self._reader, self._max_frame_bytes)
                if body is None:
                    break
                if self._trace is not None:
                    self._trace("recv", body)
                self._receive(body)
        except SessiondClientError as exc:
            failure = exc
        except (ConnectionError, OSError) as exc:
            failure = ConnectionClosedError(f"reading from the daemon failed: {exc}")
        except Exception as exc:
            # A bug of ours must not leave callers waiting forever on a dead reader.
            log.exception("the connection's reader failed")
            failure = SessiondClientError(f"the client's reader failed: {exc!r}")
        finally:
            if not self._closing and self._describe_end is not None and failure is None:
                # The peer ended the stream: say why if the transport can (exit code, stderr).
                failure = ConnectionClosedError(await self._describe_end())
            self._ended(failure or ConnectionClosedError("the connection is closed"))

    def _receive(self, body: bytes) -> None:
        try:
            message = _incoming_decoder.decode(body)
        except msgspec.DecodeError as exc:
            shown = body[:200].decode("utf-8", "replace")
            raise ProtocolError(f"the daemon sent a malformed message ({exc}): {shown}") from None
        method = message.method
        if isinstance(method, str):
            if isinstance(message.id, UnsetType):
                self._notification(method, message.params)
            elif message.id is None:
                raise ProtocolError(f"the daemon sent request {method} with a null id")
            else:
                self._serve(message.id, method, message.params)
            return
        future = self._pending.pop(message.id, None) if isinstance(message.id, int) else None
        if future is None or future.done():
            # The answer to a request whose caller was cancelled: nobody waits for it.
            log.debug("dropping the answer to request %r", message.id)
            return
        error = message.error
        if not isinstance(error, UnsetType):
            future.set_exception(error_from_response(error.code, error.message, error.data))
        elif len(message.result):
            future.set_result(message.result)
        else:
            future.set_exception(ProtocolError(f"answer {message.id!r} has no result or error"))

    def _notification(self, method: str, params: msgspec.Raw) -> None:
        if method == CANCEL_REQUEST:
            try:
                request_id = _cancel_decoder.decode(params).id
            except msgspec.DecodeError:
                log.warning("ignoring a malformed $/cancelRequest")
                return
            task = self._serving.get(request_id)
            if task is not None:
                self._peer_cancelled.add(request_id)
                task.cancel()
            return
        self._on_notification(method, params)

    def _serve(self, request_id: RequestId, method: str, params: msgspec.Raw) -> None:
        task = asyncio.get_running_loop().create_task(self._answer(request_id, method, params))
        self._serving[request_id] = task

    async def _answer(self, request_id: RequestId, method: str, params: msgspec.Raw) -> None:
        handler = self.handlers.get(method)
        try:
            if handler is None:
                raise _Refusal(METHOD_NOT_FOUND, f"this client does not handle {method}")
            result = await handler(params)
        except asyncio.CancelledError:
            if self._closing:
                raise
            # Cancelled by the daemon's $/cancelRequest, or the handler gave up.
            self._send_error(request_id, REQUEST_CANCELLED, "Request cancelled", None)
        except _Refusal as refusal:
            self._send_error(request_id, refusal.code, refusal.message, None)
        except SessiondClientError as exc:
            self._send_error(request_id, exc.code or INTERNAL_ERROR, exc.message, exc.data)
        except msgspec.ValidationError as exc:
            self._send_error(
                request_id, INVALID_PARAMS, f"Invalid params for {method}: {exc}", None
            )
        except Exception as exc:
            log.exception("the handler of %s failed", method)
            self._send_error(request_id, INTERNAL_ERROR, f"{type(exc).__name__}: {exc}", None)
        else:
            if self.is_open:
                try:
                    self._send(_Result(id=request_id, result=result))
                except (TypeError, msgspec.EncodeError) as exc:
                    log.error("the result of %s cannot be encoded: %s", method, exc)
                    message = f"the client's result could not be encoded: {exc}"
                    self._send_error(request_id, INTERNAL_ERROR, message, None)
        finally:
            self._serving.pop(request_id, None)
            self._peer_cancelled.discard(request_id)

    def _send_error(self, request_id: RequestId, code: int, message: str, data: Any) -> None:
        if self.is_open and not self._writer.is_closing():
            self._send(_ErrorAnswer(id=request_id, error=_ErrorObject(code, message, data)))

    # -- ending -------------------------------------------------------------------------------

    def abandon_pending(self) -> None:
        """Fail every waiting request and ask the daemon to cancel each (we are closing).

        Without this a ``shutdown`` would wait for them: the daemon answers it only once
        the requests received before it are done.
        """
        pending, self._pending = self._pending, {}
        for request_id, future in pending.items():
            self.notify(CANCEL_REQUEST, CancelParams(id=request_id))
            if not future.done():
                future.set_exception(ConnectionClosedError("the client is closing"))

    def _ended(self, failure: SessiondClientError) -> None:
        first = self._failure is None
        if self._failure is None:
            self._failure = failure
        failure = self._failure
        if not self._writer.is_closing():
            # Nothing more can be said on a stream we stopped understanding.
            self._writer.close()
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(failure)
        for task in self._serving.values():
            task.cancel()
        if first and self._on_ended is not None:
            self._on_ended()

    async def aclose(self) -> None:
        """Stop: close our writing side, stop reading, fail what still waits."""
        self._closing = True
        if not self._writer.is_closing():
            self._writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self._writer.wait_closed()
        if self._reader_task is not None and not self._reader_task.done():
            self._reader_task.cancel()
        serving = list(self._serving.values())
        for task in serving:
            task.cancel()
        tasks = [*serving, *([self._reader_task] if self._reader_task else [])]
        if tasks:
            await asyncio.wait(tasks, timeout=2.0)
        self._ended(ConnectionClosedError("the client closed the connection"))

    async def wait_ended(self, timeout: float) -> bool:
        """Wait until the daemon ends the stream; False on timeout."""
        if self._reader_task is None:
            return True
        done, _ = await asyncio.wait({self._reader_task}, timeout=timeout)
        return bool(done)


class _Refusal(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
