"""Map pi-style agent events onto the protocol, so that a Python agent loop stays thin.

pi's agent emits ``{"type": "message_end", "message": {...}}`` for every finished
message and ``{"type": "agent_end", ...}`` when a run is over. pi's session persists
user, assistant and tool-result messages at ``message_end`` and runs its end-of-turn
checks at ``agent_end``; ``AgentSession`` does the same through sessiond::

    bridge = AgentSession(client, session_id, context_window=200_000)
    for event in agent.run(prompt):
        outcome = await bridge.handle(event)
        if outcome is not None and outcome.action == "continue":
            prompt = outcome.prompt  # pi's auto-continue after a compaction
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import ProgressCallback
from .client import SessiondClient
from .entries import MessageInput, message_json
from .types import AppendResult, ModelRef, TurnEndedResult, Usage

# The message roles pi writes to the session at message_end.
PERSISTED_ROLES = frozenset({"user", "assistant", "toolResult"})


class AgentSession:
    """One agent's view of one session: appends its messages, ends its turns.

    ``model``: the model the agent uses now; when not given, the provider and model of
    the last assistant message recorded. ``guard_leaf``: send ``expected_leaf_id`` with
    every append, so that a concurrent writer (another client on the same session)
    makes the append fail with ``ConflictError`` instead of interleaving; ``leaf_id``
    is then the leaf the agent starts from (``open_session(...).leaf_id``).
    """

    def __init__(
        self,
        client: SessiondClient,
        session_id: str,
        *,
        context_window: int | None = None,
        model: ModelRef | None = None,
        guard_leaf: bool = False,
        leaf_id: str | None = None,
        progress: ProgressCallback | None = None,
    ) -> None:
        self.client = client
        self.session_id = session_id
        self.context_window = context_window
        self.model = model
        self.guard_leaf = guard_leaf
        self.leaf_id = leaf_id
        self.progress = progress
        self.usage: Usage | None = None
        self._model_given = model is not None

    async def handle(self, event: Mapping[str, Any]) -> TurnEndedResult | None:
        """Act on one agent event: ``message_end`` appends, ``agent_end`` ends the turn.

        Returns the end-of-turn result at ``agent_end``, else None (the append's result
        is kept in ``leaf_id`` and ``usage``).
        """
        kind = event.get("type")
        if kind == "message_end":
            message = event.get("message")
            if isinstance(message, Mapping) and message.get("role") in PERSISTED_ROLES:
                await self.record(message)
            return None
        if kind == "agent_end":
            return await self.end_turn()
        return None

    async def record(self, message: MessageInput | Mapping[str, Any]) -> AppendResult:
        """Append one message (a ``MessageInput`` struct or its JSON) as a ``message`` entry."""
        data = message_json(message)
        guard = self.guard_leaf
        result = await self.client.append(
            self.session_id,
            [{"type": "message", "message": data}],
            expected_leaf_id=self.leaf_id if guard else None,
            expect_no_entries=guard and self.leaf_id is None,
        )
        self.leaf_id = result.leaf_id
        self.usage = result.usage
        if not self._model_given and data.get("role") == "assistant":
            provider, model_id = data.get("provider"), data.get("model")
            if isinstance(provider, str) and isinstance(model_id, str):
                self.model = ModelRef(provider=provider, model_id=model_id)
        return result

    async def end_turn(self) -> TurnEndedResult:
        """pi's end-of-turn checks; the result says whether to retry or continue."""
        result = await self.client.turn_ended(
            self.session_id,
            context_window=self.context_window,
            model=self.model,
            progress=self.progress,
        )
        if result.usage is not None:
            self.usage = result.usage
        if result.compaction is not None:
            # The compaction entry is the new leaf.
            self.leaf_id = result.compaction.entry_id
        return result
