"""A path seen through pi 1.6's projection, for the compaction algorithms.

pi 1.6 chooses cut points and collects what to summarize on the projected context
(``core.projection``): the latest compaction first, the entries it kept (system
messages left out), then everything after it, each entry under its latest
``context_edit``. ``ProjectedPath`` presents that list over a ``PathReader`` without
decoding the bodies it does not need: roles come from the index, estimates from
its caches, and only compactions, edits, branch summaries and edited entries are
decoded.
"""

from __future__ import annotations

from functools import cached_property

from .entries import BranchSummaryEntry, CompactionEntry, ContextEditEntry, Entry
from .messages import AnyMessage, SystemMessage, message_role
from .path_reader import PathReader
from .projection import project_entry
from .system_state import current_system_message
from .tokens import ContextEstimate, Estimator, estimate_projected_context_tokens


class ProjectedPath:
    """Index ``k`` is the k-th entry of the projection; ``position(k)`` its place on the path."""

    def __init__(self, path: PathReader, estimator: Estimator) -> None:
        self.path = path
        self.estimator = estimator
        size = len(path)
        compaction_index = next(
            (i for i in range(size - 1, -1, -1) if path.type_at(i) == "compaction"), -1
        )
        positions: list[int]
        if compaction_index < 0:
            positions = list(range(size))
        else:
            compaction = path.entry_at(compaction_index)
            first_kept = (
                compaction.first_kept_entry_id if isinstance(compaction, CompactionEntry) else None
            )
            # Searched back from the compaction: the kept region is near it, the path long.
            kept_from = next(
                (i for i in range(compaction_index - 1, -1, -1) if path.id_at(i) == first_kept),
                compaction_index,
            )
            positions = [compaction_index]
            for index in range(kept_from, compaction_index):
                system = path.type_at(index) == "message" and path.role_at(index) == "system"
                if not system:
                    positions.append(index)
            positions.extend(range(compaction_index + 1, size))
        self._positions = positions
        self.compaction_index = compaction_index
        self._edits: dict[str, ContextEditEntry] = {}
        for position in positions:
            if path.type_at(position) == "context_edit":
                edit = path.entry_at(position)
                if isinstance(edit, ContextEditEntry):
                    self._edits[edit.target_id] = edit
        # The latest entry on the whole path that makes earlier measured usage stale.
        self.latest_invalidating = next(
            (
                i
                for i in range(size - 1, -1, -1)
                if path.type_at(i) in ("context_edit", "compaction")
            ),
            -1,
        )
        self._messages: dict[int, list[AnyMessage]] = {}

    def __len__(self) -> int:
        return len(self._positions)

    def position(self, k: int) -> int:
        return self._positions[k]

    def id_at(self, k: int) -> str:
        return self.path.id_at(self._positions[k])

    def type_at(self, k: int) -> str:
        return self.path.type_at(self._positions[k])

    def entry_at(self, k: int) -> Entry:
        return self.path.entry_at(self._positions[k])

    def edit_at(self, k: int) -> ContextEditEntry | None:
        if not self._edits:
            return None
        return self._edits.get(self.id_at(k))

    @property
    def has_edits(self) -> bool:
        return bool(self._edits)

    def messages_at(self, k: int) -> list[AnyMessage]:
        """The messages the k-th entry gives the context (an older compaction gives none)."""
        cached = self._messages.get(k)
        if cached is None:
            if k > 0 and self.type_at(k) == "compaction":
                cached = []
            else:
                cached = project_entry(self.entry_at(k), self.edit_at(k))
            self._messages[k] = cached
        return cached

    def roles_at(self, k: int) -> tuple[str, ...]:
        """The roles of ``messages_at(k)``, from the index where it can tell."""
        kind = self.type_at(k)
        edit = self.edit_at(k)
        if edit is not None and edit.replacement is None:
            return ()
        position = self._positions[k]
        if kind == "message":
            role = self.path.role_at(position)
            if role is not None:
                return (role,)
        elif kind == "custom_message":
            return ("custom",)
        elif kind not in ("branch_summary", "compaction") and kind != "":
            return ()
        return tuple(message_role(m) for m in self.messages_at(k))

    def intrinsically_visible(self, k: int) -> bool:
        """Whether the entry gives a message before any edit (pi's raw projection)."""
        kind = self.type_at(k)
        if kind in ("message", "custom_message", "compaction"):
            return True
        if kind == "branch_summary":
            entry = self.entry_at(k)
            return isinstance(entry, BranchSummaryEntry) and bool(entry.summary)
        return False

    def tokens_at(self, k: int) -> int:
        """The estimate of everything the k-th entry gives (cached estimates when unedited)."""
        kind = self.type_at(k)
        if kind == "compaction":
            if k > 0:
                return 0
            if self.edit_at(k) is None:
                entry = self.entry_at(k)
                system = entry.system_message if isinstance(entry, CompactionEntry) else None
                extra = self.estimator.estimate(system) if system is not None else 0
                return self.path.tokens_at(self._positions[k]) + extra
        elif self.edit_at(k) is None:
            return self.path.tokens_at(self._positions[k])
        return sum(self.estimator.estimate(m) for m in self.messages_at(k))

    @cached_property
    def previous_compaction(self) -> CompactionEntry | None:
        """The compaction the projection starts with, when it gives its summary."""
        if self.compaction_index < 0 or not self.messages_at(0):
            return None
        entry = self.entry_at(0)
        return entry if isinstance(entry, CompactionEntry) else None

    def context_messages(self) -> tuple[list[AnyMessage], list[int]]:
        """Every projected message and the path position of the entry it came from."""
        messages: list[AnyMessage] = []
        positions: list[int] = []
        for k in range(len(self)):
            if not self.roles_at(k) and self.type_at(k) != "message":
                continue
            for message in self.messages_at(k):
                messages.append(message)
                positions.append(self._positions[k])
        return messages, positions

    def estimate_context(self) -> ContextEstimate:
        """pi 1.6's ``estimateProjectedContextTokens`` of this projection."""
        messages, positions = self.context_messages()
        return estimate_projected_context_tokens(
            messages, positions, self.latest_invalidating, self.estimator
        )

    def current_system_message(self) -> SystemMessage | None:
        return current_system_message(self.context_messages()[0])
