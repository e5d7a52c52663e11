"""The current leaf's context on an oh-my-pi file, kept for the store.

The same service as ``leaf_view.LeafView`` (the path as index records, the context,
its thinking level and model, token figures) under oh-my-pi's rules
(``core.omp_context``). The view keeps what those rules read of each entry (a
``Turn``, decoded once per entry), the selection of the entries that give messages and
the settings carried along the path; an append extends both, and only a compaction, a
``/clear`` or a move of the leaf makes it select again. The rules that look at the whole
context (unanswered tool calls, failed answers) then run over the selected entries'
turns, with no message bodies: O(context) after a change, nothing between changes.
Bodies are decoded to build the messages, and to read the usage of the last answer.
"""

from __future__ import annotations

from sessiond.core.context import ModelRef, SessionContext, compaction_summary_message
from sessiond.core.entries import CompactionEntry, CustomEntry, Entry, MessageEntry
from sessiond.core.messages import AnyMessage, TokenUsage
from sessiond.core.omp_context import (
    OmpPlan,
    Selection,
    append_to_plan,
    extend,
    finish,
    materialize,
    select,
)
from sessiond.core.omp_messages import message_of, notes_message, strip_calls
from sessiond.core.omp_settings import OmpSettings, settings_of
from sessiond.core.omp_turns import Turn, turn_of
from sessiond.core.tokens import (
    ContextEstimate,
    Estimator,
    assistant_usage,
    calculate_context_tokens,
)

from .leaf_view import EntryLoader
from .records import EntryRecord

# Entries whose arrival changes where the context starts.
_RESELECT: frozenset[str] = frozenset({"compaction", "reset_boundary"})
_GIVES_MESSAGES: frozenset[str] = frozenset({"message", "custom_message", "branch_summary"})


class OmpLeafView:
    def __init__(self, load: EntryLoader) -> None:
        self._load = load
        self.path: list[EntryRecord] = []
        self._turns: dict[int, Turn | None] = {}
        self._selection: Selection | None = None
        self._settings: OmpSettings | None = None
        self._plan: OmpPlan | None = None
        self._usage: tuple[int, TokenUsage] | None = None
        self._usage_known = False
        # Estimates of messages that are not a record's own (stripped answers, notes).
        self._derived_tokens: dict[tuple[int, str], int] = {}

    def read_with(self, load: EntryLoader) -> None:
        """Read entries with ``load`` from now on (a view prepared in another thread)."""
        self._load = load

    # -- keeping it current

    def reset(self, path: list[EntryRecord]) -> None:
        """A new root-first ``path`` (the leaf moved)."""
        self.path = path
        self._selection = None
        self._settings = None
        self._changed()

    def push(self, record: EntryRecord, entry: Entry) -> None:
        """``record`` (decoded as ``entry``) was appended as a child of the leaf."""
        self.path.append(record)
        index = len(self.path) - 1
        self._turns[id(record)] = turn_of(entry)
        if self._settings is not None:
            self._settings.note(entry)
        if record.type in _RESELECT or self._selection is None:
            self._selection = None
            self._changed()
            return
        notes = self._selection.notes
        extend(self, self._selection, index)
        plan = self._plan
        if plan is None or notes != self._selection.notes:
            self._changed()
        elif self._turns[id(record)] is not None:
            # Most appends change nothing before them: the plan grows by one.
            if not append_to_plan(self, plan, index):
                self._plan = None
            self._usage_known = False

    def _changed(self) -> None:
        self._plan = None
        self._usage = None
        self._usage_known = False

    # -- the OmpPath the rules read

    def __len__(self) -> int:
        return len(self.path)

    def id_at(self, index: int) -> str:
        return self.path[index].id

    def type_at(self, index: int) -> str:
        return self.path[index].type

    def role_at(self, index: int) -> str | None:
        return self.path[index].role

    def entry_at(self, index: int) -> Entry:
        return self._load(self.path[index])

    def turn_at(self, index: int) -> Turn | None:
        record = self.path[index]
        key = id(record)
        if key not in self._turns:
            gives = record.type in _GIVES_MESSAGES
            self._turns[key] = turn_of(self._load(record)) if gives else None
        return self._turns[key]

    def plan(self) -> OmpPlan:
        if self._plan is None:
            if self._selection is None:
                self._selection = select(self)
            self._plan = finish(self, self._selection)
        return self._plan

    def _settings_of(self) -> OmpSettings:
        if self._settings is None:
            self._settings = settings_of(self)
        return self._settings

    # -- reading it

    @property
    def leaf(self) -> EntryRecord | None:
        return self.path[-1] if self.path else None

    @property
    def thinking_level(self) -> str:
        return self._settings_of().thinking_level

    @property
    def model(self) -> ModelRef | None:
        return self._settings_of().model

    def context(self) -> SessionContext:
        return materialize(self, self.plan(), self._settings_of())

    def estimate(self, record: EntryRecord, estimator: Estimator) -> int:
        """The token estimate of a record's own message, cached on the record."""
        cached = record.tokens_chars if estimator.name == "chars" else record.tokens_tiktoken
        if cached is not None:
            return cached
        entry = self._load(record)
        message = _own_message(entry)
        tokens = estimator.estimate(message) if message is not None else 0
        if estimator.name == "chars":
            record.tokens_chars = tokens
        else:
            record.tokens_tiktoken = tokens
        return tokens

    def estimate_context(self, estimator: Estimator, *, fresh: bool = True) -> ContextEstimate:
        """The size of ``context()`` as sessiond measures every context (pi 1.6's
        ``estimateProjectedContextTokens``): the last usable measured usage plus the
        estimates after it, from cached estimates; usage measured before the latest
        compaction describes a context that no longer exists and is ignored (unless not
        ``fresh``: pi 0.73's ``estimateContextTokens``)."""
        plan = self.plan()
        lead = (plan.notes >= 0) + (plan.summary >= 0)
        found = self._last_usage()
        if found is not None and fresh and plan.emitted[found[0]] < plan.kept_before:
            found = None
        if found is None:
            total = self._lead_tokens(plan, estimator)
            total += sum(self._emitted_tokens(plan, i, estimator) for i in plan.emitted)
            return ContextEstimate(total, 0, total, None)
        position, usage = found
        usage_tokens = calculate_context_tokens(usage)
        trailing = sum(
            self._emitted_tokens(plan, i, estimator) for i in plan.emitted[position + 1 :]
        )
        return ContextEstimate(usage_tokens + trailing, usage_tokens, trailing, lead + position)

    @property
    def has_edits(self) -> bool:
        """oh-my-pi's files have no ``context_edit``."""
        return False

    def current_system_message(self) -> None:
        """oh-my-pi has no system messages in its sessions (pi 1.6's checkpoint)."""
        return None

    @property
    def last_usage_record(self) -> EntryRecord | None:
        found = self._last_usage()
        return self.path[self.plan().emitted[found[0]]] if found is not None else None

    def _last_usage(self) -> tuple[int, TokenUsage] | None:
        """The position among the emitted entries of the last answer with usable usage."""
        if self._usage_known:
            return self._usage
        plan = self.plan()
        self._usage = None
        for position in range(len(plan.emitted) - 1, -1, -1):
            turn = self.turn_at(plan.emitted[position])
            if turn is None or turn.role != "assistant":
                continue
            entry = self.entry_at(plan.emitted[position])
            usage = assistant_usage(entry.message) if isinstance(entry, MessageEntry) else None
            if usage is not None:
                self._usage = (position, usage)
                break
        self._usage_known = True
        return self._usage

    def _lead_tokens(self, plan: OmpPlan, estimator: Estimator) -> int:
        total = 0
        if plan.summary >= 0:
            total += self.estimate(self.path[plan.summary], estimator)
        if plan.notes >= 0:
            record = self.path[plan.notes]
            key = (id(record), estimator.name)
            if key not in self._derived_tokens:
                entry = self._load(record)
                assert isinstance(entry, CustomEntry)
                self._derived_tokens[key] = estimator.estimate(notes_message(entry))
            total += self._derived_tokens[key]
        return total

    def _emitted_tokens(self, plan: OmpPlan, index: int, estimator: Estimator) -> int:
        record = self.path[index]
        removed = plan.stripped.get(index)
        if removed is None:
            return self.estimate(record, estimator)
        key = (id(record), f"{estimator.name}:{','.join(sorted(removed))}")
        if key not in self._derived_tokens:
            message = message_of(self._load(record))
            assert message is not None
            self._derived_tokens[key] = estimator.estimate(strip_calls(message, removed)[0])
        return self._derived_tokens[key]


def _own_message(entry: Entry) -> AnyMessage | None:
    """What a record's cached estimate counts: its message, or a compaction's summary
    (the summary text is what every estimator counts of it)."""
    if isinstance(entry, CompactionEntry):
        return compaction_summary_message(entry)
    return message_of(entry)
