"""JSON-RPC 2.0 over LSP framing, on asyncio and msgspec: generic, it knows nothing of sessions.

What sessiond's methods and command line use; the modules hold the rest::

    router = Router()

    @router.request("initialize", InitializeParams)
    async def initialize(ctx: RequestContext, params: InitializeParams) -> InitializeResult: ...

    server = RpcServer(router, on_shutdown=flush_sessions)
    sys.exit(server.run(StdioEndpoint()))
"""

from sessiond.jsonrpc.client_requests import (
    ClientRequestFailed,
    ClientRequestTimeout,
    ClientReturnedError,
)
from sessiond.jsonrpc.connection import Connection
from sessiond.jsonrpc.connection_limits import (
    DEFAULT_MAX_CONNECTIONS,
    FD_RESERVE_MIN,
    open_file_limit,
)
from sessiond.jsonrpc.handler_context import AnswerLater, RequestContext
from sessiond.jsonrpc.logs import configure_logging
from sessiond.jsonrpc.lsp_notifications import (
    CancelParams,
    LogMessageParams,
    MessageType,
    WorkDoneBegin,
    WorkDoneEnd,
    WorkDoneProgress,
    WorkDoneProgressCreateParams,
    WorkDoneReport,
)
from sessiond.jsonrpc.options import (
    add_server_arguments,
    endpoint_from_args,
    limits_from_args,
    loop_factory_from_args,
)
from sessiond.jsonrpc.router import Router
from sessiond.jsonrpc.server import RpcServer
from sessiond.jsonrpc.startup_errors import TransportError

__all__ = [
    "DEFAULT_MAX_CONNECTIONS",
    "FD_RESERVE_MIN",
    "AnswerLater",
    "CancelParams",
    "ClientRequestFailed",
    "ClientRequestTimeout",
    "ClientReturnedError",
    "Connection",
    "LogMessageParams",
    "MessageType",
    "RequestContext",
    "Router",
    "RpcServer",
    "TransportError",
    "WorkDoneBegin",
    "WorkDoneEnd",
    "WorkDoneProgress",
    "WorkDoneProgressCreateParams",
    "WorkDoneReport",
    "add_server_arguments",
    "configure_logging",
    "endpoint_from_args",
    "limits_from_args",
    "loop_factory_from_args",
    "open_file_limit",
]
