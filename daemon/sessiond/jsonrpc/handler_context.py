"""What a handler receives besides its params: the request context (connection, id, progress)."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

import msgspec

from sessiond.jsonrpc.envelopes import RequestId

if TYPE_CHECKING:
    from sessiond.jsonrpc.connection import Connection


class _WorkDoneTokenField(msgspec.Struct, rename="camel"):
    work_done_token: int | str | None = None


_token_decoder = msgspec.json.Decoder(_WorkDoneTokenField)


class AnswerLater(Exception):
    """Raised by a plain (``def``) handler that cannot answer at once this time: its answer
    is what ``pending`` returns (or raises), awaited in a task of its own."""

    def __init__(self, pending: Coroutine[Any, Any, Any]) -> None:
        super().__init__("answered later")
        self.pending = pending


class RequestContext:
    """One incoming request, as its handler sees it."""

    __slots__ = ("_raw_params", "_token", "_token_read", "connection", "method", "request_id")

    def __init__(
        self, connection: Connection, request_id: RequestId | None, method: str, raw: msgspec.Raw
    ) -> None:
        self.connection = connection
        self.request_id = request_id
        self.method = method
        self._raw_params = raw
        self._token: RequestId | None = None
        self._token_read = False

    @property
    def work_done_token(self) -> RequestId | None:
        """The request's ``workDoneToken`` param, if it carried one (read lazily)."""
        if not self._token_read:
            self._token_read = True
            if len(self._raw_params):
                try:
                    self._token = _token_decoder.decode(self._raw_params).work_done_token
                except (msgspec.DecodeError, RecursionError):
                    self._token = None
        return self._token

    def progress(self, value: Any) -> bool:
        """Send ``$/progress`` for this request's ``workDoneToken``; False when it had none.

        ``value`` is usually a ``WorkDoneBegin``, ``WorkDoneReport`` or ``WorkDoneEnd``.
        """
        token = self.work_done_token
        if token is None:
            return False
        self.connection.progress(token, value)
        return True


class NotificationContext:
    """One incoming notification, as its handler sees it."""

    __slots__ = ("connection", "method")

    def __init__(self, connection: Connection, method: str) -> None:
        self.connection = connection
        self.method = method
