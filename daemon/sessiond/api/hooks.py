"""pi's hook events (``hooks/*`` in protocol/README.md), answered by clients over
server-to-client requests.

pi's rules: only clients that declared a hook (and have the session open) are
asked, in connection order, one after another; the last non-empty answer
wins; ``cancel`` stops at once. Every request has a timeout. A timeout, an
error answer or a disconnect counts as no answer: it is logged and returned as
a problem, which the runner records in the entry's ``details``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import msgspec

from sessiond.core.entries import BranchSummaryEntry, CompactionEntry
from sessiond.core.messages import AnyMessage
from sessiond.core.preparation import CompactionPreparation
from sessiond.jsonrpc import ClientRequestFailed, ClientRequestTimeout, MessageType
from sessiond.service.actor import SessionActor
from sessiond.service.hooks import (
    BeforeCompactAnswer,
    BeforeTreeAnswer,
    BranchLoader,
    CompactingAnswer,
    TreePreparation,
)
from sessiond.store.export import message_json
from sessiond.store.session import SessionStore

from .clients import ClientState, ConnectedClients
from .hook_types import (
    BeforeCompactHookParams,
    BeforeCompactHookResult,
    BeforeTreeHookParams,
    BeforeTreeHookResult,
    CompactHookParams,
    CompactingHookParams,
    CompactingHookResult,
    TreeHookParams,
)
from .types import CompactionPreparationWire

_log = logging.getLogger(__name__)
R = TypeVar("R", bound=msgspec.Struct)


def stored_messages(
    store: SessionStore, messages: Sequence[AnyMessage], entry_ids: Sequence[str]
) -> list[msgspec.Raw]:
    """Messages as JSON, a stored message as its original bytes (unknown fields kept)."""
    return [
        msgspec.Raw(message_json(store, entry_id, message, True))
        for message, entry_id in zip(messages, entry_ids, strict=True)
    ]


def preparation_wire(
    preparation: CompactionPreparation,
    store: SessionStore | None = None,
    *,
    include_messages: bool = False,
) -> CompactionPreparationWire:
    read_files, modified_files = preparation.file_ops.lists()
    wire = CompactionPreparationWire(
        first_kept_entry_id=preparation.first_kept_entry_id,
        is_split_turn=preparation.is_split_turn,
        tokens_before=preparation.tokens_before,
        summarize_entry_ids=preparation.summarize_entry_ids,
        turn_prefix_entry_ids=preparation.turn_prefix_entry_ids,
        recent_entry_ids=preparation.recent_entry_ids,
        read_files=read_files,
        modified_files=modified_files,
        keep_recent_tokens=preparation.keep_recent_tokens,
        previous_summary=preparation.previous_summary,
    )
    if include_messages and store is not None:
        wire.messages_to_summarize = stored_messages(
            store, preparation.messages_to_summarize, preparation.summarize_entry_ids
        )
        wire.turn_prefix_messages = stored_messages(
            store, preparation.turn_prefix_messages, preparation.turn_prefix_entry_ids
        )
    return wire


def _empty(answer: msgspec.Struct) -> bool:
    return not msgspec.to_builtins(answer)


class ClientHooks:
    """``service.hooks.Hooks`` for one session, answered by the daemon's clients."""

    def __init__(
        self,
        clients: ConnectedClients,
        actor: SessionActor,
        timeout_seconds: Callable[[], float],
    ) -> None:
        self._clients = clients
        self._actor = actor
        self._timeout = timeout_seconds

    def _listeners(self, hook: str) -> list[ClientState]:
        return [
            client
            for client in self._clients
            if client.handles(hook)
            and client.id in self._actor.subscribers
            and not client.connection.closed
        ]

    async def _ask(
        self, client: ClientState, hook: str, params: Any, result_type: type[R], problems: list[str]
    ) -> R | None:
        method = f"hooks/{hook}"
        timeout = self._timeout()
        # A null result is no answer, not a problem: vscode-jsonrpc sends null for a
        # handler that returns undefined (pi: a handler that returns nothing).
        optional: Any = result_type | None
        try:
            answer: R | None = await client.connection.request(
                method, params, result_type=optional, timeout=timeout
            )
            return answer
        except ClientRequestTimeout:
            problem = f"{client.label}: {method} timed out after {timeout:g} s"
        except ClientRequestFailed as exc:
            problem = f"{client.label}: {method} failed: {exc}"
        problems.append(problem)
        self.answer_ignored(problem)
        return None

    def answer_ignored(self, problem: str) -> None:
        _log.warning("hook answer ignored: %s", problem)
        self._tell_subscribers(f"sessiond: hook answer ignored: {problem}")

    def _tell_subscribers(self, text: str) -> None:
        """``window/logMessage`` to the session's clients, for what went wrong quietly."""
        for client in self._clients:
            if (
                client.id in self._actor.subscribers
                and client.initialized
                and client.wants("window/logMessage")
            ):
                client.connection.log_message(text, MessageType.WARNING)

    async def before_compact(
        self,
        preparation: CompactionPreparation,
        branch_entries: BranchLoader,
        custom_instructions: str | None,
    ) -> BeforeCompactAnswer:
        answer = BeforeCompactAnswer()
        params = BeforeCompactHookParams(
            session_id=self._actor.session_id,
            preparation=preparation_wire(preparation, self._actor.store, include_messages=True),
            custom_instructions=custom_instructions,
        )
        for client in self._listeners("session_before_compact"):
            result = await self._ask(
                client, "session_before_compact", params, BeforeCompactHookResult, answer.problems
            )
            if result is None or _empty(result):
                continue
            answer = BeforeCompactAnswer(
                cancel=result.cancel,
                compaction=result.compaction,
                supplied_by=client.label,
                problems=answer.problems,
            )
            if answer.cancel:
                break
        return answer

    async def compacting(self, preparation: CompactionPreparation) -> CompactingAnswer:
        answer = CompactingAnswer()
        params = CompactingHookParams(
            session_id=self._actor.session_id,
            messages=stored_messages(
                self._actor.store,
                [*preparation.messages_to_summarize, *preparation.turn_prefix_messages],
                [*preparation.summarize_entry_ids, *preparation.turn_prefix_entry_ids],
            ),
        )
        for client in self._listeners("session.compacting"):
            result = await self._ask(
                client, "session.compacting", params, CompactingHookResult, answer.problems
            )
            if result is None or _empty(result):
                continue
            answer = CompactingAnswer(
                prompt=result.prompt,
                context=list(result.context or []),
                preserve_data=result.preserve_data,
                problems=answer.problems,
            )
        return answer

    async def compacted(self, entry: CompactionEntry, from_extension: bool) -> None:
        params = CompactHookParams(
            session_id=self._actor.session_id,
            compaction_entry=msgspec.Raw(
                self._actor.store.raw_line(self._actor.store.record(entry.id))
            ),
            from_extension=from_extension,
        )
        for client in self._listeners("session_compact"):
            client.connection.notify("hooks/session_compact", params)

    async def before_tree(self, preparation: TreePreparation) -> BeforeTreeAnswer:
        answer = BeforeTreeAnswer()
        params = BeforeTreeHookParams(
            session_id=self._actor.session_id,
            target_id=preparation.target_id,
            old_leaf_id=preparation.old_leaf_id,
            common_ancestor_id=preparation.common_ancestor_id,
            entry_ids_to_summarize=[entry.id for entry in preparation.entries_to_summarize],
            user_wants_summary=preparation.user_wants_summary,
            custom_instructions=preparation.custom_instructions,
            replace_instructions=preparation.replace_instructions,
            label=preparation.label,
        )
        for client in self._listeners("session_before_tree"):
            result = await self._ask(
                client, "session_before_tree", params, BeforeTreeHookResult, answer.problems
            )
            if result is None or _empty(result):
                continue
            answer = BeforeTreeAnswer(
                cancel=result.cancel,
                summary=result.summary,
                custom_instructions=result.custom_instructions,
                replace_instructions=result.replace_instructions,
                label=result.label,
                problems=answer.problems,
            )
            if answer.cancel:
                break
        return answer

    async def tree_changed(
        self,
        new_leaf_id: str | None,
        old_leaf_id: str | None,
        summary_entry: BranchSummaryEntry | None,
        from_extension: bool | None,
    ) -> None:
        store = self._actor.store
        params = TreeHookParams(
            session_id=self._actor.session_id,
            new_leaf_id=new_leaf_id,
            old_leaf_id=old_leaf_id,
            summary_entry=msgspec.Raw(store.raw_line(store.record(summary_entry.id)))
            if summary_entry is not None
            else None,
            from_extension=from_extension,
        )
        for client in self._listeners("session_tree"):
            client.connection.notify("hooks/session_tree", params)
