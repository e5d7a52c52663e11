"""The in-memory index of a session file: one small record per entry line.

Opening a 100k-entry session must not decode 100k message bodies, so the
index holds only what the tree needs (id, parent, type, role, timestamp) and
where the line is in the file. Bodies are decoded on demand.
"""

from __future__ import annotations

from sessiond.core.entries import Entry


class EntryRecord:
    """One entry line: identity, tree links, position in the file, caches."""

    __slots__ = (
        "entry",
        "id",
        "length",
        "offset",
        "parent_id",
        "role",
        "timestamp",
        "tokens_chars",
        "tokens_tiktoken",
        "type",
        "utf8_repaired",
    )

    def __init__(
        self,
        entry_id: str,
        parent_id: str | None,
        entry_type: str,
        role: str | None,
        timestamp: str,
        offset: int,
        length: int,
    ) -> None:
        self.id = entry_id
        self.parent_id = parent_id
        self.type = entry_type
        # The message role of a "message" entry (read with the envelope, no body decode).
        self.role = role
        self.timestamp = timestamp
        # Byte offset of the line in the file and its length without the newline;
        # offset -1 while the entry exists only in memory (a session not yet written).
        self.offset = offset
        self.length = length
        # Decoded entry, kept only for small metadata entries; see SessionStore.entry().
        self.entry: Entry | None = None
        self.tokens_chars: int | None = None
        self.tokens_tiktoken: int | None = None
        # The line had invalid UTF-8; it was read with replacement characters, as pi does.
        self.utf8_repaired = False

    def __repr__(self) -> str:
        return f"EntryRecord({self.type}:{self.id} parent={self.parent_id} @ {self.offset})"

    def is_root_like(self, known: dict[str, EntryRecord]) -> bool:
        """pi's getTree: a root is parentless, self-parented, or an orphan."""
        return self.parent_id is None or self.parent_id == self.id or self.parent_id not in known
