"""The entry as it was written, before pruning took its tool output out: the entry itself
where pruning appended a context edit, its archived line where pruning edited it in place
(``prunedAt``, whatever the file's dialect: older sessiond pruned pi's files that way too).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sessiond.store.pruned_archive import archive_path, pruned_keys, read_original
from sessiond.store.session import SessionStore


@dataclass(frozen=True)
class OriginalLookup:
    # The entry's line in the session file.
    line: bytes
    # For an entry pruned in place: the file work that reads its original from the
    # archive (any thread; as big as the archive, so not where clients are served).
    from_archive: Callable[[], bytes] | None


def original_lookup(store: SessionStore, entry_id: str) -> OriginalLookup:
    """Where the original of ``entry_id`` is (``notFound`` for an unknown id)."""
    line = store.raw_line(store.record(entry_id))
    keys = pruned_keys(line)
    if keys is None:
        return OriginalLookup(line, None)
    archive = archive_path(store.path)
    return OriginalLookup(line, lambda: read_original(archive, keys))
