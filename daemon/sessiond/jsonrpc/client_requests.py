"""Server-to-client requests: the ids in flight, and how each one can fail.

Every failure is its own exception type so that a caller (a hook, ``llm/complete``) can
tell "the client said no" from "the client is gone" from "the client is too slow". They
are not ``SessiondError``s: they describe the peer, not an answer to give it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from sessiond.core.absent import decode_reading_null_as_absent
from sessiond.core.inert import quoted
from sessiond.jsonrpc.envelopes import IncomingError


class ClientRequestFailed(Exception):
    """A request the server sent to a client produced no usable result."""

    def __init__(self, method: str, message: str) -> None:
        super().__init__(message)
        self.method = method


class ClientRequestTimeout(ClientRequestFailed):
    def __init__(self, method: str, timeout: float) -> None:
        super().__init__(method, f"client did not answer {method} within {timeout:g} s")
        self.timeout = timeout


class ClientDisconnected(ClientRequestFailed):
    def __init__(self, method: str) -> None:
        super().__init__(method, f"client disconnected before answering {method}")


class ClientReturnedError(ClientRequestFailed):
    """The client answered with a JSON-RPC error (``-32601`` if it does not know the method).
    Its message is the client's words: quoted wherever it is repeated."""

    def __init__(self, method: str, code: int, message: str, data: Any) -> None:
        super().__init__(method, f"client answered {method} with error {code}: {quoted(message)}")
        self.code = code
        self.error_message = message
        self.data = data


class ClientResultInvalid(ClientRequestFailed):
    """The client's answer is not of the expected type, or not a well-formed response."""


class _Pending:
    __slots__ = ("decoder", "future", "method", "result_type")

    def __init__(
        self,
        method: str,
        future: asyncio.Future[Any],
        decoder: msgspec.json.Decoder[Any],
        result_type: Any,
    ) -> None:
        self.method = method
        self.future = future
        self.decoder = decoder
        self.result_type = result_type


_any_decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder()


class PendingClientRequests:
    """The server's own requests to the client waiting for an answer, by id."""

    def __init__(self) -> None:
        self._next_id = 0
        self._waiting: dict[int, _Pending] = {}

    def open(
        self, method: str, result_type: Any, loop: asyncio.AbstractEventLoop
    ) -> tuple[int, asyncio.Future[Any]]:
        self._next_id += 1
        decoder = _any_decoder if result_type is Any else msgspec.json.Decoder(result_type)
        future: asyncio.Future[Any] = loop.create_future()
        self._waiting[self._next_id] = _Pending(method, future, decoder, result_type)
        return self._next_id, future

    def discard(self, request_id: int) -> bool:
        """Forget a request (timed out or abandoned); True if it was still waiting."""
        return self._waiting.pop(request_id, None) is not None

    def resolve(self, request_id: object, result: msgspec.Raw, error: IncomingError | None) -> bool:
        """Deliver an answer; False when no request with that id is waiting. Whatever the
        answer holds, its waiter learns the outcome now: an answer that cannot be read
        (invalid UTF-8 in a string, nesting too deep, a wrong type) fails it."""
        if not isinstance(request_id, int):
            return False
        pending = self._waiting.pop(request_id, None)
        if pending is None or pending.future.done():
            return False
        future = pending.future
        if error is not None:
            try:
                data = msgspec.json.decode(error.data) if len(error.data) else None
            except (msgspec.DecodeError, RecursionError):  # keep the code and message
                data = None
            future.set_exception(
                ClientReturnedError(pending.method, error.code, error.message, data)
            )
            return True
        try:
            raw = result if len(result) else b"null"
            future.set_result(
                decode_reading_null_as_absent(pending.decoder, raw, pending.result_type)
            )
        except Exception as exc:  # decoding untrusted bytes: whatever fails, the waiter hears
            # msgspec's message names the client's fields: quoted, as the client's words.
            future.set_exception(
                ClientResultInvalid(
                    pending.method,
                    f"client's result for {pending.method} is not valid: {quoted(str(exc))}",
                )
            )
        return True

    def reject(self, request_id: object, problem: str) -> bool:
        """Fail a request whose answer was malformed."""
        pending = self._waiting.pop(request_id, None) if isinstance(request_id, int) else None
        if pending is None or pending.future.done():
            return False
        pending.future.set_exception(ClientResultInvalid(pending.method, problem))
        return True

    def fail_all(self) -> None:
        """The connection is gone: every waiting request fails with ``ClientDisconnected``."""
        waiting, self._waiting = self._waiting, {}
        for pending in waiting.values():
            if not pending.future.done():
                pending.future.set_exception(ClientDisconnected(pending.method))
