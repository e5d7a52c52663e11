"""The JSON-RPC 2.0 layer of sessiond: framing, dispatch, lifecycle, transports.

Generic on purpose: it knows nothing of sessions. The daemon registers its methods on a
``Router`` and runs an ``RpcServer`` on an endpoint::

    router = Router()

    @router.request("initialize", InitializeParams)
    async def initialize(ctx: RequestContext, params: InitializeParams) -> InitializeResult: ...

    server = RpcServer(router, on_shutdown=flush_sessions)
    sys.exit(server.run(StdioEndpoint()))
"""

from sessiond.jsonrpc.connection import Connection, MessageType
from sessiond.jsonrpc.context import AnswerLater, NotificationContext, RequestContext
from sessiond.jsonrpc.limits import ConnectionLimits
from sessiond.jsonrpc.logs import configure_logging
from sessiond.jsonrpc.messages import RequestId, WorkDoneBegin, WorkDoneEnd, WorkDoneReport
from sessiond.jsonrpc.options import (
    add_server_arguments,
    endpoint_from_args,
    limits_from_args,
    loop_factory_from_args,
)
from sessiond.jsonrpc.outgoing import (
    ClientDisconnected,
    ClientRequestFailed,
    ClientRequestTimeout,
    ClientResultInvalid,
    ClientReturnedError,
)
from sessiond.jsonrpc.router import NoParams, Router
from sessiond.jsonrpc.runner import RpcServer
from sessiond.jsonrpc.startup import OptionError, SecurityError, TransportError
from sessiond.jsonrpc.transports import (
    Endpoint,
    StdioEndpoint,
    TcpEndpoint,
    UnixSocketEndpoint,
)

__all__ = [
    "AnswerLater",
    "ClientDisconnected",
    "ClientRequestFailed",
    "ClientRequestTimeout",
    "ClientResultInvalid",
    "ClientReturnedError",
    "Connection",
    "ConnectionLimits",
    "Endpoint",
    "MessageType",
    "NoParams",
    "NotificationContext",
    "OptionError",
    "RequestContext",
    "RequestId",
    "Router",
    "RpcServer",
    "SecurityError",
    "StdioEndpoint",
    "TcpEndpoint",
    "TransportError",
    "UnixSocketEndpoint",
    "WorkDoneBegin",
    "WorkDoneEnd",
    "WorkDoneReport",
    "add_server_arguments",
    "configure_logging",
    "endpoint_from_args",
    "limits_from_args",
    "loop_factory_from_args",
]
