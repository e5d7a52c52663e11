"""Where sessiond keeps things, and pi's naming of session directories and files."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

APP_NAME = "sessiond"


def config_dir() -> Path:
    import platformdirs

    return platformdirs.user_config_path(APP_NAME, appauthor=False)


def data_dir() -> Path:
    import platformdirs

    return platformdirs.user_data_path(APP_NAME, appauthor=False)


def cache_dir() -> Path:
    import platformdirs

    return platformdirs.user_cache_path(APP_NAME, appauthor=False)


def runtime_dir() -> Path:
    import platformdirs

    return platformdirs.user_runtime_path(APP_NAME, appauthor=False)


def sessions_root() -> Path:
    """The default root of per-project session directories."""
    return data_dir() / "sessions"


def encode_cwd(cwd: str) -> str:
    """pi's directory name for a working directory: ``--<cwd>--``.

    One leading ``/`` or ``\\`` is dropped, then every ``/``, ``\\`` and ``:``
    becomes ``-`` (``/home/u/p`` gives ``--home-u-p--``).
    """
    trimmed = cwd[1:] if cwd[:1] in ("/", "\\") else cwd
    for ch in "/\\:":
        trimmed = trimmed.replace(ch, "-")
    return f"--{trimmed}--"


def session_dir_for(cwd: str, root: Path | None = None) -> Path:
    return (root if root is not None else sessions_root()) / encode_cwd(cwd)


def session_file_name(created: str, session_id: str) -> str:
    """``<ISO timestamp with ':' and '.' as '-'>_<sessionId>.jsonl``."""
    return f"{created.replace(':', '-').replace('.', '-')}_{session_id}.jsonl"


def iso_now(now: datetime | None = None) -> str:
    """The current time as JavaScript's ``Date.toISOString()`` prints it."""

    moment = now if now is not None else datetime.now(UTC)
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def is_within(path: Path, root: Path) -> bool:
    """True when ``path`` (resolved) lies inside ``root`` (resolved)."""
    try:
        Path(os.path.realpath(path)).relative_to(os.path.realpath(root))
    except ValueError:
        return False
    return True
