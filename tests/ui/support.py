"""What both real-editor tests share: where things are, a private home, the sample session."""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "sample-session.jsonl"
TOOLS = REPO / "tests" / "ui" / ".tools"
# Screenshots of every step, kept after the run for a look when something fails.
OUT = REPO / "tests" / "ui" / "out"

# The sample session's last compaction keeps most of what follows it, so the offline
# summarizer has nothing to summarize under the default keepRecentTokens (20,000).
COMPACTION_SETTINGS = {"compaction": {"keepRecentTokens": 1500}}


def venv() -> Path:
    value = Path(os.environ.get("SESSIOND_VENV", ".venv"))
    return value if value.is_absolute() else REPO / value


def update_images() -> bool:
    """SESSIOND_UI_UPDATE_IMAGES=1 writes the screenshots the READMEs show."""
    return os.environ.get("SESSIOND_UI_UPDATE_IMAGES") == "1"


def private_env(root: Path) -> dict[str, str]:
    """The environment of an editor (and so of the daemon it starts) with its own home."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("XDG_", "SESSIOND_", "VSCODE_")) and key not in ("HOME", "TMUX")
    }
    dirs = {
        "HOME": root / "home",
        "XDG_CONFIG_HOME": root / "config",
        "XDG_DATA_HOME": root / "data",
        "XDG_STATE_HOME": root / "state",
        "XDG_CACHE_HOME": root / "cache",
        "XDG_RUNTIME_DIR": root / "run",
    }
    for key, path in dirs.items():
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        env[key] = str(path)
    # A summarizer that tried the network would meet a closed port, not the internet.
    for key in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        env[key] = "http://127.0.0.1:9"
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return env


def copy_sample(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / "sample-session.jsonl"
    shutil.copyfile(SAMPLE, target)
    return target


T = TypeVar("T")


def wait_for(
    what: str, probe: Callable[[], T | None], timeout: float = 60.0, interval: float = 0.2
) -> T:
    """Polls `probe` until it returns something truthy; the machine may be busy, so the
    deadline is generous and only a deadline passed is a failure."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


USAGE = re.compile(r"(\d+(?:\.\d)?)% · (\d+(?:\.\d)?k?)/(\d+(?:\.\d)?[kM]?)")


def replace_block(path: Path, name: str, text: str) -> None:
    """Puts `text` between the README's `<!-- name -->` and `<!-- /name -->` lines."""
    content = path.read_text()
    start, end = f"<!-- {name} -->\n", f"<!-- /{name} -->"
    before, found, rest = content.partition(start)
    assert found, f"{path} has no {start!r}"
    _, found, after = rest.partition(end)
    assert found, f"{path} has no {end!r}"
    path.write_text(f"{before}{start}{text}{end}{after}")
