"""``session/changed``: telling a session's clients what changed in it."""

from __future__ import annotations

from sessiond.service.actor import SessionActor

from .notification_types import ChangeReason, SessionChanged


def announce_change(
    actor: SessionActor, reason: ChangeReason, appended: list[str] | None = None
) -> None:
    actor.publish(
        "session/changed",
        SessionChanged(
            session_id=actor.session_id,
            reason=reason,
            leaf_id=actor.store.leaf_id,
            entry_count=actor.store.entry_count,
            appended_ids=appended or [],
        ),
    )
