from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sessiond.store.session import SessionStore


@pytest.fixture
def session_dir(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


@pytest.fixture
def store(session_dir: Path) -> Iterator[SessionStore]:
    opened = SessionStore.create("/home/u/project", session_dir=session_dir)
    yield opened
    opened.close()
