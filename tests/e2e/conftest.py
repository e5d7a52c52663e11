"""Fixtures of the end-to-end tests: loopback summarizer servers and private directories."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fake_provider import FakeProvider, provider

__all__ = ["module_provider", "private_root", "provider"]


def private_root(tag: str) -> Path:
    """A temporary directory for one module's daemon, removed when the run ends.

    pytest-lsp's fixtures take their server's environment when the module is imported,
    before any pytest fixture exists, hence a plain temporary directory.
    """
    root = Path(tempfile.mkdtemp(prefix=f"sessiond-e2e-{tag}-"))
    atexit.register(shutil.rmtree, root, True)
    return root


@pytest.fixture(scope="module")
def module_provider() -> Iterator[FakeProvider]:
    """One loopback OpenAI-format server for every test of a module."""
    fake = FakeProvider()
    try:
        yield fake
    finally:
        fake.released.set()
        fake.stop()
