"""Each benchmark owns one marked section of bench/README.md and rewrites only that."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

README = Path(__file__).resolve().parent / "README.md"


def write_section(name: str, command: str, body: str, conditions: str = "") -> None:
    """Replace the ``<!-- NAME:begin -->``…``<!-- NAME:end -->`` section (appended if absent)
    with ``body`` under a line saying when, where and by which command it was measured."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    extra = f", {conditions}" if conditions else ""
    section = (
        f"{begin}\n_Measured {time.strftime('%Y-%m-%d')} on {machine} by `{command}`{extra}._"
        f"\n\n{body}\n{end}"
    )
    text = README.read_text() if README.exists() else ""
    if begin in text and end in text:
        before, _, rest = text.partition(begin)
        text = before + section + rest.partition(end)[2]
    else:
        text += "\n" + section + "\n"
    README.write_text(text)
