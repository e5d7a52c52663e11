"""Received messages waiting their turn on one connection.

A connection handles messages in the order they came, but not always at once: while the
client is not reading its answers, or while ``MAX_CONCURRENT_REQUESTS`` handlers run,
messages wait here. The connection reads from the client only while this holds less than
``INBOX_LIMIT_BYTES``, so what waits is bounded too (by that plus one read).
"""

from __future__ import annotations

from collections import deque

from sessiond.jsonrpc.framing import FrameError
from sessiond.jsonrpc.limits import INBOX_LIMIT_BYTES, MESSAGE_OVERHEAD_BYTES
from sessiond.jsonrpc.messages import IncomingMessage

# A message, a body that is not one (answered with what ``diagnose`` finds), or a framing
# problem (answered too): each keeps its place in the order.
Item = IncomingMessage | bytes | FrameError


class Inbox(deque[tuple[Item, int]]):
    """A deque of (item, bytes it stands for); true while anything waits."""

    def __init__(self) -> None:
        super().__init__()
        self.size = 0

    @property
    def full(self) -> bool:
        return self.size >= INBOX_LIMIT_BYTES

    def push(self, item: Item, body_bytes: int) -> None:
        cost = body_bytes + MESSAGE_OVERHEAD_BYTES
        self.append((item, cost))
        self.size += cost

    def take(self) -> Item:
        item, cost = self.popleft()
        self.size -= cost
        return item

    def discard_all(self) -> None:
        self.clear()
        self.size = 0
