"""Which agent's rules a session file follows: pi's or oh-my-pi's.

A file's dialect is decided once, when it is opened: oh-my-pi 18 starts its files with
its fixed-width title line (``core.title_slot``), pi never does. Everything that differs
between the two agents asks the file's dialect, and nothing else looks at which agent
wrote the file:

- the context at a leaf (pi's ``buildSessionContext``, or oh-my-pi's:
  ``core.omp_context``), and so the token counts and compaction thresholds built on it;
- the provider form of that context (oh-my-pi sends custom messages as ``developer``
  messages, and its blob-store images cannot be sent from here);
- where a compaction's window starts (oh-my-pi: after its latest ``/clear``);
- the entry types a client may append;
- what sessiond writes for a compaction, a branch summary and a name (the title line
  and a ``title_change`` entry on oh-my-pi's files, pi's ``session_info`` on pi's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from .context import SessionContext, context_from_path
from .convert import LlmMessage, convert_to_llm_tracked
from .entries import ENTRY_TYPES, OMP_ONLY_TYPES, PI_ONLY_TYPES, Entry
from .messages import AnyMessage, AssistantMessage
from .omp_context import omp_context_from_path
from .omp_convert import omp_convert_to_llm_tracked
from .path_reader import PathReader, SlicedPath

DialectName: TypeAlias = Literal["pi", "oh-my-pi"]


@dataclass(frozen=True)
class CompactionFields:
    """What a compaction entry says, whichever agent's way it is written."""

    summary: str
    first_kept_entry_id: str
    tokens_before: int
    details: Any = None
    from_extension: bool = False
    short_summary: str | None = None
    preserve_data: dict[str, Any] | None = None
    # pi 1.6: the system prompt and tools replayed at the boundary (JSON), if any
    system_message: dict[str, Any] | None = None


class Dialect:
    """pi's rules (the default for every file without oh-my-pi's title line)."""

    name: DialectName = "pi"
    title_line: bool = False
    appendable_types: frozenset[str] = ENTRY_TYPES - OMP_ONLY_TYPES
    # Whether a compaction entry records the estimated context after it (``tokensAfter``).
    records_tokens_after: bool = False
    # Whether pruning edits tool results in place and rewrites the file (oh-my-pi), or
    # appends ``context_edit`` entries (pi 1.6).
    prunes_in_place: bool = False

    def context_from_path(self, path: Sequence[Entry]) -> SessionContext:
        return context_from_path(path)

    def convert_to_llm_tracked(
        self, messages: Sequence[AnyMessage]
    ) -> list[tuple[LlmMessage, int, bool]]:
        return convert_to_llm_tracked(messages)

    def provider_form(self, messages: Sequence[AnyMessage]) -> list[tuple[LlmMessage, int, bool]]:
        """The ``llm`` form of a context: ``convert_to_llm_tracked`` without the answers
        that failed (an error or an abort), which pi's provider layer never sends."""
        return [
            (message, index, unchanged)
            for message, index, unchanged in self.convert_to_llm_tracked(messages)
            if not (
                isinstance(message, AssistantMessage)
                and message.stop_reason in ("error", "aborted")
            )
        ]

    def compaction_path(self, path: PathReader) -> PathReader:
        """The part of ``path`` a compaction looks at (pi: all of it)."""
        return path

    def compaction_body(
        self, fields: CompactionFields, tokens_after: int | None = None
    ) -> dict[str, Any]:
        """A compaction entry's fields as this agent writes them (without id, parentId and
        timestamp). pi writes ``fromHook`` on every compaction, and sessiond adds
        ``fromExtension`` (oh-my-pi's name) when a hook made it."""
        body: dict[str, Any] = {
            "type": "compaction",
            "summary": fields.summary,
            "firstKeptEntryId": fields.first_kept_entry_id,
            "tokensBefore": fields.tokens_before,
        }
        if fields.details is not None:
            body["details"] = fields.details
        body["fromHook"] = fields.from_extension
        if fields.from_extension:
            body["fromExtension"] = True
        if fields.short_summary is not None:
            body["shortSummary"] = fields.short_summary
        if fields.preserve_data:
            body["preserveData"] = fields.preserve_data
        if fields.system_message is not None:
            body["systemMessage"] = fields.system_message
        return body

    def branch_summary_body(
        self, *, position: str, old_leaf: str, summary: str, details: Any, from_extension: bool
    ) -> dict[str, Any]:
        """A branch summary as pi 1.6 writes it: ``fromId`` is the leaf it summarizes
        from (``position`` is where it is attached; ``"root"`` for none)."""
        body: dict[str, Any] = {"type": "branch_summary", "fromId": old_leaf, "summary": summary}
        if details is not None:
            body["details"] = details
        body["fromHook"] = from_extension
        if from_extension:
            body["fromExtension"] = True
        return body


class OmpDialect(Dialect):
    """oh-my-pi 18's rules, for the files it wrote."""

    name: DialectName = "oh-my-pi"
    title_line = True
    appendable_types = ENTRY_TYPES - PI_ONLY_TYPES - {"title_change"}
    records_tokens_after = True
    prunes_in_place = True

    def context_from_path(self, path: Sequence[Entry]) -> SessionContext:
        return omp_context_from_path(path)

    def convert_to_llm_tracked(
        self, messages: Sequence[AnyMessage]
    ) -> list[tuple[LlmMessage, int, bool]]:
        return omp_convert_to_llm_tracked(messages)

    def provider_form(self, messages: Sequence[AnyMessage]) -> list[tuple[LlmMessage, int, bool]]:
        """oh-my-pi's context keeps no failed answer but one the user interrupted (an
        interrupted-thinking note follows it), and that one it sends."""
        return self.convert_to_llm_tracked(messages)

    def compaction_path(self, path: PathReader) -> PathReader:
        """After the latest ``/clear``: what came before it is no longer the conversation
        (a compaction before it is superseded by it, one after it is kept in view)."""
        for index in range(len(path) - 1, -1, -1):
            if path.type_at(index) == "reset_boundary":
                return SlicedPath(path, index + 1)
        return path

    def compaction_body(
        self, fields: CompactionFields, tokens_after: int | None = None
    ) -> dict[str, Any]:
        """oh-my-pi's ``appendCompaction``: its field order, ``fromExtension`` (a boolean)
        instead of ``fromHook``, the estimated context after it in ``tokensAfter``."""
        body: dict[str, Any] = {"type": "compaction", "summary": fields.summary}
        if fields.short_summary is not None:
            body["shortSummary"] = fields.short_summary
        body["firstKeptEntryId"] = fields.first_kept_entry_id
        body["tokensBefore"] = fields.tokens_before
        if tokens_after is not None:
            body["tokensAfter"] = tokens_after
        if fields.details is not None:
            body["details"] = fields.details
        body["fromExtension"] = fields.from_extension
        if fields.preserve_data:
            body["preserveData"] = fields.preserve_data
        return body

    def branch_summary_body(
        self, *, position: str, old_leaf: str, summary: str, details: Any, from_extension: bool
    ) -> dict[str, Any]:
        """oh-my-pi's ``branchWithSummary``: ``fromId`` is the branch point (the position,
        or "root"), not the leaf left."""
        body: dict[str, Any] = {"type": "branch_summary", "fromId": position, "summary": summary}
        if details is not None:
            body["details"] = details
        body["fromExtension"] = from_extension
        return body


PI: Final = Dialect()
OMP: Final = OmpDialect()


def dialect_for(has_title_line: bool) -> Dialect:
    """The dialect of a file, from whether it starts with oh-my-pi's title line."""
    return OMP if has_title_line else PI
