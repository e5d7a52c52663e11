"""Ids as pi makes them (0.73.1 and 1.6): UUIDv7 sessions, 8-hex-digit entries."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from typing import Final

_ID_ATTEMPTS: Final = 100


def new_session_id(now_ms: int | None = None) -> str:
    """A UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then random bits."""
    millis = int(time.time() * 1000) if now_ms is None else now_ms
    value = int.from_bytes(os.urandom(10), "big")  # 80 random bits
    value = (millis & ((1 << 48) - 1)) << 80 | value
    value = (value & ~(0xF << 76)) | (0x7 << 76)  # version 7
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # RFC 4122 variant
    return str(uuid.UUID(int=value))


def new_entry_id(taken: Callable[[str], bool]) -> str:
    """The first 8 hex digits of a random UUID, retried on collision (pi's rule)."""
    for _ in range(_ID_ATTEMPTS):
        candidate = os.urandom(4).hex()  # what uuid4().hex[:8] holds: 32 random bits
        if not taken(candidate):
            return candidate
    return str(uuid.uuid4())
