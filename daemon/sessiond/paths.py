"""Where sessiond keeps things, and pi's naming of session directories and files."""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from pathlib import Path

from sessiond.errors import InvalidParamsError, NotAllowedError

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
    directory = (root if root is not None else sessions_root()) / encode_cwd(cwd)
    # The cwd becomes a directory name: what the OS cannot take is the caller's mistake.
    checked_path(str(directory), "cwd")
    return directory


def default_session_dir(cwd: str, configured_root: str | None) -> Path:
    """Where the sessions of ``cwd`` go unless told otherwise: under ``storage.sessionDir``
    when it is set, else under pi's own root."""
    root = user_path(configured_root, "storage.sessionDir") if configured_root else None
    return session_dir_for(cwd, root)


_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def check_session_id(session_id: str) -> str:
    """A session id becomes part of a file name: letters, digits, ``.``, ``_``, ``-``."""
    if not _SAFE_ID.fullmatch(session_id) or ".." in session_id:
        raise InvalidParamsError(
            f"invalid session id {session_id!r}: use letters, digits, '.', '_' and '-' "
            "(up to 128, not starting with a dot)",
            sessionId=session_id,
        )
    return session_id


# What the OS takes as a path, in bytes (Linux's PATH_MAX and NAME_MAX).
MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255


def checked_path(text: str, what: str) -> str:
    """``text`` if the OS can take it as a path; else ``invalidParams`` naming ``what``.

    Every path a client names (and every directory name made from one, such as a cwd's)
    goes through here before anything else looks at it: a NUL byte, a lone surrogate that
    has no bytes on this system, or a path or name too long for the OS would otherwise
    fail in whatever call first meets it (``realpath``, ``stat``, ``open``), each with an
    exception of its own."""
    shown = text if len(text) <= 200 else text[:200] + "..."
    if "\x00" in text:
        raise InvalidParamsError(f"{what}: the path contains a NUL byte", path=shown)
    try:
        encoded = os.fsencode(text)
    except UnicodeError:
        raise InvalidParamsError(
            f"{what}: the path has characters that cannot be a file name here "
            "(a lone UTF-16 surrogate)",
            path=shown.encode("utf-8", "backslashreplace").decode("utf-8"),
        ) from None
    if len(encoded) > MAX_PATH_BYTES or any(
        len(name) > MAX_NAME_BYTES for name in encoded.split(b"/")
    ):
        raise InvalidParamsError(f"{what}: the path is too long for the OS", path=shown)
    return text


def user_path(text: str, what: str) -> Path:
    """``text`` (checked by ``checked_path``) with a leading ``~`` or ``~user`` expanded; an
    unknown user is the caller's mistake, not the daemon's (pathlib raises RuntimeError)."""
    checked_path(text, what)
    try:
        path = Path(text).expanduser()
    except RuntimeError:
        raise InvalidParamsError(
            f"{what}: {text!r} names a home directory that does not exist on this machine"
        ) from None
    checked_path(str(path), what)
    return path


def check_allowed(path: Path, roots: list[str] | None) -> Path:
    """``path`` unchanged if it lies under one of ``roots`` (or no roots are set)."""
    if roots is None:
        return path
    for root in roots:
        if is_within(path, user_path(root, "storage.allowedRoots")):
            return path
    raise NotAllowedError(
        f"{path} is outside the directories sessions may live in (storage.allowedRoots)",
        path=str(path),
    )


def allowed_client_path(text: str, what: str, roots: list[str] | None) -> Path:
    """A path a client named (``what``: the field), absolute, checked and under ``roots``."""
    if not text:
        raise InvalidParamsError(f"{what} must not be empty")
    return check_allowed(user_path(text, what).absolute(), roots)


def session_file_name(created: str, session_id: str) -> str:
    """``<ISO timestamp with ':' and '.' as '-'>_<sessionId>.jsonl``."""
    return f"{created.replace(':', '-').replace('.', '-')}_{session_id}.jsonl"


def iso_now(now: datetime | None = None) -> str:
    """The current time as JavaScript's ``Date.toISOString()`` prints it."""

    moment = now if now is not None else datetime.now(UTC)
    # isoformat is C code and pads the year to four digits, as toISOString does
    naive = moment.astimezone(UTC).replace(tzinfo=None)
    return naive.isoformat(timespec="milliseconds") + "Z"


def is_within(path: Path, root: Path) -> bool:
    """True when ``path`` (resolved) lies inside ``root`` (resolved)."""
    try:
        Path(os.path.realpath(path)).relative_to(os.path.realpath(root))
    except ValueError:
        return False
    return True
