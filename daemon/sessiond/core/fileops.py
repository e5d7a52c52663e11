"""File-operation tracking: which files the summarized work read and changed.

The summary gets ``<read-files>`` and ``<modified-files>`` tags, one path per
line, blocks separated by a blank line (pi's form; oh-my-pi's template joins
paths with a literal backslash-n and runs the blocks together). Existing tags in a summary
are replaced rather than appended to, so a summarizer that echoes the previous
summary's tags does not make them pile up.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from .messages import AnyMessage, AssistantMessage, ToolCall, ToolResultMessage

_TAG_OPENING: Final = re.compile(r"<(read-files|modified-files)>")
# The file tools whose calls are tracked: pi's own (``read``, ``write``, ``edit`` with a
# ``path``: pi's rule exactly), and Claude Code's under their exact names and argument
# (``Read``, ``Write``, ``Edit``, ``MultiEdit`` with a ``file_path``; the notebook tools
# with a ``notebook_path``), so that a session imported from Claude Code
# (``sessiond import claude-code``) lists its files. pi itself tracks only its own.
_FILE_TOOLS: Final[dict[str, tuple[str, str]]] = {
    "read": ("read", "path"),
    "write": ("write", "path"),
    "edit": ("edit", "path"),
    "Read": ("read", "file_path"),
    "NotebookRead": ("read", "notebook_path"),
    "Write": ("write", "file_path"),
    "Edit": ("edit", "file_path"),
    "MultiEdit": ("edit", "file_path"),
    "NotebookEdit": ("edit", "notebook_path"),
}


@dataclass
class FileOps:
    read: set[str] = field(default_factory=set)
    written: set[str] = field(default_factory=set)
    edited: set[str] = field(default_factory=set)

    def add_details(self, details: Any) -> None:
        """Seed from an earlier summary's ``details`` (``readFiles`` / ``modifiedFiles``)."""
        if not isinstance(details, dict):
            return
        self.read.update(_paths(details.get("readFiles")))
        self.edited.update(_paths(details.get("modifiedFiles")))

    def add_message(self, message: AnyMessage) -> None:
        """The file tool calls (``_FILE_TOOLS``) of an assistant message, or those recorded
        on a tool result as ``nestedCalls`` (pi 1.6: calls a codemode script made)."""
        if isinstance(message, ToolResultMessage):
            nested = message.nested_calls
            calls = nested.get("calls") if isinstance(nested, dict) else None
            for call in calls if isinstance(calls, list) else ():
                if isinstance(call, dict):
                    self._add(call.get("name"), call.get("arguments"))
            return
        if not isinstance(message, AssistantMessage):
            return
        for block in message.content:
            if isinstance(block, ToolCall):
                self._add(block.name, block.arguments)

    def _add(self, name: Any, arguments: Any) -> None:
        if not isinstance(arguments, dict) or not isinstance(name, str):
            return
        kind, key = _FILE_TOOLS.get(name, ("", ""))
        path = arguments.get(key) if kind else None
        if not isinstance(path, str) or not path:
            return
        if kind == "read":
            self.read.add(path)
        elif kind == "write":
            self.written.add(path)
        elif kind == "edit":
            self.edited.add(path)

    def lists(self) -> tuple[list[str], list[str]]:
        """``(readFiles, modifiedFiles)``: read-only files, then written or edited ones."""
        modified = self.edited | self.written
        return _js_sorted(self.read - modified), _js_sorted(modified)


def _paths(value: Any) -> Iterable[str]:
    if isinstance(value, list):
        return (item for item in value if isinstance(item, str))
    return ()


def _js_sorted(paths: Iterable[str]) -> list[str]:
    # JavaScript's default sort compares UTF-16 code units.
    return sorted(paths, key=lambda path: path.encode("utf-16-be", "surrogatepass"))


def format_file_tags(read_files: list[str], modified_files: list[str]) -> str:
    """The tag blocks, or "" when there are no files."""
    blocks: list[str] = []
    if read_files:
        blocks.append("<read-files>\n" + "\n".join(read_files) + "\n</read-files>")
    if modified_files:
        blocks.append("<modified-files>\n" + "\n".join(modified_files) + "\n</modified-files>")
    return "\n\n".join(blocks)


def strip_file_tags(text: str) -> str:
    """``text`` without its ``<read-files>``/``<modified-files>`` blocks (each from the
    whitespace before its opening tag to the first matching closing tag).

    Summaries are a model's or a session file's text, so this runs in linear time: the
    regular expression it replaces rescanned to the end from every whitespace character
    and every opening tag without a closing one (100 KB of spaces took 44 s).
    """
    kept: list[str] = []
    position = 0
    unclosed: set[str] = set()  # no closing tag after here; nor after any later opening
    for opening in _TAG_OPENING.finditer(text):
        name = opening.group(1)
        if opening.start() < position or name in unclosed:
            continue
        closing = text.find(f"</{name}>", opening.end())
        if closing < 0:
            unclosed.add(name)
            continue
        start = opening.start()
        while start > position and text[start - 1].isspace():
            start -= 1
        kept.append(text[position:start])
        position = closing + len(name) + 3
    kept.append(text[position:])
    return "".join(kept)


def with_file_tags(summary: str, read_files: list[str], modified_files: list[str]) -> str:
    """``summary`` with its file tags replaced by the given lists."""
    stripped = strip_file_tags(summary).rstrip()
    tags = format_file_tags(read_files, modified_files)
    if not tags:
        return stripped
    return f"{stripped}\n\n{tags}" if stripped else tags
