"""The pre-initialize authentication step of a connection that must show a token (TCP).

Until ``initialize`` has carried the token, the connection is held to a few small
messages and a deadline (``connection_limits``); anything beyond closes it, so a stranger
costs a few KiB and a timer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import msgspec

from sessiond.jsonrpc.connection_limits import (
    AUTH_DEADLINE_SECONDS,
    PRE_AUTH_MAX_FRAME_BYTES,
    PRE_AUTH_MAX_MESSAGES,
)
from sessiond.jsonrpc.envelopes import UNDECODABLE
from sessiond.jsonrpc.header_framing import FrameError, FrameParser
from sessiond.jsonrpc.incoming_queue import QueuedItem

if TYPE_CHECKING:
    from sessiond.jsonrpc.connection import Connection

log = logging.getLogger("sessiond.jsonrpc")


class _AuthField(msgspec.Struct, rename="camel"):
    auth_token: str | None = None


_auth_decoder = msgspec.json.Decoder(_AuthField)


class AuthGate:
    """Holds one connection to the pre-token limits until ``verify`` lifts them."""

    def __init__(
        self,
        token: str,
        connection: Connection,
        parser: FrameParser,
        *,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self._expected = token.encode()
        self._connection = connection
        self._parser = parser
        self._frame_limit = parser.max_frame_bytes
        parser.max_frame_bytes = min(parser.max_frame_bytes, PRE_AUTH_MAX_FRAME_BYTES)
        self._messages = 0
        self.passed = False
        self._timer: asyncio.TimerHandle | None = loop.call_later(
            AUTH_DEADLINE_SECONDS, self._expired
        )

    def screen(self, item: QueuedItem, dispatch: Callable[[QueuedItem], None]) -> None:
        """Dispatch ``item`` if the connection may still send it; else close the connection."""
        if not self.passed:
            self._messages += 1
            if self._messages > PRE_AUTH_MAX_MESSAGES:
                self._turn_away("too many messages before the token")
                return
            if isinstance(item, FrameError):
                dispatch(item)  # answered, then closed
                self._turn_away("a broken or oversized frame before the token")
                return
        dispatch(item)

    def verify(self, raw: msgspec.Raw) -> bool:
        """Whether ``initialize``'s params carry the token; if so, the limits are lifted."""
        try:
            presented = _auth_decoder.decode(raw).auth_token if len(raw) else None
        except UNDECODABLE:
            presented = None
        if presented is None:
            return False
        import hmac  # only TCP connections get here

        if not hmac.compare_digest(self._expected, presented.encode()):
            return False
        self.passed = True
        self._parser.max_frame_bytes = self._frame_limit
        self.cancel()
        return True

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _turn_away(self, reason: str) -> None:
        connection = self._connection
        log.warning("connection %s (%s): %s; closing", connection.id, connection.peer, reason)
        connection.close()

    def _expired(self) -> None:
        connection = self._connection
        if not self.passed and not connection.closed:
            log.warning(
                "connection %s (%s): no token in time, closing", connection.id, connection.peer
            )
            connection.close()
