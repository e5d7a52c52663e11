"""Settings for every test: in-process code never touches the user's own directories."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# The real-editor tests need code-server, chromium and tmux, installed by ./dev.sh test-ui,
# which sets this; the ordinary run leaves them out rather than reporting them skipped.
collect_ignore = [] if os.environ.get("SESSIOND_UI_TESTS") == "1" else ["ui"]


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The persistent session index (and anything else cached) goes to a directory of
    the test run, not to the cache directory of whoever runs the tests."""
    cache = tmp_path_factory.mktemp("xdg-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(cache))
        yield cache
