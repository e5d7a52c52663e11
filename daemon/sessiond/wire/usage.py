"""How full a session's context is at its leaf (``context/usage`` and the answers that
carry it)."""

from __future__ import annotations

import msgspec


class Usage(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    """How full the context is at the leaf."""

    tokens: int
    context_window: int
    threshold: int
    should_compact: bool
    percent: float
    # The last measured usage (after the latest compaction) and the estimate after it.
    usage_tokens: int
    trailing_tokens: int
    estimator: str
    # The no-loop rule pauses automatic compaction here: the context's newest compaction
    # left it over this threshold (``agent/turnEnded`` said so once, with what to do).
    auto_compaction_paused: bool = False
