"""One writer per session file: an OS lock held for as long as the session is open.

The lock lives on a sidecar file ``<session>.lock`` rather than on the session
file itself, because an atomic rewrite replaces the session file's inode and
would silently drop a lock held on the old one. The sidecar carries who holds
it (pid, host, program, since), so a refused second writer can name the owner.

Whatever is at ``<session>.lock`` may have been planted there: it is opened without
following a link and used only if it is a regular file with one name that nobody
else can write (``safe_files``), and releasing removes the path only while it still names the very
file that was locked.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

from sessiond._version import __version__
from sessiond.errors import SessionLockedError, StorageError
from sessiond.paths import iso_now

from .safe_files import open_regular

if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _try_lock(fd: int) -> bool:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


def lock_path_for(session_path: Path) -> Path:
    return session_path.with_name(session_path.name + ".lock")


class SessionLock:
    """An exclusive lock on a session file, held until ``release``."""

    def __init__(self, session_path: Path) -> None:
        self.path = lock_path_for(session_path)
        self._fd: int | None = None

    def acquire(self) -> None:
        for _ in range(10):
            try:
                fd = open_regular(self.path, os.O_RDWR | os.O_CREAT, what="lock file", sidecar=True)
            except OSError as exc:
                raise StorageError(
                    f"cannot create lock file {self.path}: {exc.strerror}", path=str(self.path)
                ) from None
            if not _try_lock(fd):
                owner = _read_owner(fd)
                os.close(fd)
                raise SessionLockedError(_locked_message(self.path, owner), owner=owner)
            # Another process may have unlinked the lock file between our open and
            # our lock (it released the session); then we locked an orphaned inode.
            if _still_at_path(fd, self.path):
                self._fd = fd
                self._write_owner(fd)
                return
            os.close(fd)
        raise StorageError(f"could not lock {self.path}: it keeps being replaced")

    def _write_owner(self, fd: int) -> None:
        owner = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "program": f"sessiond {__version__}",
            "since": iso_now(),
        }
        data = json.dumps(owner).encode() + b"\n"
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        # Unlink while still holding the lock, so that nobody can lock the path's
        # current inode and believe they own it while we do. Only the file we locked is
        # removed: if something else now sits at the path (a link to our file included),
        # it is not ours to delete.
        try:
            if _still_at_path(fd, self.path):
                os.unlink(self.path)
        except OSError:
            pass
        try:
            _unlock(fd)
        finally:
            os.close(fd)

    @property
    def held(self) -> bool:
        return self._fd is not None


def _still_at_path(fd: int, path: Path) -> bool:
    """Whether ``path`` itself (not a link there) is the file open on ``fd``."""
    try:
        at_path = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (at_path.st_dev, at_path.st_ino)


def _read_owner(fd: int) -> dict[str, Any]:
    try:
        data = os.pread(fd, 4096, 0)
        owner = json.loads(data.decode("utf-8", "replace") or "{}")
    except (OSError, ValueError):
        return {}
    return owner if isinstance(owner, dict) else {}


def _locked_message(path: Path, owner: dict[str, Any]) -> str:
    session = path.name.removesuffix(".lock")
    if not owner:
        return f"Session {session} is open in another process"
    who = owner.get("program", "another program")
    where = f"pid {owner.get('pid', '?')} on {owner.get('host', '?')}"
    since = f", since {owner['since']}" if owner.get("since") else ""
    return f"Session {session} is open in {who} ({where}{since})"
