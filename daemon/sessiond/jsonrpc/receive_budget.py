"""Unfinished frames of all connections together, bounded.

One message may be up to ``--max-message-bytes``; without a shared bound, many clients (or
one client on many connections) each holding most of a large message could add up to more
memory than the machine has. A connection whose unfinished frame would take the total past
the budget gets that message refused as too large (and skipped, so the stream stays in
step); everyone else is unaffected.
"""

from __future__ import annotations

from sessiond.jsonrpc.connection_limits import KIB

# Smaller unfinished frames are not counted: nearly all are, and counting them would cost
# every read a dictionary update for nothing (a few hundred KiB per connection is bounded
# by the connection cap anyway).
COUNTED_FROM_BYTES = 256 * KIB


class ReceiveBudget:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._held: dict[object, int] = {}
        self._total = 0

    @property
    def total(self) -> int:
        """Bytes of unfinished frames counted now."""
        return self._total

    def hold(self, key: object, size: int) -> bool:
        """The connection ``key`` now holds ``size`` bytes of an unfinished frame.

        False when that growth does not fit: nothing is recorded, and the caller drops the
        frame and reports what it holds then.
        """
        previous = self._held.get(key, 0)
        if size < COUNTED_FROM_BYTES:
            if previous:
                del self._held[key]
                self._total -= previous
            return True
        if size > previous and self._total - previous + size > self.limit:
            return False
        self._held[key] = size
        self._total += size - previous
        return True

    def release(self, key: object) -> None:
        """The connection is gone."""
        self._total -= self._held.pop(key, 0)
