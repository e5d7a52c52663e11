"""The private runtime directory (0700) that holds the socket and token files."""

from __future__ import annotations

import os
import stat
import warnings
from pathlib import Path

from sessiond.jsonrpc.startup_errors import SecurityError


def default_runtime_dir() -> Path:
    """``platformdirs.user_runtime_path("sessiond")``, created private (0700) if missing."""
    from sessiond.paths import runtime_dir

    with warnings.catch_warnings():
        # Without XDG_RUNTIME_DIR platformdirs warns and falls back to /tmp/runtime-<uid>;
        # ensure_private_dir checks that fallback is really ours.
        warnings.simplefilter("ignore")
        path = runtime_dir()
    ensure_private_dir(path, fix_mode=True)
    return path


def ensure_private_dir(path: Path, *, fix_mode: bool) -> None:
    """Create ``path`` with mode 0700, or check that the existing one is ours and private.

    ``fix_mode`` tightens an existing directory of ours that others can open; without it
    such a directory is refused.
    """
    old_umask = os.umask(0o077)
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    finally:
        os.umask(old_umask)
    info = os.stat(path, follow_symlinks=False)
    if not stat.S_ISDIR(info.st_mode):
        raise SecurityError(f"{path} is not a directory")
    if info.st_uid != os.getuid():
        raise SecurityError(f"{path} belongs to another user (uid {info.st_uid})")
    if info.st_mode & 0o077:
        if not fix_mode:
            raise SecurityError(f"{path} is accessible by other users (mode {info.st_mode:o})")
        os.chmod(path, 0o700)
