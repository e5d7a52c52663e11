"""What a connection that must show a token (TCP) may do before it has shown it.

A real client's first message is ``initialize`` carrying the token. Until the token has
been verified the connection may send frames of at most ``PRE_AUTH_MAX_FRAME_BYTES``, at
most ``PRE_AUTH_MAX_MESSAGES`` messages, for at most ``AUTH_DEADLINE_SECONDS``; a larger
frame, a broken one, one message too many or the deadline closes it. So a stranger costs
a few KiB and a timer, and its junk a few log lines.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import msgspec

from sessiond.jsonrpc.decoding import UNDECODABLE
from sessiond.jsonrpc.framing import FrameParser
from sessiond.jsonrpc.limits import (
    AUTH_DEADLINE_SECONDS,
    PRE_AUTH_MAX_FRAME_BYTES,
    PRE_AUTH_MAX_MESSAGES,
)


class _AuthField(msgspec.Struct, rename="camel"):
    auth_token: str | None = None


_auth_decoder = msgspec.json.Decoder(_AuthField)


class AuthGate:
    def __init__(
        self,
        token: str,
        parser: FrameParser,
        *,
        loop: asyncio.AbstractEventLoop,
        on_expired: Callable[[], None],
    ) -> None:
        self._expected = token.encode()
        self._parser = parser
        self._frame_limit = parser.max_frame_bytes
        parser.max_frame_bytes = min(parser.max_frame_bytes, PRE_AUTH_MAX_FRAME_BYTES)
        self._messages = 0
        self.passed = False
        self._timer: asyncio.TimerHandle | None = loop.call_later(AUTH_DEADLINE_SECONDS, on_expired)

    def admit(self) -> bool:
        """Count one more message before the token; False once there were too many."""
        self._messages += 1
        return self._messages <= PRE_AUTH_MAX_MESSAGES

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
