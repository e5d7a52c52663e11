"""The LSP-style life of one connection: initialize, work, shutdown, exit.

Kept apart from the connection so that the rules are in one small place: what may be
sent in which state, and what the refusal says.
"""

from __future__ import annotations

from enum import Enum

from sessiond.errors import InvalidRequestError, ServerNotInitializedError, SessiondError

INITIALIZE = "initialize"
SHUTDOWN = "shutdown"
EXIT = "exit"


class State(Enum):
    UNINITIALIZED = "uninitialized"
    INITIALIZING = "initializing"  # the initialize request is being handled
    READY = "ready"
    SHUTTING_DOWN = "shuttingDown"  # shutdown received: only exit is accepted
    CLOSED = "closed"


class Lifecycle:
    def __init__(self) -> None:
        self.state = State.UNINITIALIZED
        self.shutdown_received = False

    def refuse_request(self, method: str) -> SessiondError | None:
        """The error to answer a request with in the current state, or None to serve it."""
        state = self.state
        if state is State.READY:
            if method == INITIALIZE:
                return InvalidRequestError("Invalid Request: initialize was already received")
            return None
        if state is State.UNINITIALIZED:
            if method == INITIALIZE:
                return None
            return ServerNotInitializedError("Server not initialized")
        if state is State.INITIALIZING:
            if method == INITIALIZE:
                return InvalidRequestError("Invalid Request: initialize is already in progress")
            return ServerNotInitializedError("Server not initialized")
        return InvalidRequestError("Invalid Request: server is shutting down")

    def accepts_notification(self, method: str) -> bool:
        """Whether a notification is handled now; others are dropped (``exit`` is always taken)."""
        if method == EXIT:
            return True
        return self.state is State.READY

    def initialize_started(self) -> None:
        self.state = State.INITIALIZING

    def initialize_finished(self, succeeded: bool) -> None:
        if self.state is State.INITIALIZING:
            # A failed initialize may be retried, as LSP allows.
            self.state = State.READY if succeeded else State.UNINITIALIZED

    def shutdown_started(self) -> None:
        if self.state is not State.CLOSED:
            self.state = State.SHUTTING_DOWN
            self.shutdown_received = True

    def closed(self) -> None:
        self.state = State.CLOSED

    @property
    def exit_code(self) -> int:
        """LSP's rule for ``exit``: 0 after a shutdown request, 1 without one."""
        return 0 if self.shutdown_received else 1
