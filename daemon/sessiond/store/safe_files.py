"""Opening a session's files without trusting what sits at their paths.

Session files, and the directories they are in, arrive from cloned repositories and
shared or synced folders, so anything at a session's path or beside it may have been
planted: a symbolic link to one of the user's files, a FIFO that blocks whoever opens
it, a device. Every file the store reads, writes or creates goes through
``open_regular``, which never follows a symbolic link in the last component
(``O_NOFOLLOW``), never waits in ``open`` (``O_NONBLOCK``: a FIFO without a peer would
otherwise block the daemon's event loop for good), and keeps the descriptor only if it
is a regular file. Anything else is an ``InvalidSessionFileError`` naming the file, and
the thing at the path is left as it was.

Only the last component is checked. Directories on the way are the user's arrangement
(a session directory that is a symlink into a synced folder is normal); ``storage.allowedRoots``
is what confines where sessions may be.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Final

from sessiond.errors import InvalidSessionFileError

# Whatever the umask: session files hold conversations, and the directories sessiond
# makes for them should not let another local user plant files beside them.
FILE_MODE: Final = 0o600
DIRECTORY_MODE: Final = 0o700

_NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK: Final = getattr(os, "O_NONBLOCK", 0)
_NOCTTY: Final = getattr(os, "O_NOCTTY", 0)
_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)
_SAFE_FLAGS: Final = _NOFOLLOW | _NONBLOCK | _NOCTTY | _CLOEXEC


def open_regular(
    path: Path, flags: int, *, what: str = "session file", sidecar: bool = False
) -> int:
    """A descriptor on the regular file at ``path``, opened with ``flags`` (plus
    ``O_CREAT``'s mode 0600 when creating).

    ``sidecar``: the file is one sessiond keeps beside a session (the lock, the pruned
    outputs) and writes into; see ``check_sidecar``. Other ``OSError``s (not found,
    permission) reach the caller.
    """
    try:
        fd = os.open(path, flags | _SAFE_FLAGS, FILE_MODE)
    except OSError as exc:
        refusal = _refusal_for(path, exc, what)
        if refusal is None:
            raise
        raise refusal from None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise _not_a_file(path, what, status.st_mode)
        if sidecar and os.name == "posix":
            check_sidecar(fd, status, path, what)
        if _NONBLOCK:
            # Non-blocking I/O means nothing for a regular file, but leave the
            # descriptor as an ordinary one for whoever reads or writes it.
            import fcntl

            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_sidecar(fd: int, status: os.stat_result, path: Path, what: str) -> None:
    """A file sessiond writes into must be its own: one name only (a hard link would make
    it write into another file), and nobody else able to write it (another user may have
    made it, to read what sessiond puts there). One that others may only read is made
    private (0600), as sessiond would have created it."""
    refuse_other_names(status, path, what)
    refuse_writable_by_others(status, path, what)
    if status.st_mode & 0o077:
        os.fchmod(fd, FILE_MODE)


def open_own_sidecar(
    path: Path, what: str, first_line: bytes, is_ours: Callable[[bytes], bool]
) -> int:
    """A descriptor appending to the sidecar at ``path``, which sessiond made: a new one
    (``O_EXCL``) starts with ``first_line``; one already there is used only if it is the
    user's own, has one name and its first line is one sessiond writes (``is_ours``),
    and it is only read until that is known. Anything else there (the user's own
    ``notes.pruned``) is ``notOurs``, never written, chmodded or removed."""
    flags = os.O_WRONLY | os.O_APPEND
    try:
        fd = open_regular(path, flags | os.O_CREAT | os.O_EXCL, what=what)
    except FileExistsError:
        pass
    else:
        try:
            os.write(fd, first_line)
        except BaseException:
            os.close(fd)
            raise
        return fd
    reader = open_regular(path, os.O_RDONLY, what=what)
    try:
        status = own_sidecar_status(reader, path, what, is_ours)
        fd = open_regular(path, flags, what=what, sidecar=True)
    finally:
        os.close(reader)
    if (os.fstat(fd).st_dev, os.fstat(fd).st_ino) != (status.st_dev, status.st_ino):
        os.close(fd)
        raise not_ours(path, what)  # swapped between the look and the open
    return fd


def own_sidecar_status(
    fd: int, path: Path, what: str, is_ours: Callable[[bytes], bool]
) -> os.stat_result:
    """The status of the sidecar open on ``fd`` if sessiond made it: the user's own, one
    name, a first line sessiond writes (``is_ours``); ``notOurs`` (or ``hardLink``)
    otherwise. Only reads."""
    status = os.fstat(fd)
    if status.st_uid != os.geteuid() or not is_ours(_first_line(fd)):
        raise not_ours(path, what)
    refuse_other_names(status, path, what)
    return status


def _first_line(fd: int, most: int = 64 * 1024) -> bytes:
    data = os.pread(fd, most, 0)
    return data.split(b"\n", 1)[0]


def not_ours(path: Path, what: str) -> InvalidSessionFileError:
    return InvalidSessionFileError(
        f"{path} exists and is not a {what} sessiond made, so sessiond will not use it: "
        "sessiond never takes over a file it did not create (give the session file "
        "another name, or move that file away)",
        reason="notOurs",
        path=str(path),
    )


def refuse_other_names(status: os.stat_result, path: Path, what: str) -> None:
    """``hardLink`` for a file with more than one name: what sessiond wrote into it would
    land in another file too."""
    if status.st_nlink > 1:
        raise InvalidSessionFileError(
            f"{path}: the {what} has other names (hard links), so sessiond will not "
            "write into it; remove it",
            reason="hardLink",
            path=str(path),
        )


def refuse_writable_by_others(status: os.stat_result, path: Path, what: str) -> None:
    """``notPrivate`` for a file others can write: another user may have made it, or may
    change what sessiond puts there or reads back from it."""
    if status.st_mode & 0o022:
        raise InvalidSessionFileError(
            f"{path}: others can write the {what}, so sessiond will not use it; remove it",
            reason="notPrivate",
            path=str(path),
        )


def check_regular_or_absent(path: Path, what: str = "session file") -> bool:
    """Whether a regular file is at ``path`` (False if nothing is), without following a
    symbolic link or opening anything; an error for anything else at the path."""
    try:
        status = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(status.st_mode):
        raise _symlink(path, what)
    if not stat.S_ISREG(status.st_mode):
        raise _not_a_file(path, what, status.st_mode)
    return True


def make_private_directories(directory: Path) -> None:
    """Create ``directory`` and its missing parents with mode 0700 (the umask can only
    narrow it). Existing directories are left as they are: they are the user's."""
    missing: list[Path] = []
    current = directory
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for path in reversed(missing):
        try:
            path.mkdir(mode=DIRECTORY_MODE)
        except FileExistsError:
            if not path.is_dir():
                raise


def _refusal_for(path: Path, exc: OSError, what: str) -> InvalidSessionFileError | None:
    if exc.errno in (errno.ELOOP, errno.EMLINK):
        # O_NOFOLLOW's answer for a link in the last component (EMLINK on the BSDs);
        # ELOOP can also mean a loop among the directories, which is not ours to name.
        try:
            if stat.S_ISLNK(os.stat(path, follow_symlinks=False).st_mode):
                return _symlink(path, what)
        except OSError:
            return None
        return None
    if exc.errno == errno.ENXIO:
        # Opening a FIFO for writing with nobody reading it, or a socket file.
        return _not_a_file(path, what, None)
    return None


def _symlink(path: Path, what: str) -> InvalidSessionFileError:
    return InvalidSessionFileError(
        f"{path} is a symbolic link; sessiond does not follow a link where it expects "
        f"a {what} (name the file itself, or remove the link)",
        reason="symlink",
        path=str(path),
    )


def _not_a_file(path: Path, what: str, mode: int | None) -> InvalidSessionFileError:
    found = _KINDS.get(stat.S_IFMT(mode)) if mode is not None else "a FIFO or a socket"
    message = (
        f"{path} is {found}, not a {what}"
        if found is not None
        else f"{path} is not a regular file, so it cannot be a {what}"
    )
    return InvalidSessionFileError(message, reason="notAFile", path=str(path))


_KINDS: Final = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}
