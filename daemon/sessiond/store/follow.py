"""Noticing what other programs do to a session file the daemon holds open.

pi (and any tool that appends pi entries) writes session files without sessiond's
lock. ``FileFollower`` remembers what the store last saw of its file (device, inode,
size, times, and the last bytes of the lines it has read) and, from one ``stat`` call,
tells what happened since:

- nothing (the common case: one ``stat``, no read);
- lines were appended after the ones the store knows (the store scans only those);
- the file was replaced, truncated or rewritten in place (the store re-reads it).

A last line without its newline is another program's write in progress, not damage:
it is left alone until its newline comes. Only a tail that stays unfinished for
``UNFINISHED_GRACE_S`` (its writer crashed) may be cut off, and only when the daemon
needs to append after it.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

# How long a last line may stay unfinished before it counts as a crashed writer's.
UNFINISHED_GRACE_S: Final = 2.0
# Bytes before the known end that must be unchanged for an append to be only an append.
_TAIL_CHECK: Final = 4096
_SEARCH_CHUNK: Final = 1 << 20

Verdict = Literal["unchanged", "grew", "replaced"]


@dataclass
class Unfinished:
    """Bytes after the last complete line, and since when they have been there unchanged."""

    offset: int
    size: int
    since: float


class FileFollower:
    """What the store last saw of its file, and the verdict on what changed since."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._identity: tuple[int, int] | None = None
        self._signature: tuple[int, int, int, int, int] | None = None
        self._known_end = 0
        self._tail = b""
        self.unfinished: Unfinished | None = None
        # Bytes at the start that change in place without the file being rewritten
        # (oh-my-pi's title line): the tail check never looks at them.
        self.skip_first = 0
        # A line read back was not what was indexed there: the file changed in place in
        # a way the stat and the last bytes may not show.
        self._suspect = False

    def saw(self, fd: int, end: int, status: os.stat_result | None = None) -> None:
        """The store now knows every complete line up to ``end`` of the file open on
        ``fd`` (after an open, its own append, or taking in another program's lines)."""
        status = status or os.fstat(fd)
        self._identity = (status.st_dev, status.st_ino)
        self._signature = _signature(status)
        self._known_end = end
        start = min(end, max(self.skip_first, end - _TAIL_CHECK))
        self._tail = os.pread(fd, end - start, start)
        if status.st_size > end and not _has_newline(fd, end, status.st_size):
            unfinished = self.unfinished
            if unfinished is None or unfinished.size != status.st_size:
                self.unfinished = Unfinished(end, status.st_size, time.monotonic())
        else:
            self.unfinished = None
            if status.st_size > end:
                # Whole lines came after the ones read (another program is quick): the
                # next look reads them.
                self._signature = None

    def suspect(self) -> None:
        """The file changed behind the store where ``look`` cannot see it (a same-size edit
        in the middle): the next ``look`` says it was replaced, and it is read again."""
        self._suspect = True

    def look_again(self) -> None:
        """Lines after the known end are complete, not unfinished: the next ``look``
        reads them."""
        self._signature = None
        self.unfinished = None

    def look(self, fd: int) -> Verdict:
        """Whether the file at the path changed since ``saw``; ``fd`` is the store's
        reading descriptor of the same file (used only when the path still names it)."""
        if self._identity is None:
            return "unchanged"
        if self._suspect:
            self._suspect = False
            return "replaced"
        try:
            status = os.stat(self.path, follow_symlinks=False)
        except OSError:
            # Gone or unreadable: the store keeps serving what it has; a file put back
            # at the path is a replacement and is read then.
            return "unchanged"
        if _signature(status) == self._signature:
            return "unchanged"
        if not stat.S_ISREG(status.st_mode) or (status.st_dev, status.st_ino) != self._identity:
            return "replaced"
        if status.st_size < self._known_end:
            return "replaced"
        start = min(self._known_end, max(self.skip_first, self._known_end - _TAIL_CHECK))
        if os.pread(fd, self._known_end - start, start) != self._tail:
            return "replaced"  # rewritten in place (pi's rewrite after pruning does that)
        if status.st_size == self._known_end:
            # Same size, same last bytes: times changed (a touch, a chmod). Nothing to read.
            self._signature = _signature(status)
            self.unfinished = None
            return "unchanged"
        unfinished = self.unfinished
        if unfinished is not None and unfinished.size == status.st_size:
            self._signature = _signature(status)
            return "unchanged"  # the same unfinished line, still unfinished
        return "grew"

    @property
    def known_end(self) -> int:
        return self._known_end

    def unfinished_for_long(self) -> bool:
        """Whether the unfinished last line has stayed as it is past the grace period."""
        unfinished = self.unfinished
        return unfinished is not None and time.monotonic() - unfinished.since >= UNFINISHED_GRACE_S


def _has_newline(fd: int, start: int, end: int) -> bool:
    """Whether a newline is in ``[start, end)`` of the file; read from the end, where the
    last newline is, so an unfinished line of any length costs one pass at most."""
    position = end
    while position > start:
        size = min(_SEARCH_CHUNK, position - start)
        if b"\n" in os.pread(fd, size, position - size):
            return True
        position -= size
    return False


def _signature(status: os.stat_result) -> tuple[int, int, int, int, int]:
    return (
        status.st_dev,
        status.st_ino,
        status.st_size,
        status.st_mtime_ns,
        status.st_ctime_ns,
    )
