"""Low-level writes that keep sessiond's durability promises.

Appends are one ``write()`` of whole lines on an ``O_APPEND`` descriptor;
rewrites go to a temporary file that is fsynced, renamed over the target, and
followed by an fsync of the directory. Nothing here ever writes in place.
Every file is opened through ``safe_files``: no symbolic links, nothing but regular
files, new files 0600.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from collections.abc import Callable, Iterable
from pathlib import Path

from sessiond.errors import ConflictError, InvalidParamsError, SessiondError, StorageError

from .lines import all_nul
from .safe_files import FILE_MODE, check_regular_or_absent, open_regular

# What ``link()`` fails with where a filesystem has no hard links.
NO_HARD_LINKS = frozenset({errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK})


def _storage_error(action: str, path: Path, exc: OSError) -> StorageError:
    return StorageError(f"cannot {action} {path}: {exc.strerror or exc}", path=str(path))


def path_error(action: str, path: Path, exc: OSError | ValueError) -> SessiondError:
    """The error for a path the OS would not take. A NUL byte (Python's ValueError) or a
    name too long is the caller's mistake, not the disk's."""
    if isinstance(exc, ValueError) or exc.errno == errno.ENAMETOOLONG:
        shown = str(path) if len(str(path)) <= 200 else str(path)[:200] + "..."
        why = "contains a NUL byte" if isinstance(exc, ValueError) else "is too long for the OS"
        return InvalidParamsError(f"cannot {action} {shown}: the path {why}", path=shown)
    return _storage_error(action, path, exc)


def fsync_directory(directory: Path) -> None:
    """Make a rename or a new file in ``directory`` durable (no-op where unsupported)."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """One ``write()`` in the normal case; loops only if the OS writes partially."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def temporary_path_for(target: Path) -> Path:
    return target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")


def atomic_write(
    target: Path, chunks: Iterable[bytes], *, mode: int = FILE_MODE, durable: bool = True
) -> None:
    """Replace (or create) ``target`` with ``chunks``: temp file, fsync, rename, fsync dir.

    The new file gets exactly ``mode`` (0600 for a new session; a rewrite passes the
    mode the file had, so it is kept, never widened). The rename replaces whatever is at
    ``target`` without following it: a link planted there is replaced, not written through.

    ``durable=False`` leaves out both fsyncs, for a cache whose reader checks what it
    reads: readers still see the old file or the new one whole, but after a crash of the
    machine the new one may be empty or partly written.
    """
    _through_temporary(target, chunks, mode, os.replace, durable=durable)


def create_whole(target: Path, chunks: Iterable[bytes]) -> None:
    """Create ``target`` (0600) holding ``chunks``, whole or not at all, without replacing
    a file that appeared there meanwhile: the data goes to a temporary file, fsynced, then
    is linked into place, which fails if anything is at ``target``. Only an empty regular
    file there is replaced (pi takes one as a new session); anything else is a
    ``conflict``, and the file there is left as it was."""
    _through_temporary(target, chunks, FILE_MODE, _link_into_place)


def _through_temporary(
    target: Path,
    chunks: Iterable[bytes],
    mode: int,
    place: Callable[[Path, Path], None],
    *,
    durable: bool = True,
) -> None:
    """``chunks`` written to a new temporary file beside ``target`` (``mode``, fsynced if
    ``durable``), put in place by ``place(temporary, target)``; the directory fsynced if
    ``durable``. The temporary file never outlives the call."""
    temporary = temporary_path_for(target)
    try:
        fd = open_regular(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, what="temporary file")
    except OSError as exc:
        raise _storage_error("create a temporary file beside", target, exc) from None
    try:
        try:
            if hasattr(os, "fchmod"):
                os.fchmod(fd, mode & 0o777)
            for chunk in chunks:
                write_all(fd, chunk)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        place(temporary, target)
    except OSError as exc:
        raise _storage_error("write", target, exc) from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
    if durable:
        fsync_directory(target.parent)


def _link_into_place(temporary: Path, target: Path) -> None:
    try:
        os.link(temporary, target)
    except FileExistsError:
        _replace_if_empty(temporary, target)
    except OSError as exc:
        if exc.errno not in NO_HARD_LINKS:
            raise
        _replace_if_empty(temporary, target)


def _replace_if_empty(temporary: Path, target: Path) -> None:
    if check_regular_or_absent(target) and os.stat(target, follow_symlinks=False).st_size > 0:
        raise ConflictError(
            f"{target} now holds a file sessiond did not write; the session was not written "
            "over it (write it at another path)",
            path=str(target),
        )
    os.replace(temporary, target)


class AppendFile:
    """The session file opened for appending whole lines."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._fd = open_regular(path, os.O_WRONLY | os.O_APPEND)
        except OSError as exc:
            raise _storage_error("open for appending", path, exc) from None
        self.dirty = False

    @property
    def fd(self) -> int:
        return self._fd

    def append(self, data: bytes, *, sync: bool) -> None:
        try:
            write_all(self._fd, data)
            self.dirty = True
            if sync:
                self.sync()
        except OSError as exc:
            raise _storage_error("append to", self.path, exc) from None

    def sync(self) -> None:
        if self.dirty:
            os.fsync(self._fd)
            self.dirty = False

    def close(self) -> None:
        try:
            self.sync()
        finally:
            os.close(self._fd)


def save_aside(path: Path, chunks: Iterable[bytes]) -> Path:
    """Write ``chunks`` to a new ``<path>.corrupt`` (or ``.corrupt.N``) file, durably.
    A chunk of nothing but NUL bytes becomes a hole (the file is sparse there), so the
    zeros a crash can leave cost no disk.

    Always a new file (``O_EXCL``): whatever is already at a name, a link included, is
    skipped and left alone."""
    for attempt in range(1000):
        suffix = ".corrupt" if attempt == 0 else f".corrupt.{attempt}"
        candidate = path.with_name(path.name + suffix)
        try:
            fd = open_regular(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, what="file")
        except FileExistsError:
            continue
        except OSError as exc:
            raise _storage_error("save damaged bytes beside", path, exc) from None
        try:
            size = 0
            for chunk in chunks:
                if all_nul(chunk):
                    os.lseek(fd, len(chunk), os.SEEK_CUR)
                else:
                    write_all(fd, chunk)
                size += len(chunk)
            os.ftruncate(fd, size)  # a hole at the end needs the size set
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_directory(path.parent)
        return candidate
    raise StorageError(f"too many .corrupt files beside {path}", path=str(path))
