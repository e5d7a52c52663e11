"""Why a server could not start: one exception family, so a CLI catches a single type.

``sessiond serve`` prints the message on one line and exits with status 2.
"""

from __future__ import annotations


class TransportError(Exception):
    """The server cannot start as asked: where it should listen, or how (the message says why)."""


class SecurityError(TransportError):
    """A path or token sessiond would have to trust is not safe (owner, permissions, empty)."""


class OptionError(TransportError):
    """An option cannot be used as given (a limit out of range, a log file that cannot open)."""
