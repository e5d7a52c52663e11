"""One exception hierarchy for everything sessiond reports.

Every error has a stable JSON-RPC ``code`` and a ``kind`` string (the
``data.kind`` clients switch on), plus optional structured ``details``. The
server maps them to JSON-RPC errors one to one; the CLI prints ``message`` and
exits non-zero. Codes and kinds are part of the protocol: add new ones, never
renumber (see ``protocol/README.md``).
"""

from __future__ import annotations

from typing import Any, ClassVar

# JSON-RPC 2.0 and LSP codes that sessiond uses as they are.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_NOT_INITIALIZED = -32002
REQUEST_CANCELLED = -32800
# sessiond's own code in the JSON-RPC "server error" range.
UNAUTHORIZED = -32001


class SessiondError(Exception):
    """Base of every error sessiond raises on purpose."""

    code: ClassVar[int] = INTERNAL_ERROR
    kind: ClassVar[str] = "internal"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details

    def to_data(self) -> dict[str, Any]:
        """The JSON-RPC ``error.data`` object: the kind plus the details."""
        return {"kind": self.kind, **self.details}


class ParseError(SessiondError):
    """The message body is not JSON (or its frame header is broken); answered with ``id: null``."""

    code = PARSE_ERROR
    kind = "parseError"


class InvalidRequestError(SessiondError):
    """The message is JSON but not a JSON-RPC 2.0 request the server accepts."""

    code = INVALID_REQUEST
    kind = "invalidRequest"


class MethodNotFoundError(SessiondError):
    code = METHOD_NOT_FOUND
    kind = "methodNotFound"


class ServerNotInitializedError(SessiondError):
    """A request arrived on a connection before its ``initialize``."""

    code = SERVER_NOT_INITIALIZED
    kind = "serverNotInitialized"


class UnauthorizedError(SessiondError):
    """A TCP client's ``initialize`` carried no ``authToken`` or a wrong one."""

    code = UNAUTHORIZED
    kind = "unauthorized"


class InvalidParamsError(SessiondError):
    code = INVALID_PARAMS
    kind = "invalidParams"


class TrustedSettingError(SessiondError):
    """A client tried to set what only trusted configuration (the settings file, the
    command line) may: an endpoint, a key's source, headers, ``storage.allowedRoots``.
    ``details.setting`` names it."""

    code = INVALID_PARAMS
    kind = "trustedSetting"


class NotFoundError(SessiondError):
    """An unknown session id or entry id. The message is pi's ``Entry <id> not found``."""

    code = -32010
    kind = "notFound"


class ConflictError(SessiondError):
    """The caller's view is stale: ``expectedLeafId`` no longer matches, a path exists..."""

    code = -32011
    kind = "conflict"


class BusyError(SessiondError):
    """Another operation that must not interleave with this one is running."""

    code = -32012
    kind = "busy"


class OperationCancelledError(SessiondError):
    """The operation was cancelled: by a hook, by an abort, or by the client's model.

    Not -32800: LSP clients (Neovim's ``vim.lsp.rpc`` among them) drop answers
    with that code as replies to their own ``$/cancelRequest``, and would never
    see this one."""

    code = -32020
    kind = "cancelled"


class RequestCancelledError(OperationCancelledError):
    """The answer to a request the client cancelled with ``$/cancelRequest``."""

    code = REQUEST_CANCELLED


class NothingToCompactError(SessiondError):
    code = -32013
    kind = "nothingToCompact"


class AlreadyCompactedError(SessiondError):
    code = -32014
    kind = "alreadyCompacted"


class NothingToUndoError(SessiondError):
    """``compaction/undo`` on a context without a compaction."""

    code = -32023
    kind = "nothingToUndo"


class SummarizerError(SessiondError):
    """Every summarizer candidate failed; the message is pi's failure string."""

    code = -32015
    kind = "summarizerFailed"


class SessionLockedError(SessiondError):
    """Another process holds the session file's lock; ``details`` names the owner."""

    code = -32016
    kind = "sessionLocked"


class InvalidSessionFileError(SessiondError):
    """The file is not a session sessiond can open. ``details.reason`` says why.

    Reasons: ``empty``, ``notASessionFile``, ``invalidHeader``,
    ``unsupportedVersion``, ``invalidUtf8``, ``notAFile``, ``notFound``; and for a
    session's file or one beside it that sessiond will not use (``store.safe_files``):
    ``symlink``, ``notAFile``, ``hardLink``, ``notPrivate``, with ``path`` naming it. A
    transcript to import (``sessiond import``, the command line only): ``invalidTranscript``
    (with ``line``), ``lineTooLong``, ``tooLarge``, ``emptyTranscript``.
    """

    code = -32017
    kind = "invalidSessionFile"


class StorageError(SessiondError):
    """Reading or writing the session file failed at the OS level."""

    code = -32018
    kind = "storage"


class FileChangedError(SessiondError):
    """A line the daemon indexed no longer holds its entry: another program changed the
    file in place behind the daemon. The daemon reads the file again; retrying works.
    ``details``: ``path``, ``entryId``, ``offset`` (of the line)."""

    code = -32022
    kind = "fileChanged"


class LimitExceededError(SessiondError):
    """A request asks for more than the daemon holds for one client or one answer, or a
    file would take more memory than its size allows. ``details.limit`` names the limit,
    ``details.maximum`` its value."""

    code = -32021
    kind = "limitExceeded"


class InvalidEntryError(SessiondError):
    """An entry a client asked to append is not a valid entry of its type."""

    code = INVALID_PARAMS
    kind = "invalidEntry"


class NotAllowedError(SessiondError):
    """The request is valid but refused (a path outside what the client may open...)."""

    code = -32019
    kind = "notAllowed"


class OriginalUnavailableError(SessiondError):
    """``session/entry`` with ``original``: the entry was pruned in place and its original
    line cannot be read back from the session's pruned-output archive. ``details``:
    ``reason`` (``noArchive``, ``notArchived``, ``mismatch``, ``lineTooLong``),
    ``entryId``, ``path`` (of the archive). The archive file itself refused (a link, not
    sessiond's...) is ``invalidSessionFile`` instead, as when pruning writes it."""

    code = -32024
    kind = "originalUnavailable"
