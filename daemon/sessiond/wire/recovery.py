"""What opening a session found and repaired: the recovery report ``session/open`` returns."""

from __future__ import annotations

import msgspec


class DamagedLine(msgspec.Struct, rename="camel", kw_only=True):
    """A line in the middle of the file that is not an entry. It stays in the file."""

    line: int  # 1-based line number
    offset: int  # byte offset of the line
    length: int
    reason: str
    preview: str  # the first bytes, escaped, for a human to recognise it


class TornTail(msgspec.Struct, rename="camel", kw_only=True):
    """An unfinished last line (a crash mid-write), cut off and saved aside.

    The ``.corrupt`` file keeps the removed bytes, up to ``MAX_LINE_BYTES`` of them: a
    longer tail cannot be an entry (sessiond reads no longer line), and copying
    gigabytes of it (a sparse file's zeros, say) would stall the open and fill the
    disk. ``length - saved_bytes`` bytes are then dropped, and the report says so.
    """

    offset: int
    length: int
    saved_to: str | None  # the .corrupt file holding the removed bytes; None if not repaired
    preview: str
    # How many of the ``length`` bytes the .corrupt file holds: all of them, or the first
    # MAX_LINE_BYTES of a longer tail; 0 when not repaired (a read-only open).
    saved_bytes: int = 0
    # The tail was nothing but NUL bytes: what a filesystem leaves when a crash came
    # after the file grew but before its data was written.
    all_nul: bool = False


class RecoveryReport(msgspec.Struct, rename="camel", kw_only=True, omit_defaults=True):
    torn_tail: TornTail | None = None
    damaged_lines: list[DamagedLine] = msgspec.field(default_factory=list)
    # Lines with invalid UTF-8, read with replacement characters as pi reads them:
    # found while opening (in an entry's id or type) or when a body was first read.
    invalid_utf8_lines: list[int] = msgspec.field(default_factory=list)
    invalid_utf8_entries: list[str] = msgspec.field(default_factory=list)
    # Entries whose JSON holds a UTF-16 surrogate escape without its pair (JavaScript
    # writes one for a string cut inside an emoji), read with U+FFFD in its place.
    lone_surrogate_entries: list[str] = msgspec.field(default_factory=list)
    # Entries whose id appears more than once; the later line wins, as in pi.
    duplicate_ids: list[str] = msgspec.field(default_factory=list)
    # Entries that are JSON but not readable as their type; they stay in the tree inert.
    unreadable_entries: list[str] = msgspec.field(default_factory=list)
    blank_lines: int = 0
    missing_final_newline: bool = False
    migrated_from_version: int | None = None
    byte_order_mark: bool = False

    @property
    def repaired(self) -> bool:
        """True when opening changed the file (a torn tail cut, a migration)."""
        return (
            self.torn_tail is not None and self.torn_tail.saved_to is not None
        ) or self.migrated_from_version is not None

    @property
    def clean(self) -> bool:
        return self == RecoveryReport()


def preview_of(data: bytes | bytearray, limit: int = 80) -> str:
    """A short printable rendering of raw bytes."""
    shown = data[:limit].decode("utf-8", "backslashreplace")
    escaped = shown.encode("unicode_escape").decode("ascii")
    return escaped + ("..." if len(data) > limit else "")
