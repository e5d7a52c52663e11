"""One line of ``session/list``: what a session picker shows of a session file."""

from __future__ import annotations

import msgspec


class SessionSummary(msgspec.Struct, rename="camel", kw_only=True, omit_defaults=True):
    path: str
    session_id: str
    cwd: str
    created: str
    # pi's rule: the time of the last user or assistant message; the file's
    # modification time when there is none.
    modified: str
    entry_count: int
    first_message: str
    name: str | None = None
    parent_session: str | None = None
