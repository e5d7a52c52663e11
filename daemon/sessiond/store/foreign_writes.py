"""What other programs write to a session file the store holds: noticing it, and taking
their lines into the index.

``file_watch.FileFollower`` tells what happened to the file from one ``stat``;
``catching_up`` reads what changed (in any thread). ``ForeignWrites`` keeps what the
store last saw and takes in others' appended lines: indexed, their damage reported, the
ledger kept. Its caller (``SessionStore``) moves the leaf and reads the file again whole
when it was replaced.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import msgspec

from sessiond.core.entries import CURRENT_SESSION_VERSION, Entry, SessionHeader
from sessiond.core.title_slot import TitleSlot
from sessiond.errors import BusyError, StorageError
from sessiond.wire.recovery import RecoveryReport, TornTail

from .catching_up import ChangePlan, Grown, decode_eager, read_grown
from .entry_index import EntryIndex
from .file_watch import FileFollower, Observation, observe
from .ledger import Ledger, merge_reports
from .opening import repair_torn_tail
from .records import EntryRecord
from .safe_files import open_regular
from .scan_result import ScanResult
from .session_file import SessionFile


class CatchUpNeeded(BusyError):
    """Others changed the file by more than may be read where the store is used
    (``SessionStore.inline_follow_bytes``): read the changes in a worker thread
    (``catching_up``), then try again. ``repair``: a line another program left unfinished
    must be cut off before the store can append."""

    def __init__(self, path: Path, *, repair: bool = False) -> None:
        super().__init__(
            f"another program changed {path}; sessiond is reading it: try again",
            reason="fileChanging",
            path=str(path),
        )
        self.repair = repair


class Followed(msgspec.Struct, kw_only=True):
    """What a follow took in: lines another program appended, or a file it replaced."""

    reason: Literal["fileAppended", "fileRewritten"]
    appended_ids: list[str]


class ForeignWrites:
    """What the store last saw of its file, and others' lines taken into its index."""

    def __init__(
        self,
        file: SessionFile,
        index: EntryIndex,
        ledger: Ledger,
        *,
        header: SessionHeader,
        use_index: bool,
    ) -> None:
        self._file = file
        self._index = index
        self._ledger = ledger
        self._header = header
        self._use_index = use_index
        self._follower = FileFollower(file.path)
        self._inline_limit: int | None = None
        # Others' lines an append took in before writing, for the caller to announce.
        self._unannounced: list[Followed] = []

    # -- settings

    @property
    def inline_limit(self) -> int | None:
        """At most this many bytes of others' changes are read where the store is used
        (None: any amount); beyond it, ``CatchUpNeeded``."""
        return self._inline_limit

    @inline_limit.setter
    def inline_limit(self, limit: int | None) -> None:
        self._inline_limit = limit
        self._follower.scan_limit = limit

    @property
    def skip_first(self) -> int:
        """Bytes at the start that change in place (oh-my-pi's title line)."""
        return self._follower.skip_first

    @skip_first.setter
    def skip_first(self, length: int) -> None:
        self._follower.skip_first = length

    # -- what the store saw

    def saw(self, status: os.stat_result | None = None) -> None:
        """The store knows every complete line up to the file's known end."""
        self._follower.saw(self._file.reader(), self._file.size, status)

    def took(self, seen: Observation, *, reread: ChangePlan | None = None) -> None:
        """The store took what it saw; ``reread``: by reading the file whole, as planned."""
        after = None if reread is None else reread.suspicions
        self._follower.take(seen, reread_after=after)

    def suspect(self) -> None:
        """A line read back was not what was indexed: the next look reads the file again."""
        self._follower.suspect()

    def look_again(self) -> None:
        self._follower.look_again()

    def plan(self, title_slot: TitleSlot | None) -> ChangePlan | None:
        """Whether others changed the file since the store last looked, and what reading
        it (``catching_up``) needs (one ``stat``); None when nothing changed."""
        verdict = self._follower.look(self._file.reader())
        return None if verdict == "unchanged" else self._plan_for(verdict, title_slot)

    def _plan_for(
        self, verdict: Literal["grew", "replaced"], title_slot: TitleSlot | None
    ) -> ChangePlan:
        held = 1 + (title_slot is not None) + len(self._index)
        header = ScanResult(
            header=self._header,
            header_data=self._ledger.header_data,
            version=CURRENT_SESSION_VERSION,
            line_count=self._ledger.line_count(held),
            title_slot=title_slot,
        )
        return ChangePlan(
            verdict=verdict,
            path=self._file.path,
            use_index=self._use_index,
            suspicions=self._follower.suspicions,
            suspected=self._follower.suspected,
            start=self._file.size,
            held=len(self._index),
            generation=self._index.generation,
            header=header,
            skip_first=self._follower.skip_first,
        )

    def too_much(self, plan: ChangePlan) -> bool:
        """Whether reading ``plan``'s changes is over the in-place limit."""
        limit = self._inline_limit
        return limit is not None and (
            plan.verdict == "replaced" or self._follower.seen_size - plan.start > limit
        )

    def still_current(self, plan: ChangePlan) -> bool:
        """Whether the store is as ``plan`` found it; if not, the next look reads again."""
        if self._index.generation == plan.generation and self._file.size == plan.start:
            return True
        self._follower.look_again()
        return False

    # -- taking others' lines in

    def take_grown(
        self, grown: Grown, recovery: RecoveryReport, *, observed: bool = True
    ) -> list[EntryRecord]:
        """Index the lines ``grown`` read (memory only); the records taken, in file order."""
        found = grown.found
        self._index.bump()
        decode_eager(found.records, found.eager_lines, recovery)
        for record in found.records:
            self._index.add(record)
        found.report.damaged_lines += grown.second_headers
        merge_reports(recovery, found.report)
        self._ledger.took(found.records, found.report, found.line_count, grown.lines_before)
        self._file.set_end(found.end)
        if observed:
            self._follower.take(grown.seen)
        return found.records

    def announce_later(self, followed: Followed) -> None:
        self._unannounced.append(followed)

    def take_unannounced(self) -> list[Followed]:
        taken, self._unannounced = self._unannounced, []
        return taken

    def place_among_others(
        self,
        prepared: list[tuple[EntryRecord, Entry, bytes]],
        data: bytes,
        start: int,
        recovery: RecoveryReport,
        title_slot: TitleSlot | None,
    ) -> Grown | None:
        """Our ``data``, appended at ``start`` as we knew the file, landed among lines
        another program appended at the same moment: find our bytes (one ``write()`` on
        an ``O_APPEND`` descriptor, so contiguous), index the lines before them now (what
        comes back) and leave the ones after to the next look. With an in-place limit,
        ours are looked for only that far."""
        file_size = os.fstat(self._file.reader()).st_size
        if self._inline_limit is not None:
            file_size = min(file_size, start + self._inline_limit + len(data))
        region = b"".join(self._file.read_between(start, file_size))
        found = region.find(data.lstrip(b"\n"))
        if found < 0:
            self._follower.suspect()  # the next look reads the file again whole
            raise StorageError(f"{self._file.path}: an append could not be found after writing it")
        self._file.set_end(start)
        before: Grown | None = None
        if found > 0:
            plan = self._plan_for("grew", title_slot)
            before = read_grown(plan, self._file.reader(), start + found)
            self.take_grown(before, recovery, observed=False)
        at = start + found
        for record, _, line in prepared:
            record.offset = at
            at += len(line) + 1
        self._file.set_end(at)
        return before

    # -- another program's unfinished last line

    def cut_unfinished(self, recovery: RecoveryReport) -> None:
        """Before an append (after taking others' lines in): never write after another
        program's unfinished line. ``BusyError`` while its writer may still finish it;
        ``CatchUpNeeded`` when it is longer than may be read in place; else (its writer
        crashed) it is cut off as opening would, its bytes kept in a ``.corrupt`` file."""
        unfinished = self._follower.unfinished
        if unfinished is None:
            return
        path = self._file.path
        if not self._follower.unfinished_for_long():
            raise BusyError(
                f"another program is writing {path}: its last line is not finished "
                "yet; try again in a moment",
                reason="fileBeingWritten",
                path=str(path),
            )
        limit = self._inline_limit
        if limit is not None and unfinished.size - unfinished.offset > limit:
            raise CatchUpNeeded(path, repair=True)
        torn = self._stale_tail()
        if torn is not None:
            seen = cut_tail(path, self._header, torn, self._file.size, self._follower.skip_first)
            self.take_cut(torn, seen, recovery)

    def _stale_tail(self) -> TornTail | None:
        """The unfinished last line a crashed writer left, if any (one that stayed as it is
        past the grace period)."""
        unfinished = self._follower.unfinished
        if unfinished is None or not self._follower.unfinished_for_long():
            return None
        return TornTail(
            offset=unfinished.offset,
            length=unfinished.size - unfinished.offset,
            saved_to=None,
            preview="",
        )

    def stale_tail_cut(self) -> tuple[TornTail, Callable[[], Observation]] | None:
        """The stale unfinished tail, if any, and the file work that cuts it off (for any
        thread: it touches nothing of the store); ``take_cut`` then takes what it saw."""
        torn = self._stale_tail()
        if torn is None:
            return None
        path, header = self._file.path, self._header
        end, skip = self._file.size, self._follower.skip_first
        return torn, lambda: cut_tail(path, header, torn, end, skip)

    def take_cut(self, torn: TornTail, seen: Observation, recovery: RecoveryReport) -> None:
        recovery.torn_tail = torn
        self._follower.take(seen)


def cut_tail(
    path: Path, header: SessionHeader, torn: TornTail, end: int, skip_first: int
) -> Observation:
    """Cut ``torn`` off the file (its bytes saved aside) and look at the file again, up to
    ``end`` (file work of any size; touches nothing of the store)."""
    result = ScanResult(header=header, header_data={}, version=CURRENT_SESSION_VERSION)
    result.report.torn_tail = torn
    repair_torn_tail(path, result)
    fd = open_regular(path, os.O_RDONLY)
    try:
        return observe(fd, end, skip_first=skip_first)
    finally:
        os.close(fd)
