"""The daemon's registry of open sessions: one actor per file and per session id."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessiond.errors import ConflictError
from sessiond.service.sessions import SessionRegistry
from sessiond.settings import Settings
from sessiond.store.session import SessionStore


def _registry() -> SessionRegistry:
    return SessionRegistry(settings=Settings, publish=lambda clients, method, params: None)


async def test_a_new_session_with_an_open_id_is_refused_before_its_file_is_made(tmp_path: Path):
    """Two ``session/new`` with one id in one millisecond name the same file: the second
    must hear about the id, not about the first one's lock on that file."""
    registry = _registry()
    path = tmp_path / "same-name.jsonl"
    registry.create(lambda: SessionStore.create("/p", path=path, session_id="dup"), 1)
    made: list[str] = []

    def second() -> SessionStore:
        made.append("second")
        return SessionStore.create("/p", path=path, session_id="dup")

    with pytest.raises(ConflictError, match="same id dup") as conflict:
        registry.create(second, 2, "dup")
    assert conflict.value.details == {"path": str(path), "sessionId": "dup"}
    assert made == [] and len(registry) == 1
    registry.close_all()
