"""A session's gate: one file job at a time, and requests in the order they came.

While a worker thread reads what another program did to a session's file (or a fork
copies it), the session's requests wait at the gate, in order, and everything else the
daemon does goes on. ``free`` is the fast path: nothing holds the gate and nobody waits,
so a request may be served at once without breaking the order.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class Gate:
    def __init__(self) -> None:
        self._held = False
        self._waiting: deque[asyncio.Future[None]] = deque()

    @property
    def free(self) -> bool:
        return not self._held and not self._waiting

    @asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        """Hold the gate (after everyone who came before) for the ``async with`` block."""
        if self._held or self._waiting:
            turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiting.append(turn)
            try:
                await turn
            except BaseException:
                if not turn.cancelled() and turn.done():
                    self._pass_on()  # our turn came just as we were cancelled
                elif turn in self._waiting:
                    self._waiting.remove(turn)
                raise
        else:
            self._held = True
        try:
            yield
        finally:
            self._pass_on()

    def _pass_on(self) -> None:
        """Hand the gate to the first waiter still waiting, or open it."""
        while self._waiting:
            turn = self._waiting.popleft()
            if not turn.done():
                turn.set_result(None)  # it holds the gate now
                return
        self._held = False
