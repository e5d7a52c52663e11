"""The notifications the daemon sends: what changed in a session, compactions, recovery."""

from __future__ import annotations

from typing import Literal

import msgspec

from sessiond.wire.compaction import CompactionEnded, CompactionStarted
from sessiond.wire.recovery import RecoveryReport

from .types import WIRE_OPTIONS

# Why a session changed: a client's append, a navigation, a compaction, the daemon's
# own rewrite (pruning), or another program that appended to or replaced the file.
ChangeReason = Literal[
    "append", "navigate", "compaction", "rewrite", "fileAppended", "fileRewritten", "undo"
]


class SessionChanged(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str
    reason: ChangeReason
    leaf_id: str | None
    entry_count: int
    appended_ids: list[str] = msgspec.field(default_factory=list)


class CompactionStartedNotification(CompactionStarted, kw_only=True, **WIRE_OPTIONS):
    """compaction/started: the event, with the session named."""

    session_id: str
    # A background summary's ``$/progress`` token, for the clients that accepted it
    # (``window/workDoneProgress/create``).
    progress_token: str | None = None


class CompactionEndedNotification(CompactionEnded, kw_only=True, **WIRE_OPTIONS):
    """compaction/ended: the event, with the session named."""

    session_id: str


class SessionRecovered(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str
    path: str
    recovery: RecoveryReport
