"""The TCP token and the private runtime directory that holds sockets and token files.

The token is never logged or printed: only the path of the file holding it is.
"""

from __future__ import annotations

import os
import stat
import warnings
from collections.abc import MutableMapping
from pathlib import Path

from sessiond.jsonrpc.startup import SecurityError

TOKEN_ENV = "SESSIOND_TOKEN"


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


def token_from_environment(environ: MutableMapping[str, str]) -> str | None:
    """Take the token from ``SESSIOND_TOKEN`` and remove it, so child processes do not see it."""
    token = environ.pop(TOKEN_ENV, None)
    if token is None:
        return None
    token = token.strip()
    if not token:
        raise SecurityError(f"{TOKEN_ENV} is set but empty")
    return token


def read_token_file(path: Path) -> str:
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise SecurityError(f"cannot read token file {path}: {exc.strerror}") from exc
    if not token:
        raise SecurityError(f"token file {path} is empty")
    return token


def generate_token() -> str:
    import secrets  # only TCP needs it; it costs ~10 ms of start-up

    return secrets.token_urlsafe(32)


def write_token_file(path: Path, token: str) -> None:
    """Write the token to a new file only the user can read (0600), never through a symlink."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
