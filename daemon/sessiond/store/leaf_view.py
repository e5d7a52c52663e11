"""The current leaf's path and context, kept up to date as entries are appended.

``core.context.context_from_path`` rebuilds a context from a whole path (pi 1.6's
projection); doing that for every request on a 100k-entry path would be far too
slow. This view holds the path as index records and what decides the context (the
latest compaction, the kept records, the latest ``context_edit`` per target, the
last thinking level, the last usable usage), so that an append costs O(1) (an edit:
O(context) once) and building the context costs O(context), with entries decoded
only when a message body is actually needed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from sessiond.core.context import (
    DEFAULT_THINKING_LEVEL,
    ModelRef,
    SessionContext,
    model_of_change,
)
from sessiond.core.entries import (
    CompactionEntry,
    ContextEditEntry,
    Entry,
    MessageEntry,
    ModelChangeEntry,
    ThinkingLevelChangeEntry,
)
from sessiond.core.messages import AnyMessage, AssistantMessage, SystemMessage, TokenUsage
from sessiond.core.projection import entry_messages, project_entry
from sessiond.core.system_state import current_system_message
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


def _is_system(record: EntryRecord) -> bool:
    return record.type == "message" and record.role == "system"


class LeafView:
    def __init__(self, load: EntryLoader) -> None:
        self._load = load
        self.path: list[EntryRecord] = []
        self._compaction: EntryRecord | None = None
        self._context: list[EntryRecord] = []
        self._thinking: EntryRecord | None = None
        self._model: ModelRef | None = None
        # The latest context_edit per target among the context's entries.
        self._edits: dict[str, EntryRecord] = {}
        # Index into _context of the last assistant message with usable usage, or -1.
        self._usage_index = -1
        # How many _context records come before the latest compaction or context_edit on
        # the path: usage measured by an earlier answer is stale (pi 1.6).
        self._stale_before = 0
        # Indices into _context of system messages (their replay is counted once when
        # the measured usage is stale).
        self._system_indices: list[int] = []
        # Running totals over _context, extended lazily and dropped when it is rebuilt:
        # _prefix[key][i] is the total over _context[:i], so a usage figure costs
        # O(records since the last call), not O(context), on every request.
        self._prefix: dict[str, list[int]] = {}

    def read_with(self, load: EntryLoader) -> None:
        """Read entries with ``load`` from now on (a view prepared in another thread)."""
        self._load = load

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
        if isinstance(entry, ContextEditEntry):
            self._edits[entry.target_id] = record
            self._stale_before = len(self._context)
            self._prefix.clear()
            self._find_usage()
            return
        if isinstance(entry, ThinkingLevelChangeEntry):
            self._thinking = record
        elif isinstance(entry, ModelChangeEntry):
            self._model = model_of_change(entry) or self._model
        elif isinstance(entry, MessageEntry) and isinstance(entry.message, AssistantMessage):
            self._model = ModelRef(entry.message.provider, entry.message.model)
        if record.type in CONTEXT_TYPES:
            if _is_system(record):
                self._system_indices.append(len(self._context))
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
        start = 0
        stale_position = -1  # the latest compaction or context_edit on the path
        for index in range(len(path) - 1, -1, -1):
            if path[index].type in ("compaction", "context_edit"):
                stale_position = index
                break
        self._context = []
        self._edits = {}
        self._stale_before = 0
        if compaction is not None:
            position = _last_index(path, compaction)
            entry = self._load(compaction)
            first_kept = entry.first_kept_entry_id if isinstance(entry, CompactionEntry) else None
            kept_from = position
            for index in range(position - 1, -1, -1):
                if path[index].id == first_kept:
                    kept_from = index
                    break
            self._take(path, kept_from, position, stale_position, keep_system=False)
            start = position + 1
            if stale_position == position:
                self._stale_before = len(self._context)
        self._take(path, start, len(path), stale_position, keep_system=True)
        self._system_indices = [i for i, r in enumerate(self._context) if _is_system(r)]
        self._prefix.clear()
        self._find_usage()

    def _take(
        self,
        path: list[EntryRecord],
        start: int,
        end: int,
        stale_position: int,
        *,
        keep_system: bool,
    ) -> None:
        for index in range(start, end):
            record = path[index]
            if index == stale_position:
                self._stale_before = len(self._context)
            if record.type == "context_edit":
                edit = self._load(record)
                if isinstance(edit, ContextEditEntry):
                    self._edits[edit.target_id] = record
            elif record.type in CONTEXT_TYPES and (keep_system or not _is_system(record)):
                self._context.append(record)

    def _find_usage(self) -> None:
        self._usage_index = -1
        for index in range(len(self._context) - 1, -1, -1):
            record = self._context[index]
            if record.role == "assistant" and self._usage_of(record) is not None:
                self._usage_index = index
                break

    def _usage_of(self, record: EntryRecord) -> TokenUsage | None:
        messages = self.messages_of(record)
        return assistant_usage(messages[0]) if messages else None

    def _edit_of(self, record: EntryRecord) -> ContextEditEntry | None:
        edit_record = self._edits.get(record.id) if self._edits else None
        if edit_record is None:
            return None
        edit = self._load(edit_record)
        return edit if isinstance(edit, ContextEditEntry) else None

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

    @property
    def has_edits(self) -> bool:
        """Whether a ``context_edit`` among the context's entries applies."""
        return bool(self._edits)

    def context(self) -> SessionContext:
        context = SessionContext(messages=[], thinking_level=self.thinking_level, model=self._model)
        for record in self.context_records:
            edited = self._edit_of(record) is not None
            for message in self.messages_of(record):
                if edited:
                    context.edited.add(len(context.messages))
                context.messages.append(message)
                context.entry_ids.append(record.id)
        return context

    def messages_of(self, record: EntryRecord) -> list[AnyMessage]:
        """What a record of the context gives it, under its latest edit."""
        return project_entry(self._load(record), self._edit_of(record))

    def message_of(self, record: EntryRecord) -> AnyMessage | None:
        """The message a record gives before any edit (a compaction: its summary)."""
        messages = entry_messages(self._load(record))
        return messages[-1] if messages else None

    def estimate(self, record: EntryRecord, estimator: Estimator) -> int:
        """The token estimate of a record's message before any edit, cached on the record."""
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

    def _context_estimate(self, record: EntryRecord, estimator: Estimator) -> int:
        if self._edits and record.id in self._edits:
            return sum(estimator.estimate(m) for m in self.messages_of(record))
        return self.estimate(record, estimator)

    def estimate_context(self, estimator: Estimator) -> ContextEstimate:
        """pi 1.6's ``estimateProjectedContextTokens`` of ``context()``, from cached
        per-record estimates: the last usable measured usage plus the estimates after
        it, unless that usage was measured before the latest compaction or context
        edit on the path (it describes a context that no longer exists); then the
        estimate of every message, the system messages counted once as their replay."""
        tokens = self._running_total(estimator.name, lambda r: self._context_estimate(r, estimator))
        if self._usage_index >= 0 and self._usage_index >= self._stale_before:
            usage = self._usage_of(self._context[self._usage_index])
            assert usage is not None
            usage_tokens = calculate_context_tokens(usage)
            trailing = tokens[-1] - tokens[self._usage_index + 1]
            message_index = self._message_index(self._usage_index) + self._head_count()
            return ContextEstimate(usage_tokens + trailing, usage_tokens, trailing, message_index)
        total = tokens[-1] - sum(tokens[i + 1] - tokens[i] for i in self._system_indices)
        head = self._compaction
        if head is not None and self._edit_of(head) is None:
            total += self.estimate(head, estimator)
        elif head is not None:
            messages = self.messages_of(head)
            total += sum(
                estimator.estimate(m) for m in messages if not isinstance(m, SystemMessage)
            )
        system = self.current_system_message()
        if system is not None:
            total += estimator.estimate(system)
        return ContextEstimate(total, 0, total, None)

    def _head_count(self) -> int:
        """How many messages the compaction at the head gives (checkpoint and summary)."""
        if self._compaction is None:
            return 0
        return len(self.messages_of(self._compaction))

    def current_system_message(self) -> SystemMessage | None:
        """The system prompt and tools at the leaf: every system message replayed
        (the compaction's checkpoint first), as a compaction stores it."""
        systems: list[AnyMessage] = []
        if self._compaction is not None:
            systems.extend(
                m for m in self.messages_of(self._compaction) if isinstance(m, SystemMessage)
            )
        for index in self._system_indices:
            systems.extend(self.messages_of(self._context[index]))
        return current_system_message(systems)

    def _running_total(self, key: str, value: Callable[[EntryRecord], int]) -> list[int]:
        """``_prefix[key]``, extended to cover every record of ``_context``."""
        totals = self._prefix.setdefault(key, [0])
        for record in self._context[len(totals) - 1 :]:
            totals.append(totals[-1] + value(record))
        return totals

    def _message_index(self, context_index: int) -> int:
        """The message index of ``_context[context_index]`` among ``_context``'s messages:
        records that produce no message (an empty branch summary, an omitted entry) shift it."""
        skipped = self._running_total("silent", self._is_silent)
        return context_index - skipped[context_index]

    def _is_silent(self, record: EntryRecord) -> int:
        if record.type == "branch_summary" or (self._edits and record.id in self._edits):
            return int(not self.messages_of(record))
        return 0

    @property
    def last_usage_record(self) -> EntryRecord | None:
        return self._context[self._usage_index] if self._usage_index >= 0 else None


def _last_index(path: list[EntryRecord], record: EntryRecord) -> int:
    for index in range(len(path) - 1, -1, -1):
        if path[index] is record:
            return index
    raise ValueError("record not on path")
