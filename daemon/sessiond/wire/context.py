"""The forms a context is built in: pi's agent messages, or a provider's messages."""

from __future__ import annotations

from typing import Literal, TypeAlias

ContextFormat: TypeAlias = Literal["agent", "llm"]
