"""Forking a session at a user message into a new file (pi's ``fork``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sessiond.core.entries import MessageEntry
from sessiond.core.messages import UserMessage, text_of_blocks
from sessiond.errors import InvalidParamsError
from sessiond.store.session import SessionStore

INVALID_FORK_ENTRY = "Invalid entry ID for forking"


@dataclass
class ForkedStore:
    store: SessionStore
    selected_text: str


@dataclass
class ForkJob:
    """A fork decided where the store is used (memory only); ``make`` does its file work
    (copying the path into a new file) in any thread, without the store."""

    selected_text: str
    make: Callable[[], SessionStore]


def fork_job(store: SessionStore, entry_id: str) -> ForkJob:
    """pi's ``fork``: a new session holding the path *before* a user message; its text
    comes back so the editor can offer it again. A root message gives an empty session."""
    entry = store.get_entry(entry_id)
    if not isinstance(entry, MessageEntry) or not isinstance(entry.message, UserMessage):
        raise InvalidParamsError(INVALID_FORK_ENTRY, entryId=entry_id)
    selected_text = text_of_blocks(entry.message.content)
    store.sync()
    if entry.parent_id is None:
        cwd, directory, parent, storage = (
            store.header.cwd,
            store.path.parent,
            str(store.path),
            store.storage,
        )
        return ForkJob(
            selected_text,
            lambda: SessionStore.create(
                cwd, session_dir=directory, parent_session=parent, storage=storage
            ),
        )
    plan = store.fork_plan(entry.parent_id)
    return ForkJob(selected_text, lambda: SessionStore.from_fork(plan))


def fork_at_user_message(store: SessionStore, entry_id: str) -> ForkedStore:
    """``fork_job`` done at once (for callers without an event loop)."""
    job = fork_job(store, entry_id)
    return ForkedStore(job.make(), job.selected_text)


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
