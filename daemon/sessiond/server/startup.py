"""Why a server could not start: one exception family, so a CLI catches a single type."""

from __future__ import annotations


class TransportError(Exception):
    """The server cannot listen where it was asked to (the message says why)."""


class SecurityError(TransportError):
    """A path or token sessiond would have to trust is not safe (owner, permissions, empty)."""
