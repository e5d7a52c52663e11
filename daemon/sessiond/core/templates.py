"""The prompt templates in ``prompts/``, shipped inside the wheel as ``sessiond/prompts``.

A template is Markdown with ``{{name}}`` placeholders. The file's trailing
newline is not part of the text, so a rendered template never ends with one.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def prompts_root() -> Path:
    """The installed ``sessiond/prompts``, or the checkout's ``prompts/`` in development."""
    from importlib import resources  # only when a prompt is read: it costs every start 5 ms

    packaged = resources.files("sessiond") / "prompts"
    if packaged.is_dir():
        return Path(str(packaged))
    # An editable install maps the package to daemon/sessiond; the templates
    # then live at the repository root, three levels above this file.
    return Path(__file__).resolve().parents[3] / "prompts"


@cache
def template(name: str) -> str:
    """The text of ``prompts/<name>.md``."""
    path = prompts_root() / f"{name}.md"
    return path.read_text(encoding="utf-8").rstrip("\n")


def render(name: str, **values: str) -> str:
    """``template(name)`` with each ``{{key}}`` replaced; unknown keys are an error."""
    text = template(name)

    def substitute(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values:
            raise KeyError(f"template {name!r} needs a value for {key!r}")
        return values[key]

    return _PLACEHOLDER.sub(substitute, text)
