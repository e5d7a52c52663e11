"""Where connections come from: stdio, a Unix socket, or loopback TCP.

Each transport is an asyncio protocol that hands received bytes straight to its
``Connection`` and writes through a buffer that pauses the connection above
``OUTPUT_HIGH_WATER``. An endpoint's ``open`` binds and starts accepting; the returned
``Listening`` stops accepting and cleans up (socket file, token file) at shutdown.
"""

from sessiond.jsonrpc.transports.endpoint import ConnectionHost, Endpoint, Listening
from sessiond.jsonrpc.transports.stdio import StdioEndpoint
from sessiond.jsonrpc.transports.tcp import TcpEndpoint
from sessiond.jsonrpc.transports.unix_socket import UnixSocketEndpoint

__all__ = [
    "ConnectionHost",
    "Endpoint",
    "Listening",
    "StdioEndpoint",
    "TcpEndpoint",
    "UnixSocketEndpoint",
]
