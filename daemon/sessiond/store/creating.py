"""Where a new session's file goes: the path chosen and checked, its directory made."""

from __future__ import annotations

import os
from pathlib import Path

from sessiond.errors import ConflictError
from sessiond.paths import default_session_dir, session_file_name
from sessiond.settings import StorageSettings

from .fileio import path_error
from .safe_files import check_regular_or_absent, make_private_directories


def new_session_path(
    cwd: str,
    created: str,
    session_id: str,
    *,
    storage: StorageSettings,
    session_dir: str | os.PathLike[str] | None,
    path: str | os.PathLike[str] | None,
) -> Path:
    """``path``, or pi's name for the session in ``session_dir`` (default: the one for
    ``cwd``), with its directory made (0700). A link, FIFO or directory at the path is
    refused (not replaced later), and so is a non-empty file: open that instead."""
    if path is not None:
        file_path = Path(path).absolute()
    else:
        directory = (
            Path(session_dir)
            if session_dir is not None
            else default_session_dir(cwd, storage.session_dir)
        )
        file_path = directory.absolute() / session_file_name(created, session_id)
    try:
        taken = check_regular_or_absent(file_path) and file_path.stat().st_size > 0
    except (OSError, ValueError) as exc:
        raise path_error("create", file_path, exc) from None
    if taken:
        raise ConflictError(
            f"{file_path} already exists; open it instead of creating a session there",
            path=str(file_path),
        )
    try:
        make_private_directories(file_path.parent)
    except (OSError, ValueError) as exc:
        raise path_error("create the session directory", file_path.parent, exc) from None
    return file_path
