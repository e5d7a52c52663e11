"""The clients connected to the daemon: what each declared, and how to reach them."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sessiond.errors import REQUEST_CANCELLED, CancelledError
from sessiond.llm.base import CompletionRequest
from sessiond.llm.client import ClientComplete
from sessiond.server import ClientRequestFailed, ClientReturnedError, Connection

from .types import ClientCapabilities, LlmCompleteResult

_log = logging.getLogger(__name__)
# A summary through the editor's model can take minutes; the daemon waits this long.
LLM_COMPLETE_TIMEOUT_SECONDS = 600.0


@dataclass
class ClientState:
    connection: Connection
    name: str = "client"
    capabilities: ClientCapabilities = field(default_factory=ClientCapabilities)
    overrides: dict[str, Any] = field(default_factory=dict)
    initialized: bool = False

    @property
    def id(self) -> int:
        return self.connection.id

    def wants(self, notification: str) -> bool:
        return notification not in self.capabilities.opt_out_notifications

    def handles(self, hook: str) -> bool:
        return hook in self.capabilities.hooks


class Clients:
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

    def llm_client(self, preferred: int | None = None) -> ClientComplete | None:
        """``llm/complete`` through the preferred client if it can, else the first that can."""
        candidates = [c for c in self if c.capabilities.llm and not c.connection.closed]
        chosen = next((c for c in candidates if c.id == preferred), None)
        chosen = chosen or (candidates[0] if candidates else None)
        if chosen is None:
            return None
        connection = chosen.connection

        async def complete(request: CompletionRequest) -> str:
            try:
                result = await connection.request(
                    "llm/complete",
                    request,
                    result_type=LlmCompleteResult,
                    timeout=LLM_COMPLETE_TIMEOUT_SECONDS,
                )
            except ClientReturnedError as exc:
                if exc.code == REQUEST_CANCELLED:
                    raise CancelledError("the client cancelled the summary") from None
                raise
            except ClientRequestFailed as exc:
                _log.warning("llm/complete through %s failed: %s", chosen.name, exc)
                raise
            return result.text

        return complete
