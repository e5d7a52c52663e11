"""How a test daemon is cut off from the machine it runs on.

Every daemon the tests start gets a HOME and XDG directories of its own under a
temporary folder, none of the caller's sessiond or provider variables, and proxies
pointing at a closed local port so that nothing can reach past this machine.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

XDG_NAMES = ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR")
# Everything in the environment that could change what a daemon does or where it goes.
_DROPPED = re.compile(r"^(XDG_|SESSIOND_|OPENAI_|ANTHROPIC_|PROOF_)|proxy$", re.IGNORECASE)
# A Python traceback, or a source location from one, anywhere in a message.
TRACEBACK = re.compile(r"Traceback \(most recent call last\)|File \"[^\"]+\", line \d+")
NO_NETWORK = {
    "HTTP_PROXY": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "ALL_PROXY": "http://127.0.0.1:9",
    "NO_PROXY": "",
}
# Settings that keep a daemon cheap to start: no tokenizer to load in the background.
FAST: dict[str, Any] = {"compaction": {"tokenEstimator": "chars"}}


def isolated_env(
    root: Path, settings: dict[str, Any] | None = None, **extra: str
) -> dict[str, str]:
    """An environment whose HOME and XDG directories are fresh folders under ``root``.

    ``settings`` becomes the daemon's settings file (mode 0600).
    """
    env = {name: value for name, value in os.environ.items() if not _DROPPED.search(name)}
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    env["HOME"] = str(home)
    for name in XDG_NAMES:
        directory = root / name.lower()
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        env[name] = str(directory)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(NO_NETWORK)
    if settings is not None:
        write_settings(env, settings)
    env.update(extra)
    return env


def write_settings(env: dict[str, str], settings: dict[str, Any], mode: int = 0o600) -> Path:
    config = Path(env["XDG_CONFIG_HOME"]) / "sessiond"
    config.mkdir(parents=True, exist_ok=True)
    target = config / "settings.json"
    target.write_text(json.dumps(settings))
    target.chmod(mode)
    return target


def merged(*layers: dict[str, Any]) -> dict[str, Any]:
    """Settings groups merged key by key, later layers winning."""
    out: dict[str, Any] = {}
    for layer in layers:
        for group, values in layer.items():
            out.setdefault(group, {}).update(values)
    return out
