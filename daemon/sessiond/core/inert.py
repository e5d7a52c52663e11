"""Text from outside made inert before it is shown: in a terminal, a log, an editor.

Session files, clients and models supply text that sessiond prints (``sessiond tree``,
``info``), logs, and passes on to other clients (``window/logMessage``). Such text may
hold terminal control sequences (an OSC 52 sequence writes the clipboard, ``ESC[2J``
clears the screen), line breaks that start what looks like a line of the daemon's own,
or bidirectional overrides that show text other than what is there. ``inert`` spells
every such character as a visible escape (``\\x1b``, ``\\n``, ``\\u202e``), so the text
reads as what it is and does nothing; ``quoted`` also marks where someone else's words
start and end, so they are never read as the daemon's.
"""

from __future__ import annotations

from typing import Final

# C0 controls, DEL and C1 controls; the Unicode line and paragraph separators; the
# bidirectional embeddings, overrides and isolates.
_CONTROLS: Final = [
    *range(0x00, 0x20),
    *range(0x7F, 0xA0),
    0x2028,
    0x2029,
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
]


def _escape(code: int) -> str:
    named = {0x09: "\\t", 0x0A: "\\n", 0x0D: "\\r"}
    if code in named:
        return named[code]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_ONE_LINE: Final = {code: _escape(code) for code in _CONTROLS}
# Multi-line text (a message shown whole) keeps its line breaks and tabs.
_LINES: Final = {code: escape for code, escape in _ONE_LINE.items() if code not in (0x09, 0x0A)}
_QUOTED: Final = {**_ONE_LINE, ord('"'): '\\"', ord("\\"): "\\\\"}


def inert(text: str, *, keep_lines: bool = False) -> str:
    """``text`` with every control, line-separating and bidirectional character spelled
    as an escape; with ``keep_lines``, newlines and tabs stay (the rest is escaped, a
    carriage return included)."""
    return text.translate(_LINES if keep_lines else _ONE_LINE)


def quoted(text: str, limit: int = 200) -> str:
    """``text`` as a quoted string on one line, at most ``limit`` characters of it (the
    cut marked with ``...``): how sessiond cites words that are not its own."""
    shown = text if len(text) <= limit else text[:limit]
    cut = "..." if len(text) > limit else ""
    return f'"{shown.translate(_QUOTED)}"{cut}'
