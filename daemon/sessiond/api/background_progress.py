"""``$/progress`` for a summary written in the background, to the clients that take it.

No request of the client's asked for that work, so, as LSP has it for work the server
starts, the daemon first asks each client that declared
``capabilities.window.workDoneProgress`` to make a token
(``window/workDoneProgress/create``) and reports on it only once the client said yes.
A client that refuses, does not answer or has gone is sent nothing; the others do not
wait for it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Iterable
from typing import Final

from sessiond.jsonrpc import (
    ClientRequestFailed,
    Connection,
    WorkDoneBegin,
    WorkDoneEnd,
    WorkDoneReport,
)
from sessiond.llm.base import ProgressCallback
from sessiond.service.background import BackgroundEvent
from sessiond.wire.compaction import CompactionStarted

from .clients import ClientState
from .summarizing import throttled_reports

_log = logging.getLogger(__name__)

TITLE: Final = "Compacting the session in the background"
# How long a client has to accept a token. An editor answers at once; one that does
# not is left out of this summary's progress (and holds nothing of anyone else's).
CREATE_TIMEOUT_SECONDS: Final = 10.0
# Tokens are the daemon's, unique for its lifetime (LSP tokens are per connection;
# one token serves every client that follows the same summary).
_serial = itertools.count(1)


def end_message(event: BackgroundEvent) -> str | None:
    """The ``end`` message for ``event``; None for an event that does not end the work."""
    if isinstance(event, CompactionStarted):
        return None
    if event.error_message is not None:
        return event.error_message
    if event.aborted:
        return "Background summary dropped"
    return "Summary ready: it is committed when the context reaches the threshold"


class BackgroundProgress:
    """The ``$/progress`` of one background summary, sent to the clients that accepted
    its token. Follows the summary's events (``follow``) and its summarizer (``report``)."""

    def __init__(self, clients: Iterable[ClientState]) -> None:
        self.token = f"sessiond-background-{next(_serial)}"
        self._connections = [c.connection for c in clients]
        # Connections that accepted the token and were sent ``begin``, until the end.
        self._shown: list[Connection] = []
        self._ended: str | None = None
        self._creating: set[asyncio.Task[None]] = set()
        self.report: ProgressCallback = throttled_reports(self._send_report)

    def follow(self, event: BackgroundEvent) -> None:
        """Begin at the summary's start, end at its end."""
        message = end_message(event)
        if message is None:
            self._begin()
        else:
            self._end(message)

    def _begin(self) -> None:
        for connection in self._connections:
            task = asyncio.ensure_future(self._open(connection))
            self._creating.add(task)
            task.add_done_callback(self._creating.discard)

    async def _open(self, connection: Connection) -> None:
        try:
            await connection.create_progress(self.token, timeout=CREATE_TIMEOUT_SECONDS)
        except ClientRequestFailed as exc:
            _log.debug("no background progress for connection %d: %s", connection.id, exc)
            return
        connection.progress(self.token, WorkDoneBegin(title=TITLE, cancellable=False))
        if self._ended is not None:
            # The summary was done before the client accepted: a token once begun is ended.
            connection.progress(self.token, WorkDoneEnd(message=self._ended))
        else:
            self._shown.append(connection)

    def _send_report(self, message: str) -> None:
        for connection in self._shown:
            connection.progress(self.token, WorkDoneReport(message=message))

    def _end(self, message: str) -> None:
        if self._ended is not None:
            return
        self._ended = message
        shown, self._shown = self._shown, []
        for connection in shown:
            connection.progress(self.token, WorkDoneEnd(message=message))
