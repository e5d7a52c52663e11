"""Worker threads: where file work of any size runs, away from the event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

T = TypeVar("T")
P = ParamSpec("P")
# Work that must run alone on a session's file: ``SessionActor.exclusive``.
Exclusive = Callable[[Callable[[], Awaitable[T]]], Awaitable[T]]


async def in_worker(work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``work(*args)`` in a worker thread; file work of any size runs here."""
    return await asyncio.get_running_loop().run_in_executor(None, lambda: work(*args, **kwargs))
