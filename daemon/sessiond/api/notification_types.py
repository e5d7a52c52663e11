"""The notifications the daemon sends: what changed in a session, compactions, recovery."""

from __future__ import annotations

from typing import Literal

import msgspec

from sessiond.wire.compaction import CompactionReason, CompactionResult
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


class CompactionStartedNotification(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str
    reason: CompactionReason
    will_retry: bool
    # A background summary's ``$/progress`` token, for the clients that accepted it
    # (``window/workDoneProgress/create``).
    progress_token: str | None = None


class CompactionEndedNotification(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str
    reason: CompactionReason
    aborted: bool
    will_retry: bool
    # What was written (or, with an error, would have been).
    result: CompactionResult | None = None
    error_message: str | None = None
    skipped: bool = False
    entry_id: str | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None
    # Skipped: automatic compaction is paused (see ``errorMessage`` for what to do).
    paused: bool = False
    # The summary was written in the background, before this compaction started.
    prepared: bool = False


class SessionRecovered(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    session_id: str
    path: str
    recovery: RecoveryReport
