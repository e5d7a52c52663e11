"""The current leaf's path and context, kept up to date as entries are appended.

``core.context.context_from_path`` rebuilds a context from a whole path; doing
that for every request on a 100k-entry path would be far too slow. This view
holds the path as index records and the positions that decide the context
(the latest compaction, the last thinking level, the last usable usage), so
that an append costs O(1) and building the context costs O(context), with
entries decoded only when a message body is actually needed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from sessiond.core.context import (
    DEFAULT_THINKING_LEVEL,
    ModelRef,
    SessionContext,
    compaction_summary_message,
    message_of_entry,
    model_of_change,
)
from sessiond.core.entries import (
    CompactionEntry,
    Entry,
    MessageEntry,
    ModelChangeEntry,
    ThinkingLevelChangeEntry,
)
from sessiond.core.messages import AnyMessage, AssistantMessage, Usage
from sessiond.core.tokens import (
    ContextEstimate,
    Estimator,
    assistant_usage,
    calculate_context_tokens,
)

from .records import EntryRecord

# Entry types that can contribute a message to the context.
CONTEXT_TYPES: Final = frozenset({"message", "custom_message", "branch_summary"})

EntryLoader = Callable[[EntryRecord], Entry]


class LeafView:
    def __init__(self, load: EntryLoader) -> None:
        self._load = load
        self.path: list[EntryRecord] = []
        self._compaction: EntryRecord | None = None
        self._context: list[EntryRecord] = []
        self._thinking: EntryRecord | None = None
        self._model: ModelRef | None = None
        # Index into _context of the last assistant message with usable usage, or -1.
        self._usage_index = -1
        # Running totals over _context, extended lazily and dropped when it is rebuilt:
        # _prefix[key][i] is the total over _context[:i], so a usage figure costs
        # O(records since the last call), not O(context), on every request.
        self._prefix: dict[str, list[int]] = {}
        self._kept_count = 0

    # -- keeping it current

    def reset(self, path: list[EntryRecord]) -> None:
        """Recompute everything for a new root-first ``path`` (the leaf moved)."""
        self.path = path
        self._compaction = next((r for r in reversed(path) if r.type == "compaction"), None)
        self._thinking = next(
            (r for r in reversed(path) if r.type == "thinking_level_change"), None
        )
        self._model = self._find_model()
        self._rebuild_context()

    def push(self, record: EntryRecord, entry: Entry) -> None:
        """``record`` (decoded as ``entry``) was appended as a child of the leaf."""
        self.path.append(record)
        if isinstance(entry, CompactionEntry):
            self._compaction = record
            self._rebuild_context()
            return
        if isinstance(entry, ThinkingLevelChangeEntry):
            self._thinking = record
        elif isinstance(entry, ModelChangeEntry):
            self._model = model_of_change(entry) or self._model
        elif isinstance(entry, MessageEntry) and isinstance(entry.message, AssistantMessage):
            self._model = ModelRef(entry.message.provider, entry.message.model)
        if record.type in CONTEXT_TYPES:
            self._context.append(record)
            if isinstance(entry, MessageEntry) and assistant_usage(entry.message) is not None:
                self._usage_index = len(self._context) - 1

    def _find_model(self) -> ModelRef | None:
        for record in reversed(self.path):
            if record.type == "model_change":
                entry = self._load(record)
                if isinstance(entry, ModelChangeEntry):
                    model = model_of_change(entry)
                    if model is not None:
                        return model
            elif record.type == "message" and record.role == "assistant":
                entry = self._load(record)
                if isinstance(entry, MessageEntry) and isinstance(entry.message, AssistantMessage):
                    return ModelRef(entry.message.provider, entry.message.model)
        return None

    def _rebuild_context(self) -> None:
        path = self.path
        compaction = self._compaction
        # Records of _context kept from before the latest compaction (they come first).
        self._kept_count = 0
        if compaction is None:
            self._context = [r for r in path if r.type in CONTEXT_TYPES]
        else:
            position = _last_index(path, compaction)
            entry = self._load(compaction)
            first_kept = entry.first_kept_entry_id if isinstance(entry, CompactionEntry) else None
            kept_from = position
            for index in range(position - 1, -1, -1):
                if path[index].id == first_kept:
                    kept_from = index
                    break
            self._context = [r for r in path[kept_from:position] if r.type in CONTEXT_TYPES]
            self._kept_count = len(self._context)
            self._context += [r for r in path[position + 1 :] if r.type in CONTEXT_TYPES]
        self._prefix.clear()
        self._usage_index = -1
        for index in range(len(self._context) - 1, -1, -1):
            record = self._context[index]
            if record.role == "assistant" and self._usage_of(record) is not None:
                self._usage_index = index
                break

    def _usage_of(self, record: EntryRecord) -> Usage | None:
        entry = self._load(record)
        if isinstance(entry, MessageEntry):
            return assistant_usage(entry.message)
        return None

    # -- reading it

    @property
    def leaf(self) -> EntryRecord | None:
        return self.path[-1] if self.path else None

    @property
    def context_records(self) -> list[EntryRecord]:
        """The compaction (if any), then the records whose messages follow its summary."""
        head = [self._compaction] if self._compaction is not None else []
        return head + self._context

    @property
    def thinking_level(self) -> str:
        if self._thinking is None:
            return DEFAULT_THINKING_LEVEL
        entry = self._load(self._thinking)
        if isinstance(entry, ThinkingLevelChangeEntry) and entry.thinking_level:
            return entry.thinking_level
        return DEFAULT_THINKING_LEVEL

    @property
    def model(self) -> ModelRef | None:
        return self._model

    def context(self) -> SessionContext:
        context = SessionContext(messages=[], thinking_level=self.thinking_level, model=self._model)
        for record in self.context_records:
            message = self.message_of(record)
            if message is not None:
                context.messages.append(message)
                context.entry_ids.append(record.id)
        return context

    def message_of(self, record: EntryRecord) -> AnyMessage | None:
        entry = self._load(record)
        if isinstance(entry, CompactionEntry):
            return compaction_summary_message(entry)
        return message_of_entry(entry)

    def estimate(self, record: EntryRecord, estimator: Estimator) -> int:
        """The token estimate of a record's message, cached on the record."""
        cached = record.tokens_chars if estimator.name == "chars" else record.tokens_tiktoken
        if cached is not None:
            return cached
        message = self.message_of(record)
        tokens = estimator.estimate(message) if message is not None else 0
        if estimator.name == "chars":
            record.tokens_chars = tokens
        else:
            record.tokens_tiktoken = tokens
        return tokens

    def estimate_context(self, estimator: Estimator, *, fresh: bool = False) -> ContextEstimate:
        """``estimate_context_tokens`` of ``context()``, from cached per-record estimates.

        With ``fresh``, usage measured before the latest compaction is ignored: the
        kept messages still carry it, but it describes the context before the
        summary replaced the rest (pi's own formula counts it; ``tokensBefore``
        keeps that for parity, the live usage figures do not)."""
        usable = self._usage_index >= 0 and not (fresh and self._usage_index < self._kept_count)
        tokens = self._running_total(estimator.name, lambda r: self.estimate(r, estimator))
        if not usable:
            trailing = tokens[-1]
            if self._compaction is not None:
                trailing += self.estimate(self._compaction, estimator)
            return ContextEstimate(trailing, 0, trailing, None)
        usage = self._usage_of(self._context[self._usage_index])
        assert usage is not None
        usage_tokens = calculate_context_tokens(usage)
        trailing = tokens[-1] - tokens[self._usage_index + 1]
        offset = 1 if self._compaction is not None else 0
        message_index = self._message_index(self._usage_index) + offset
        return ContextEstimate(usage_tokens + trailing, usage_tokens, trailing, message_index)

    def _running_total(self, key: str, value: Callable[[EntryRecord], int]) -> list[int]:
        """``_prefix[key]``, extended to cover every record of ``_context``."""
        totals = self._prefix.setdefault(key, [0])
        for record in self._context[len(totals) - 1 :]:
            totals.append(totals[-1] + value(record))
        return totals

    def _message_index(self, context_index: int) -> int:
        """The message index of ``_context[context_index]`` among ``_context``'s messages:
        records that produce no message (an empty branch summary) shift it."""
        skipped = self._running_total("silent", self._is_silent)
        return context_index - skipped[context_index]

    def _is_silent(self, record: EntryRecord) -> int:
        return int(record.type == "branch_summary" and self.message_of(record) is None)

    @property
    def last_usage_record(self) -> EntryRecord | None:
        return self._context[self._usage_index] if self._usage_index >= 0 else None


def _last_index(path: list[EntryRecord], record: EntryRecord) -> int:
    for index in range(len(path) - 1, -1, -1):
        if path[index] is record:
            return index
    raise ValueError("record not on path")
