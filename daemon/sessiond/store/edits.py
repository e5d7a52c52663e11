"""pi 1.6's checks for a ``context_edit`` appended through ``session/append``.

The target must be an entry on the current path whose message the model sees (a
user, assistant or tool-result message, or a custom message): pi's
``appendContextEdit`` refuses anything else. A string replacing an answer's or a
tool result's content is stored as one text block, as pi stores it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from sessiond.errors import InvalidEntryError, NotFoundError

from .records import EntryRecord

EDITABLE_ROLES: Final = frozenset({"user", "assistant", "toolResult", "custom"})
_MISSING: Final = object()


def editable_role(record: EntryRecord) -> str | None:
    """The role an edit of this entry would change (a custom message's is ``custom``)."""
    if record.type == "custom_message":
        return "custom"
    return record.role if record.type == "message" else None


def edit_replacement(
    fields: Mapping[str, Any],
    where: str,
    index: int,
    find: Callable[[str], EntryRecord | None],
    on_path: set[str],
    batch: Mapping[str, str | None],
) -> Any:
    """The ``replacement`` to store for an edit with these fields, or an error.

    ``batch`` maps the ids appended earlier in the same batch to their editable role."""
    target = fields.get("targetId")
    replacement = fields.get("replacement", _MISSING)
    if not isinstance(target, str):
        raise InvalidEntryError(f"{where}: a context_edit needs a string `targetId`", index=index)
    if replacement is _MISSING:
        raise InvalidEntryError(
            f"{where}: a context_edit needs `replacement`: null to omit the target, or "
            "{content} to replace its content",
            index=index,
        )
    if target in batch:
        role = batch[target]
    else:
        record = find(target)
        if record is None:
            raise NotFoundError(f"Entry {target} not found", entryId=target, index=index)
        if target not in on_path:
            raise InvalidEntryError(
                f"{where}: entry {target} is not on the active branch", index=index
            )
        role = editable_role(record)
    if role not in EDITABLE_ROLES:
        raise InvalidEntryError(
            f"{where}: entry {target} does not contribute editable model content", index=index
        )
    if (
        isinstance(replacement, Mapping)
        and isinstance(replacement.get("content"), str)
        and role in ("assistant", "toolResult")
    ):
        return {**replacement, "content": [{"type": "text", "text": replacement["content"]}]}
    return replacement
