"""How much one client, and all clients together, may make the server hold.

The figures and what a client sees of them: protocol/README.md, "Limits" and "TCP and
the token".
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

KIB = 1024
MIB = 1024 * KIB

# The transport's write buffer: above the high mark the connection stops reading and
# handling requests; below the low mark it starts again.
OUTPUT_HIGH_WATER = 1 * MIB
OUTPUT_LOW_WATER = 256 * KIB
# Received messages waiting to be handled; above this the connection stops reading.
INCOMING_QUEUE_LIMIT_BYTES = 1 * MIB
# What a waiting message is counted as on top of its body (its decoded envelope).
MESSAGE_OVERHEAD_BYTES = 256
# Handler tasks (the methods that may wait) running at once on one connection.
MAX_CONCURRENT_REQUESTS = 64
# Notifications and server requests queued for a client that is not reading: beyond this
# the client is too far behind to follow its sessions, and the connection is dropped.
UNREAD_NOTIFICATIONS_LIMIT = 16 * MIB

# Before the token: frames of at most this size, this many messages, this long.
PRE_AUTH_MAX_FRAME_BYTES = 16 * KIB
PRE_AUTH_MAX_MESSAGES = 8
AUTH_DEADLINE_SECONDS = 10.0

DEFAULT_MAX_CONNECTIONS = 128
DEFAULT_MAX_UNAUTHENTICATED = 16
# Unfinished frames of all connections together are held up to this many times the
# largest message (a frame that would go beyond is refused as too large).
RECEIVE_BUDGET_FRAMES = 4
# File descriptors kept for everything but connections: session files and their locks,
# logs, summarizer connections. At least this many, or a quarter of the process's limit.
FD_RESERVE_MIN = 64


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """``max_connections`` clients at once, of which at most ``max_unauthenticated`` have
    not yet shown the TCP token (the rest is kept for those that have)."""

    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_unauthenticated: int = DEFAULT_MAX_UNAUTHENTICATED

    def __post_init__(self) -> None:
        if self.max_connections < 2:
            raise ValueError("max_connections must be at least 2")
        if not 1 <= self.max_unauthenticated < self.max_connections:
            raise ValueError("max_unauthenticated must be at least 1 and below max_connections")

    def fitted_to(self, file_limit: int) -> ConnectionLimits:
        """These limits, lowered so that connections alone cannot exhaust ``file_limit``."""
        most = max(2, file_limit - fd_reserve(file_limit))
        connections = min(self.max_connections, most)
        unauthenticated = min(self.max_unauthenticated, max(1, connections // 2))
        return ConnectionLimits(connections, unauthenticated)


def fd_reserve(file_limit: int) -> int:
    return max(FD_RESERVE_MIN, file_limit // 4)


def accept_fd_ceiling(file_limit: int) -> int:
    """Descriptors from this number up are not used for new connections: half the reserve
    is kept even from connections the caps would have dropped a moment later."""
    return file_limit - fd_reserve(file_limit) // 2


def open_file_limit() -> int:
    """The process's soft ``RLIMIT_NOFILE`` (what ``accept`` and ``open`` run into)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20
