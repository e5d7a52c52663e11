"""Exceptions: one class per daemon error kind, plus the client's own transport failures.

A daemon error answer ``{code, message, data: {kind, ...}}`` becomes the subclass
registered for ``data.kind`` (falling back to the code, then to the base class), so
callers can write ``except ConflictError`` instead of comparing strings. The kinds
mirror ``sessiond.errors``; a kind this client does not know still raises
``SessiondClientError`` with everything the daemon sent.
"""

from __future__ import annotations

from typing import Any, ClassVar

# JSON-RPC and LSP codes the client itself uses when answering the daemon's requests.
INTERNAL_ERROR = -32603
INVALID_PARAMS = -32602
METHOD_NOT_FOUND = -32601
REQUEST_CANCELLED = -32800


class SessiondClientError(Exception):
    """Base of every error this client raises.

    ``code`` is the JSON-RPC error code (None for failures that never reached the
    daemon), ``data`` the error's ``data`` object as sent, ``kind`` its ``data.kind``.
    """

    kind: ClassVar[str] = "unknown"
    default_code: ClassVar[int | None] = None

    def __init__(self, message: str, *, code: int | None = None, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code if code is not None else self.default_code
        self.data = data

    @property
    def details(self) -> dict[str, Any]:
        """``data`` without ``kind``: the structured details the daemon attached."""
        if not isinstance(self.data, dict):
            return {}
        return {key: value for key, value in self.data.items() if key != "kind"}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


# -- failures of the connection itself (no daemon answer) ------------------------------------------


class ConnectionClosedError(SessiondClientError):
    """The connection ended (or was never usable) before an answer arrived."""

    kind = "connectionClosed"


class ProtocolError(SessiondClientError):
    """The daemon sent something that is not a well-formed frame or message.

    The daemon is trusted, so this means a bug or a wrong peer: the connection is closed.
    """

    kind = "protocolError"


# -- errors the daemon answers with (sessiond.errors) ---------------------------------------------


class ParseError(SessiondClientError):
    kind = "parseError"
    default_code = -32700


class InvalidRequestError(SessiondClientError):
    kind = "invalidRequest"
    default_code = -32600


class MethodNotFoundError(SessiondClientError):
    kind = "methodNotFound"
    default_code = METHOD_NOT_FOUND


class InvalidParamsError(SessiondClientError):
    kind = "invalidParams"
    default_code = INVALID_PARAMS


class InvalidEntryError(InvalidParamsError):
    """An entry given to ``append`` is not a valid entry of its type (code -32602 too)."""

    kind = "invalidEntry"


class TrustedSettingError(InvalidParamsError):
    """A setting only the daemon's settings file or command line may set (an endpoint,
    a key's variable, headers, ``storage.allowedRoots``); ``details["setting"]`` names
    it (code -32602 too)."""

    kind = "trustedSetting"


class InternalError(SessiondClientError):
    kind = "internal"
    default_code = INTERNAL_ERROR


class ServerNotInitializedError(SessiondClientError):
    kind = "serverNotInitialized"
    default_code = -32002


class UnauthorizedError(SessiondClientError):
    """TCP: the token was missing or wrong; the daemon closes the connection."""

    kind = "unauthorized"
    default_code = -32001


class NotFoundError(SessiondClientError):
    kind = "notFound"
    default_code = -32010


class ConflictError(SessiondClientError):
    """The caller's view is stale (``expected_leaf_id`` no longer the leaf, a path exists...)."""

    kind = "conflict"
    default_code = -32011


class BusyError(SessiondClientError):
    kind = "busy"
    default_code = -32012


class OperationCancelledError(SessiondClientError):
    """The daemon cancelled the operation (an abort, a hook's ``cancel``, a cancelled summary).

    Not ``asyncio.CancelledError``: that is what a cancelled *caller* sees. A hook or
    ``llm/complete`` handler may raise this to decline; the daemon gets -32800.
    """

    kind = "cancelled"
    default_code = REQUEST_CANCELLED


class NothingToCompactError(SessiondClientError):
    kind = "nothingToCompact"
    default_code = -32013


class AlreadyCompactedError(SessiondClientError):
    kind = "alreadyCompacted"
    default_code = -32014


class NothingToUndoError(SessiondClientError):
    """``compaction/undo`` on a context without a compaction."""

    kind = "nothingToUndo"
    default_code = -32023


class SummarizerFailedError(SessiondClientError):
    kind = "summarizerFailed"
    default_code = -32015


class SessionLockedError(SessiondClientError):
    """Another process holds the session file's lock; ``details`` names the owner."""

    kind = "sessionLocked"
    default_code = -32016


class InvalidSessionFileError(SessiondClientError):
    """``details["reason"]``: empty, notASessionFile, invalidHeader, unsupportedVersion..."""

    kind = "invalidSessionFile"
    default_code = -32017


class StorageError(SessiondClientError):
    kind = "storage"
    default_code = -32018


class NotAllowedError(SessiondClientError):
    kind = "notAllowed"
    default_code = -32019


class LimitExceededError(SessiondClientError):
    """The request asks for more than the daemon holds for one client or one answer (too
    many open sessions, an answer too large), or a file would take too much memory to
    open; ``details["limit"]`` names the limit, ``details["maximum"]`` its value."""

    kind = "limitExceeded"
    default_code = -32021


class FileChangedError(SessiondClientError):
    """A line another program changed behind the daemon; the daemon reads the file again,
    so retrying works. ``details``: ``path``, ``entryId``, ``offset``."""

    kind = "fileChanged"
    default_code = -32022


class OriginalUnavailableError(SessiondClientError):
    """``session/entry`` with ``original``: the entry was pruned in place and its original
    cannot be read back from the session's pruned-output archive. ``details``: ``reason``
    (noArchive, notArchived, mismatch, lineTooLong), ``entryId``, ``path``."""

    kind = "originalUnavailable"
    default_code = -32024


_DAEMON_ERRORS: tuple[type[SessiondClientError], ...] = (
    ParseError,
    InvalidRequestError,
    MethodNotFoundError,
    InvalidParamsError,
    InvalidEntryError,
    TrustedSettingError,
    InternalError,
    ServerNotInitializedError,
    UnauthorizedError,
    NotFoundError,
    ConflictError,
    BusyError,
    OperationCancelledError,
    NothingToCompactError,
    AlreadyCompactedError,
    NothingToUndoError,
    SummarizerFailedError,
    SessionLockedError,
    InvalidSessionFileError,
    StorageError,
    NotAllowedError,
    LimitExceededError,
    FileChangedError,
    OriginalUnavailableError,
)
ERRORS_BY_KIND: dict[str, type[SessiondClientError]] = {cls.kind: cls for cls in _DAEMON_ERRORS}
# Codes are shared by a few kinds (-32602); the first class listed is the code's own.
_ERRORS_BY_CODE: dict[int, type[SessiondClientError]] = {}
for _cls in _DAEMON_ERRORS:
    if _cls.default_code is not None:
        _ERRORS_BY_CODE.setdefault(_cls.default_code, _cls)


def error_from_response(code: int, message: str, data: Any) -> SessiondClientError:
    """The exception for a JSON-RPC error answer."""
    kind = data.get("kind") if isinstance(data, dict) else None
    cls = ERRORS_BY_KIND.get(kind) if isinstance(kind, str) else None
    if cls is None:
        cls = _ERRORS_BY_CODE.get(code, SessiondClientError)
    return cls(message, code=code, data=data)
