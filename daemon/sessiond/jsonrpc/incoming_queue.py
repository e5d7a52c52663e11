"""Received messages waiting their turn on one connection, bounded in bytes.

A connection handles messages in the order they came, but not always at once: while the
client is not reading its answers, or while ``MAX_CONCURRENT_REQUESTS`` handlers run,
messages wait here. The connection reads from the client only while this holds less than
``INCOMING_QUEUE_LIMIT_BYTES``, so what waits is bounded too (by that plus one read).
"""

from __future__ import annotations

from collections import deque

from sessiond.jsonrpc.connection_limits import INCOMING_QUEUE_LIMIT_BYTES, MESSAGE_OVERHEAD_BYTES
from sessiond.jsonrpc.envelopes import IncomingMessage
from sessiond.jsonrpc.header_framing import FrameError

# A message, a body that is not one (answered with what ``diagnose`` finds), or a framing
# problem (answered too): each keeps its place in the order.
QueuedItem = IncomingMessage | bytes | FrameError


class IncomingQueue(deque[tuple[QueuedItem, int]]):
    """(item, bytes it stands for) in order of arrival; true while anything waits."""

    def __init__(self) -> None:
        super().__init__()
        self.size = 0

    @property
    def full(self) -> bool:
        return self.size >= INCOMING_QUEUE_LIMIT_BYTES

    def push(self, item: QueuedItem, body_bytes: int) -> None:
        cost = body_bytes + MESSAGE_OVERHEAD_BYTES
        self.append((item, cost))
        self.size += cost

    def take(self) -> QueuedItem:
        item, cost = self.popleft()
        self.size -= cost
        return item

    def discard_all(self) -> None:
        self.clear()
        self.size = 0
