"""The thinking level and the model oh-my-pi restores at a leaf of one of its files.

oh-my-pi keeps a model per role (``default``, ``smol``, ``slow``, ...; ``fallback`` for a
retry's temporary one), from ``model_change {model: "provider/id", role}``. Assistant
messages name the default model only until a ``model_change`` of the default role does
(so an answer a fallback model gave does not become the session's model). On resume it
restores the model of the role of the last ``model_change``, or the default one. The
thinking level is the last ``thinking_level_change``'s (null reads as "off").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from .context import DEFAULT_THINKING_LEVEL, ModelRef
from .entries import Entry, MessageEntry, ModelChangeEntry, ThinkingLevelChangeEntry
from .messages import AssistantMessage
from .omp_turns import OmpPath

_EPHEMERAL_ROLE: Final = "fallback"


@dataclass
class OmpSettings:
    """The settings carried along a path, entry by entry (``note``)."""

    thinking_level: str = DEFAULT_THINKING_LEVEL
    models: dict[str, str] = field(default_factory=dict)
    last_role: str | None = None
    last_answer: str | None = None  # "provider/model" of the last answer

    def note(self, entry: Entry) -> None:
        if isinstance(entry, ThinkingLevelChangeEntry):
            level = entry.thinking_level
            self.thinking_level = level if level is not None else DEFAULT_THINKING_LEVEL
        elif isinstance(entry, ModelChangeEntry):
            role = entry.role if entry.role is not None else "default"
            self.last_role = role
            if entry.model:
                self.models[role] = entry.model
        elif isinstance(entry, MessageEntry) and isinstance(entry.message, AssistantMessage):
            self.last_answer = f"{entry.message.provider}/{entry.message.model}"

    @property
    def model(self) -> ModelRef | None:
        """The first of oh-my-pi's ``getRestorableSessionModels``, split at its first
        slash as oh-my-pi restores it."""
        default = self.models.get("default", self.last_answer)
        role = self.last_role
        if role is None or role in ("default", _EPHEMERAL_ROLE):
            selector = default
        else:
            selector = self.models.get(role) or default
        if not selector:
            return None
        provider, slash, model_id = selector.partition("/")
        return ModelRef(provider, model_id) if slash and provider else None


def settings_of(path: OmpPath) -> OmpSettings:
    """The settings at the end of ``path``: its thinking-level and model changes decoded,
    and of its answers only the last (which names the default model when no change
    does)."""
    settings = OmpSettings()
    answers: list[int] = []
    for index in range(len(path)):
        kind = path.type_at(index)
        if kind in ("thinking_level_change", "model_change"):
            settings.note(path.entry_at(index))
        elif kind == "message" and path.role_at(index) == "assistant":
            answers.append(index)
    for index in reversed(answers):  # the last one that reads as an answer
        settings.note(path.entry_at(index))
        if settings.last_answer is not None:
            break
    return settings
