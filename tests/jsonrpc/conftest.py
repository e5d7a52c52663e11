"""Fixtures of the JSON-RPC layer tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.jsonrpc.harness import Link, make_link


@pytest.fixture
async def link() -> AsyncIterator[Link]:
    """A connection that has not been initialized yet."""
    wired = make_link()
    yield wired
    wired.connection.close()
    await wired.connection.wait_closed()


@pytest.fixture
async def ready(link: Link) -> Link:
    """A connection after initialize/initialized."""
    await link.client.initialize()
    return link
