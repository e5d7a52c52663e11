"""A session's gate: one holder, waiters served in the order they came, cancellation safe."""

from __future__ import annotations

import asyncio

from sessiond.service.gate import Gate


async def test_waiters_are_served_in_order_and_the_gate_opens_after_them() -> None:
    gate = Gate()
    order: list[int] = []
    release = asyncio.Event()

    async def hold(n: int, until: asyncio.Event | None = None) -> None:
        async with gate.held():
            order.append(n)
            if until is not None:
                await until.wait()

    first = asyncio.create_task(hold(0, release))
    await asyncio.sleep(0)
    assert not gate.free
    others = [asyncio.create_task(hold(n)) for n in range(1, 5)]
    await asyncio.sleep(0)
    release.set()
    await asyncio.gather(first, *others)
    assert order == [0, 1, 2, 3, 4]
    assert gate.free


async def test_a_cancelled_waiter_neither_blocks_nor_skips_the_others() -> None:
    gate = Gate()
    release = asyncio.Event()
    order: list[str] = []

    async def hold(name: str, until: asyncio.Event | None = None) -> None:
        async with gate.held():
            order.append(name)
            if until is not None:
                await until.wait()

    first = asyncio.create_task(hold("first", release))
    await asyncio.sleep(0)
    gone = asyncio.create_task(hold("gone"))
    last = asyncio.create_task(hold("last"))
    await asyncio.sleep(0)
    gone.cancel()
    await asyncio.sleep(0)
    release.set()
    await asyncio.gather(first, last)
    assert gone.cancelled()
    assert order == ["first", "last"]
    assert gate.free


async def test_a_waiter_cancelled_as_its_turn_comes_passes_the_gate_on() -> None:
    gate = Gate()
    order: list[str] = []

    async def hold(name: str) -> None:
        async with gate.held():
            order.append(name)

    async with gate.held():
        unlucky = asyncio.create_task(hold("unlucky"))
        after = asyncio.create_task(hold("after"))
        await asyncio.sleep(0)
    # The gate is handed to ``unlucky``; it is cancelled before it runs.
    unlucky.cancel()
    await asyncio.gather(unlucky, after, return_exceptions=True)
    assert order == ["after"]
    assert gate.free
