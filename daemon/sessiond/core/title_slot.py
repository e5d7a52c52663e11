"""oh-my-pi's title line: the fixed-width first line of its session files.

oh-my-pi 18 starts a session file with one line of exactly 256 bytes (newline included)
before the session header: ``{"type":"title","v":1,"title":...,"source"?:"auto"|"user",
"updatedAt":...,"pad":"   ..."}``. The spaces in ``pad`` keep the width fixed, so a
rename rewrites those 256 bytes in place instead of the whole file. The title in it is
the session's name; a file that has it was written by oh-my-pi.

A first line whose ``type`` is ``"title"`` but that is not a valid title line is no
session file oh-my-pi would open either (it then finds no header first).
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

import msgspec

from .jsjson import js_trim

TITLE_SLOT_BYTES: Final = 256
TITLE_SLOT_TYPE: Final = "title"
TITLE_SOURCES: Final = frozenset({"auto", "user"})
# What oh-my-pi turns into spaces before it keeps a title: C0 and C1 control characters.
_CONTROL: Final = re.compile("[\u0000-\u001f\u007f-\u009f]")
_SPACES: Final = re.compile(" +")


class InvalidTitleSlot(ValueError):
    """A first line that claims to be the title line and is not a valid one."""


class TitleSlot(msgspec.Struct, frozen=True, kw_only=True):
    """The title line as read: its fields and its length in bytes (newline included)."""

    title: str
    updated_at: str
    source: str | None = None
    length: int = TITLE_SLOT_BYTES


def claims_title_slot(value: Any) -> bool:
    """Whether a decoded first line says it is a title line."""
    return isinstance(value, dict) and value.get("type") == TITLE_SLOT_TYPE


def parse_title_slot(value: dict[str, Any], length: int) -> TitleSlot:
    """The title line's fields, checked as oh-my-pi checks them (``length`` is the line's
    size in bytes with its newline). Raises ``InvalidTitleSlot`` naming what is wrong."""
    version = value.get("v")
    if version != 1 or isinstance(version, bool):
        raise InvalidTitleSlot('its "v" is not 1')
    for key in ("title", "updatedAt", "pad"):
        if not isinstance(value.get(key), str):
            raise InvalidTitleSlot(f'its "{key}" is not a string')
    source = value.get("source")
    if source is not None and source not in TITLE_SOURCES:
        raise InvalidTitleSlot('its "source" is neither "auto" nor "user"')
    if "source" in value and source is None:
        raise InvalidTitleSlot('its "source" is null')
    return TitleSlot(
        title=value["title"], updated_at=value["updatedAt"], source=source, length=length
    )


def clean_title(raw: str) -> str:
    """A name as oh-my-pi keeps it: control characters become spaces, runs of spaces one,
    and the ends are trimmed (JavaScript's ``trim``)."""
    return js_trim(_SPACES.sub(" ", _CONTROL.sub(" ", raw)))


def serialize_title_slot(title: str, source: str | None, updated_at: str) -> bytes:
    """The title line for a name: exactly ``TITLE_SLOT_BYTES`` with its newline, the title
    cut (at a character) to the longest beginning that fits, the rest padded with spaces,
    as oh-my-pi writes it. Raises ``ValueError`` if even an empty title does not fit."""
    characters = list(title)
    low, high, fitting = 0, len(characters), ""
    while low <= high:
        middle = (low + high) // 2
        candidate = "".join(characters[:middle])
        if len(_slot_line(candidate, source, updated_at, "")) <= TITLE_SLOT_BYTES:
            fitting, low = candidate, middle + 1
        else:
            high = middle - 1
    padding = TITLE_SLOT_BYTES - len(_slot_line(fitting, source, updated_at, ""))
    if padding < 0:
        raise ValueError("the title line's fields do not fit in its fixed width")
    line = _slot_line(fitting, source, updated_at, " " * padding)
    assert len(line) == TITLE_SLOT_BYTES
    return line


def _slot_line(title: str, source: str | None, updated_at: str, pad: str) -> bytes:
    fields: dict[str, Any] = {"type": TITLE_SLOT_TYPE, "v": 1, "title": title}
    if source:
        fields["source"] = source
    fields["updatedAt"] = updated_at
    fields["pad"] = pad
    # JSON.stringify's output: no spaces, non-ASCII characters as they are.
    text = json.dumps(fields, ensure_ascii=False, separators=(",", ":"))
    return (text + "\n").encode("utf-8", "replace")
