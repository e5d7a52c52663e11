"""Building sessions and runners for service tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sessiond.settings import Settings, merge_settings
from sessiond.store.session import SessionStore
from sessiond.tiktoken_offline import estimator

from ..store.helpers import assistant, tool_call, tool_result, user


def settings_with(**groups: dict[str, Any]) -> Settings:
    merged, _ = merge_settings(Settings(), groups, strict=True, source="test")
    return merged


def long_session(directory: Path, turns: int = 8, size: int = 3000) -> SessionStore:
    """A session of ``turns`` user/assistant/tool exchanges touching files."""
    store = SessionStore.create("/work/project", session_dir=directory)
    for turn in range(turns):
        store.append(user(f"request {turn}: " + "please change things " * (size // 24)))
        store.append(
            assistant(
                f"working on {turn}",
                input=1000 * (turn + 1),
                tools=[
                    tool_call("read", path=f"src/file{turn}.py"),
                    tool_call("edit", path=f"src/out{turn}.py"),
                ],
                stop="toolUse",
            )
        )
        store.append(tool_result("x" * size, tool="read", call_id="call-read"))
        store.append(
            assistant(f"done with {turn} " + "y" * (size // 4), input=1000 * (turn + 1) + 500)
        )
    return store


CHARS = estimator("chars")
