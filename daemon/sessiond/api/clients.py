"""The clients connected to the daemon: what each declared, and how to reach them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec

from sessiond.core.inert import quoted
from sessiond.errors import REQUEST_CANCELLED, OperationCancelledError
from sessiond.jsonrpc import ClientRequestFailed, ClientReturnedError, Connection
from sessiond.llm.base import CompletionRequest
from sessiond.llm.delegated import DelegatedComplete
from sessiond.llm.errors import ProviderError

from .hook_types import LlmCompleteParams, LlmCompleteResult
from .lifecycle_types import ClientCapabilities

_log = logging.getLogger(__name__)
# A summary through the editor's model can take minutes; the daemon waits this long.
LLM_COMPLETE_TIMEOUT_SECONDS = 600.0


# How much of the name a client gives itself (``clientInfo.name``) is kept.
MAX_CLIENT_NAME = 100
# File jobs (opens, listings, forks) of one client in worker threads at once; its
# others wait their turn, so that one client cannot keep every worker busy.
FILE_JOBS_PER_CLIENT = 2


@dataclass
class ClientState:
    connection: Connection
    # The client's own words (``clientInfo.name``, cut to ``MAX_CLIENT_NAME``): shown
    # only quoted, through ``label``.
    name: str = "client"
    capabilities: ClientCapabilities = field(default_factory=ClientCapabilities)
    overrides: dict[str, Any] = field(default_factory=dict)
    initialized: bool = False
    file_jobs: asyncio.Semaphore = field(
        default_factory=lambda: asyncio.Semaphore(FILE_JOBS_PER_CLIENT)
    )

    @property
    def id(self) -> int:
        return self.connection.id

    @property
    def label(self) -> str:
        """How logs and messages name the client: its name quoted, its connection."""
        return f"client {quoted(self.name, 60)} (connection {self.id})"

    def wants(self, notification: str) -> bool:
        return notification not in self.capabilities.opt_out_notifications

    def handles(self, hook: str) -> bool:
        return hook in self.capabilities.hooks


class ConnectedClients:
    """Connected clients in connection order (the order hooks are asked in)."""

    def __init__(self) -> None:
        self._by_id: dict[int, ClientState] = {}

    def add(self, connection: Connection) -> ClientState:
        state = ClientState(connection)
        self._by_id[connection.id] = state
        return state

    def remove(self, connection_id: int) -> None:
        self._by_id.pop(connection_id, None)

    def get(self, connection_id: int) -> ClientState | None:
        return self._by_id.get(connection_id)

    def __iter__(self) -> Iterator[ClientState]:
        return iter(sorted(self._by_id.values(), key=lambda c: c.id))

    def publish(self, clients: set[int], method: str, params: Any) -> None:
        """Send a notification to those of ``clients`` that did not opt out of it."""
        for state in self:
            if state.id in clients and state.initialized and state.wants(method):
                state.connection.notify(method, params)

    def taking_progress(self, among: Collection[int]) -> list[ClientState]:
        """Those of ``among`` that can be sent ``$/progress`` for work they did not request:
        they declared ``window.workDoneProgress`` and did not opt out of ``$/progress``."""
        return [
            c
            for c in self
            if c.id in among
            and c.initialized
            and c.capabilities.window.work_done_progress
            and c.wants("$/progress")
        ]

    def delegated_completion(
        self, *, preferred: int | None, audience: Callable[[], Collection[int]]
    ) -> DelegatedComplete | None:
        """``llm/complete`` through a client of ``audience`` (the clients that have the
        session open: the request carries its conversation, and the answer is written
        into it): the preferred client if it can, else the first that can. None when no
        such client offers it now; the choice is made again at each call, so a client
        that closed the session meanwhile is not asked."""

        def choose() -> ClientState | None:
            allowed = audience()
            able = [
                c
                for c in self
                if c.capabilities.llm and not c.connection.closed and c.id in allowed
            ]
            return next((c for c in able if c.id == preferred), able[0] if able else None)

        if choose() is None:
            return None

        async def complete(request: CompletionRequest) -> str:
            chosen = choose()
            if chosen is None:
                raise ProviderError(
                    "no client with the session open offers llm/complete any more",
                    error_kind="other",
                )
            try:
                result = await chosen.connection.request(
                    "llm/complete",
                    # Copied whole: a field the request gains reaches the wire
                    # type or fails here, in every test of llm/complete.
                    LlmCompleteParams(**msgspec.structs.asdict(request)),
                    result_type=LlmCompleteResult,
                    timeout=LLM_COMPLETE_TIMEOUT_SECONDS,
                )
            except ClientReturnedError as exc:
                if exc.code == REQUEST_CANCELLED:
                    raise OperationCancelledError("the client cancelled the summary") from None
                raise
            except ClientRequestFailed as exc:
                _log.warning("llm/complete through %s failed: %s", chosen.label, exc)
                raise
            return result.text

        return complete
