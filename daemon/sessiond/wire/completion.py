"""What a summary request is for and how hard it asks a model to think (``llm/complete``)."""

from __future__ import annotations

from typing import Literal, TypeAlias

Purpose: TypeAlias = Literal["history", "update", "turnPrefix", "short", "branch"]
# pi's thinking levels, "off" aside: how hard a summarizer that can reason should think.
ReasoningLevel: TypeAlias = Literal["minimal", "low", "medium", "high", "xhigh"]
