"""One writer per session file: an OS lock held for as long as the session is open.

The lock lives on a sidecar file ``<session>.lock`` rather than on the session
file itself, because an atomic rewrite replaces the session file's inode and
would silently drop a lock held on the old one. The sidecar carries who holds
it (pid, host, program, since), so a refused second writer can name the owner.

sessiond never takes over a file it did not create. A new lock is made whole beside
the session (a temporary file, written and locked) and linked into place only if
nothing is at ``<session>.lock`` yet, so a lock file is never seen half-made. Whatever
is already there is used only if it is a lock sessiond left (its owner record says so,
it is the user's own, with one name, not writable by others): a user's ``Cargo.lock``
beside a session named ``Cargo`` is refused, never chmodded, written or deleted.
Links, FIFOs and devices are refused as for every file beside a session
(``safe_files``), and releasing removes the path only while it still names the very
file that was locked.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any, Final

from sessiond._version import __version__
from sessiond.errors import SessionLockedError, StorageError
from sessiond.paths import iso_now

from .fileio import NO_HARD_LINKS, temporary_path_for
from .safe_files import check_sidecar, not_ours, open_regular, refuse_other_names

# The start of the ``program`` an owner record names: what marks a lock as sessiond's.
_PROGRAM = "sessiond"

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
                fd = self._create() or self._take_stale()
            except OSError as exc:
                raise StorageError(
                    f"cannot create lock file {self.path}: {exc.strerror}", path=str(self.path)
                ) from None
            if fd is not None:
                self._fd = fd
                return
        raise StorageError(f"could not lock {self.path}: it keeps being replaced")

    def _create(self) -> int | None:
        """A new lock, locked and holding its owner record before it appears at the path;
        None when something is already there (nothing is replaced)."""
        temporary = temporary_path_for(self.path)
        fd = open_regular(temporary, os.O_RDWR | os.O_CREAT | os.O_EXCL, what="lock file")
        try:
            _try_lock(fd)
            _write_owner(fd)
            try:
                os.link(temporary, self.path, follow_symlinks=False)
            except FileExistsError:
                os.close(fd)
                return None
            except OSError as exc:
                if exc.errno not in NO_HARD_LINKS:
                    raise
                os.close(fd)
                return self._create_in_place()
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        return fd

    def _create_in_place(self) -> int | None:
        """Where links cannot be made: the lock created at its path (``O_EXCL``: never an
        existing file), then locked and written."""
        try:
            fd = open_regular(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, what="lock file")
        except FileExistsError:
            return None
        _try_lock(fd)
        _write_owner(fd)
        return fd

    def _take_stale(self) -> int | None:
        """The lock already at the path: refused if another process holds it or sessiond
        did not make it; taken over if it is a lock a stopped sessiond left. None when it
        vanished meanwhile (try again). Until it is known to be sessiond's, the file is
        only read (opened for reading, so that not even a watcher sees it written)."""
        try:
            fd = open_regular(self.path, os.O_RDONLY, what="lock file")
        except FileNotFoundError:
            return None
        except PermissionError:
            raise not_ours(self.path, "lock") from None
        try:
            status = os.fstat(fd)
            if status.st_uid != os.geteuid():
                raise not_ours(self.path, "lock")
            refuse_other_names(status, self.path, "lock file")
            if not _try_lock(fd):
                owner = _owner_record(_read(fd))
                raise SessionLockedError(_locked_message(self.path, owner), owner=owner or {})
            if _owner_record(_read(fd)) is None:
                raise not_ours(self.path, "lock")
            check_sidecar(fd, status, self.path, "lock file")
            # Another process may have unlinked the lock between our open and our lock
            # (it released the session); then we locked an orphaned inode.
            if not _still_at_path(fd, self.path):
                os.close(fd)
                return None
            writer = open_regular(self.path, os.O_WRONLY, what="lock file")
            try:
                if _same_file(writer, fd):
                    _write_owner(writer)
            finally:
                os.close(writer)
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise
        return fd

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


# The length of an owner record, padded with spaces (JSON allows them after the value).
_RECORD_BYTES: Final = 512


def _write_owner(fd: int) -> None:
    owner = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "program": f"{_PROGRAM} {__version__}",
        "since": iso_now(),
    }
    # Written over the previous owner's record in one pwrite, never truncated first:
    # records are padded to one length, so a process killed while taking over a stale
    # lock leaves one whole record, never an empty file that is no longer sessiond's.
    data = json.dumps(owner).encode().ljust(_RECORD_BYTES - 1) + b"\n"
    os.pwrite(fd, data, 0)
    os.ftruncate(fd, len(data))


def _read(fd: int) -> bytes:
    try:
        return os.pread(fd, 4096, 0)
    except OSError:
        return b""


def _owner_record(data: bytes) -> dict[str, Any] | None:
    """The owner record of a lock sessiond wrote (pid, host, program, since), with nothing
    else of the file; None for any other content. Only these fields, and only short
    strings and numbers, are ever quoted: the file may be anyone's."""
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if not isinstance(value, dict):
        return None
    program = value.get("program")
    if not isinstance(program, str) or program.split(" ", 1)[0] != _PROGRAM:
        return None
    return {
        key: field
        for key in ("pid", "host", "program", "since")
        if _quotable(field := value.get(key))
    }


def _quotable(field: object) -> bool:
    if isinstance(field, str):
        return len(field) <= 100 and field.isprintable()
    return isinstance(field, int) and not isinstance(field, bool)


def _same_file(one: int, other: int) -> bool:
    first, second = os.fstat(one), os.fstat(other)
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


def _still_at_path(fd: int, path: Path) -> bool:
    """Whether ``path`` itself (not a link there) is the file open on ``fd``."""
    try:
        at_path = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (at_path.st_dev, at_path.st_ino)


def _locked_message(path: Path, owner: dict[str, Any] | None) -> str:
    session = path.name.removesuffix(".lock")
    if not owner:
        return f"Session {session} is open in another process"
    who = owner.get("program", "another program")
    where = f"pid {owner.get('pid', '?')} on {owner.get('host', '?')}"
    since = f", since {owner['since']}" if owner.get("since") else ""
    return f"Session {session} is open in {who} ({where}{since})"
