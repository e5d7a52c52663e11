"""Forking a session at a user message into a new file (pi's ``fork``)."""

from __future__ import annotations

from dataclasses import dataclass

from sessiond.core.entries import MessageEntry
from sessiond.core.messages import UserMessage, text_of_blocks
from sessiond.errors import InvalidParamsError
from sessiond.store.session import SessionStore

INVALID_FORK_ENTRY = "Invalid entry ID for forking"


@dataclass
class ForkResult:
    store: SessionStore
    selected_text: str


def fork_at_user_message(store: SessionStore, entry_id: str) -> ForkResult:
    """A new session holding the path *before* a user message; its text comes back
    so the editor can offer it again. A root message gives an empty session."""
    entry = store.get_entry(entry_id)
    if not isinstance(entry, MessageEntry) or not isinstance(entry.message, UserMessage):
        raise InvalidParamsError(INVALID_FORK_ENTRY, entryId=entry_id)
    selected_text = text_of_blocks(entry.message.content)
    store.sync()
    if entry.parent_id is None:
        forked = SessionStore.create(
            store.header.cwd,
            session_dir=store.path.parent,
            parent_session=str(store.path),
            storage=store.storage,
        )
    else:
        forked = store.fork(entry.parent_id)
    return ForkResult(forked, selected_text)


def user_messages_for_forking(store: SessionStore) -> list[tuple[str, str]]:
    """pi's ``getUserMessagesForForking``: every user message in the file with text."""
    found: list[tuple[str, str]] = []
    for record in store.records():
        if record.type == "message" and record.role == "user":
            entry = store.entry_of(record)
            if isinstance(entry, MessageEntry) and isinstance(entry.message, UserMessage):
                text = text_of_blocks(entry.message.content)
                if text:
                    found.append((record.id, text))
    return found
