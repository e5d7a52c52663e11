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

FileChange = Literal["unchanged", "grew", "replaced"]


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
        # Lines read back that were not what was indexed there (the file changed in place
        # in a way the stat and the last bytes may not show), counted; and how many of
        # them a whole read begun after them has answered. A read begun earlier may have
        # passed the changed line before it changed, so it answers only those before it.
        self._suspicions = 0
        self._answered = 0
        # At most this many bytes after the known end are searched for a newline (None:
        # any number). A daemon sets it: that search is file work of any size, which it
        # does in a worker thread (``catch_up``), not where ``saw`` is called.
        self.scan_limit: int | None = None
        # The file's size at the last ``look`` (what a follow would read up to).
        self.seen_size = 0

    def saw(self, fd: int, end: int, status: os.stat_result | None = None) -> None:
        """The store now knows every complete line up to ``end`` of the file open on
        ``fd`` (after an open, its own append, or taking in another program's lines)."""
        self.take(observe(fd, end, status, self.scan_limit, self.skip_first))

    def take(self, seen: Observation, *, reread_after: int | None = None) -> None:
        """``saw``, from what ``observe`` found (perhaps in another thread).
        ``reread_after``: the file was read again whole, begun when ``suspicions`` was
        that, so the suspicions (``suspect``) raised until then are answered."""
        if reread_after is not None:
            self._answered = max(self._answered, reread_after)
        status = seen.status
        self._identity = (status.st_dev, status.st_ino)
        self._signature = _signature(status)
        self._known_end = seen.end
        self._tail = seen.tail
        if seen.unfinished:
            unfinished = self.unfinished
            if unfinished is None or unfinished.size != status.st_size:
                self.unfinished = Unfinished(seen.end, status.st_size, time.monotonic())
        else:
            self.unfinished = None
            if status.st_size > seen.end:
                # Whole lines came after the ones read (another program is quick), or more
                # than ``scan_limit`` bytes not looked at: the next look reads them.
                self._signature = None

    def suspect(self) -> None:
        """The file changed behind the store where ``look`` cannot see it (a same-size edit
        in the middle): ``look`` says it was replaced until a whole read begun after now
        is taken (``take``)."""
        self._suspicions += 1

    @property
    def suspicions(self) -> int:
        """How many suspicions were raised so far (a read's plan notes it)."""
        return self._suspicions

    @property
    def suspected(self) -> bool:
        """Whether a suspicion is still unanswered: only a scan of every line answers it
        (the persistent index cannot see what a suspicion is about)."""
        return self._suspicions != self._answered

    def look_again(self) -> None:
        """Lines after the known end are complete, not unfinished: the next ``look``
        reads them."""
        self._signature = None
        self.unfinished = None

    def look(self, fd: int) -> FileChange:
        """Whether the file at the path changed since ``saw``; ``fd`` is the store's
        reading descriptor of the same file (used only when the path still names it)."""
        if self._identity is None:
            return "unchanged"
        if self.suspected:
            return "replaced"  # until the file is read again (``take`` after a reload)
        try:
            status = os.stat(self.path, follow_symlinks=False)
        except OSError:
            # Gone or unreadable: the store keeps serving what it has; a file put back
            # at the path is a replacement and is read then.
            return "unchanged"
        self.seen_size = status.st_size
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

    def unfinished_for_long(self) -> bool:
        """Whether the unfinished last line has stayed as it is past the grace period."""
        unfinished = self.unfinished
        return unfinished is not None and time.monotonic() - unfinished.since >= UNFINISHED_GRACE_S


@dataclass(frozen=True)
class Observation:
    """What ``observe`` read of the file: its status, the bytes before ``end``, and
    whether the bytes after ``end`` are an unfinished line."""

    status: os.stat_result
    end: int
    tail: bytes
    unfinished: bool


def observe(
    fd: int,
    end: int,
    status: os.stat_result | None = None,
    scan_limit: int | None = None,
    skip_first: int = 0,
) -> Observation:
    """The file open on ``fd`` as the store knows it up to ``end``. Bytes after ``end`` are
    an unfinished line when they hold no newline; with ``scan_limit``, more of them than
    that are not searched (they count as complete lines, for a later look to read). The
    first ``skip_first`` bytes are not among those compared later (``FileFollower``)."""
    status = status or os.fstat(fd)
    start = min(end, max(skip_first, end - _TAIL_CHECK))
    tail = os.pread(fd, end - start, start)
    after = status.st_size - end
    unfinished = (
        after > 0
        and (scan_limit is None or after <= scan_limit)
        and not _has_newline(fd, end, status.st_size)
    )
    return Observation(status, end, tail, unfinished)


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
