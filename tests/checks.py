"""Checks the end-to-end and proof tests make on what a daemon left behind."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sessiond.store.session import SessionStore
from tests.isolation import TRACEBACK


def reopen(path: str | Path) -> SessionStore:
    """The file as a fresh reader sees it; it must open without any repair to report."""
    store = SessionStore.open(path, readonly=True)
    assert store.recovery.clean, store.recovery
    return store


def assert_no_traceback(messages: Iterable[Any]) -> None:
    for message in messages:
        text = message if isinstance(message, str) else json.dumps(message)
        assert not TRACEBACK.search(text), f"traceback text in a message: {text[:500]}"
