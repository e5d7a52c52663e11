"""Whether a new connection is served, and which stranger makes room for it.

A newcomer that must show a token counts as a stranger until it has. When strangers fill
their share (``max_unauthenticated``) or all connections fill the cap, the oldest stranger
is dropped to make room: a flood of idle strangers can delay a token holder by no more
than the time it takes to authenticate. Without a stranger to drop, the newcomer is
refused. (Descriptors near the process's limit are refused earlier, by the ``Acceptor``.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from sessiond.jsonrpc.connection_limits import ConnectionLimits


class Admitted(Protocol):
    @property
    def authenticated(self) -> bool: ...


C = TypeVar("C", bound=Admitted)


@dataclass(frozen=True, slots=True)
class Verdict(Generic[C]):
    """``refusal`` says why the newcomer is turned away; else ``evict`` (if set) goes first."""

    refusal: str | None = None
    evict: C | None = None


class Admission(Generic[C]):
    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits

    def consider(self, connections: Sequence[C], *, needs_token: bool) -> Verdict[C]:
        """The verdict on a newcomer, given the open connections (oldest first)."""
        limits = self.limits
        strangers = [c for c in connections if not c.authenticated]
        full = len(connections) >= limits.max_connections
        crowded = needs_token and len(strangers) >= limits.max_unauthenticated
        if not (full or crowded):
            return Verdict()
        if strangers:
            return Verdict(evict=strangers[0])
        return Verdict(refusal=f"too many connections ({limits.max_connections})")
