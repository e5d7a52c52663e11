"""The TCP token: from the environment, a file, or generated and written to a private file.

The token is never logged or printed: only the path of the file holding it is.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from pathlib import Path

from sessiond.jsonrpc.startup_errors import SecurityError

TOKEN_ENV = "SESSIOND_TOKEN"


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
