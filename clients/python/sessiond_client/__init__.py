"""An asyncio client of sessiond, the session daemon for LLM coding agents.

    async with SessiondClient.spawn() as client:
        await client.initialize(client_name="my-agent")
        session = await client.new_session(cwd="/path/to/project")
        await client.append(session.session_id, [{"type": "message", "message": user_msg}])
        context = await client.build_context(session.session_id, format="llm")

Results are the daemon's own wire types (``sessiond_client.types``); daemon errors raise
a ``SessiondClientError`` subclass per ``data.kind`` (``sessiond_client.errors``).
"""

from .agent import AgentSession
from .base import Connecting
from .client import METHODS, SessiondClient
from .errors import (
    AlreadyCompactedError,
    BusyError,
    ConflictError,
    ConnectionClosedError,
    FileChangedError,
    InternalError,
    InvalidEntryError,
    InvalidParamsError,
    InvalidRequestError,
    InvalidSessionFileError,
    LimitExceededError,
    MethodNotFoundError,
    NotAllowedError,
    NotFoundError,
    NothingToCompactError,
    NothingToUndoError,
    OperationCancelledError,
    OriginalUnavailableError,
    ParseError,
    ProtocolError,
    ServerNotInitializedError,
    SessiondClientError,
    SessionLockedError,
    StorageError,
    SummarizerFailedError,
    TrustedSettingError,
    UnauthorizedError,
)
from .notifications import Notification, NotificationStream

__all__ = [
    "METHODS",
    "AgentSession",
    "AlreadyCompactedError",
    "BusyError",
    "ConflictError",
    "Connecting",
    "ConnectionClosedError",
    "FileChangedError",
    "InternalError",
    "InvalidEntryError",
    "InvalidParamsError",
    "InvalidRequestError",
    "InvalidSessionFileError",
    "LimitExceededError",
    "MethodNotFoundError",
    "NotAllowedError",
    "NotFoundError",
    "NothingToCompactError",
    "NothingToUndoError",
    "Notification",
    "NotificationStream",
    "OperationCancelledError",
    "OriginalUnavailableError",
    "ParseError",
    "ProtocolError",
    "ServerNotInitializedError",
    "SessionLockedError",
    "SessiondClient",
    "SessiondClientError",
    "StorageError",
    "SummarizerFailedError",
    "TrustedSettingError",
    "UnauthorizedError",
]
