"""A small server on sessiond's JSON-RPC layer, for the end-to-end tests.

Run as ``python tests/jsonrpc/example_server.py --stdio`` (or ``--socket PATH``, ``--tcp PORT``).
``EXAMPLE_SHUTDOWN_MARKER=<path>``: the on_shutdown hook writes that file.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import msgspec

from sessiond.errors import NotFoundError
from sessiond.jsonrpc import (
    ClientRequestFailed,
    ClientReturnedError,
    Connection,
    MessageType,
    RequestContext,
    Router,
    RpcServer,
    TransportError,
    WorkDoneBegin,
    WorkDoneEnd,
    WorkDoneReport,
    add_server_arguments,
    configure_logging,
    endpoint_from_args,
    loop_factory_from_args,
)
from sessiond.jsonrpc.handler_context import NotificationContext

router = Router()
closed_connections: list[int] = []


class ClientInfo(msgspec.Struct):
    name: str
    version: str | None = None


class InitializeParams(msgspec.Struct, rename="camel"):
    client_info: ClientInfo | None = None
    capabilities: dict[str, Any] = {}


class InitializeResult(msgspec.Struct, rename="camel"):
    server_info: ClientInfo
    capabilities: dict[str, Any]
    connection_id: int


class Entry(msgspec.Struct):
    role: str
    text: str


class AppendParams(msgspec.Struct, rename="camel"):
    session_id: str
    entries: list[Entry]


class AppendResult(msgspec.Struct, rename="camel"):
    session_id: str
    count: int
    texts: list[str]


class SleepParams(msgspec.Struct):
    seconds: float


class FailParams(msgspec.Struct):
    kind: str


class AskParams(msgspec.Struct):
    method: str
    params: Any = None
    timeout: float | None = 5.0


class NotifyParams(msgspec.Struct):
    count: int


class PingParams(msgspec.Struct):
    value: Any


@router.request("initialize", InitializeParams)
async def initialize(ctx: RequestContext, params: InitializeParams) -> InitializeResult:
    return InitializeResult(
        server_info=ClientInfo("example", "1"),
        capabilities={
            "echo": True,
            "client": params.client_info.name if params.client_info else None,
        },
        connection_id=ctx.connection.id,
    )


@router.request("echo", dict[str, Any])
async def echo(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    return params


@router.request("echoSync", dict[str, Any])
def echo_sync(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    return params


@router.request("append", AppendParams)
async def append(ctx: RequestContext, params: AppendParams) -> AppendResult:
    return AppendResult(params.session_id, len(params.entries), [e.text for e in params.entries])


@router.request("sleep", SleepParams)
async def sleep(ctx: RequestContext, params: SleepParams) -> dict[str, float]:
    await asyncio.sleep(params.seconds)
    return {"slept": params.seconds}


@router.request("fail", FailParams)
async def fail(ctx: RequestContext, params: FailParams) -> None:
    if params.kind == "notFound":
        raise NotFoundError("Entry abc not found", entryId="abc")
    raise RuntimeError("secret internal detail")


@router.request("raw")
def raw(ctx: RequestContext, params: object) -> msgspec.Raw:
    return msgspec.Raw(b'{"pre":"encoded","n":[1,2,3]}')


@router.request("unencodable")
def unencodable(ctx: RequestContext, params: object) -> object:
    return object()


@router.request("askClient", AskParams)
async def ask_client(ctx: RequestContext, params: AskParams) -> dict[str, Any]:
    try:
        answer = await ctx.connection.request(params.method, params.params, timeout=params.timeout)
    except ClientReturnedError as exc:
        return {"failure": type(exc).__name__, "code": exc.code, "message": exc.error_message}
    except ClientRequestFailed as exc:
        return {"failure": type(exc).__name__}
    return {"answer": answer}


@router.request("notifyMe", NotifyParams)
async def notify_me(ctx: RequestContext, params: NotifyParams) -> int:
    for index in range(params.count):
        ctx.connection.notify("test/event", {"index": index})
    ctx.connection.log_message("notified", MessageType.INFO)
    return params.count


@router.request("progress")
async def progress(ctx: RequestContext, params: object) -> bool:
    sent = ctx.progress(WorkDoneBegin(title="working", percentage=0))
    ctx.progress(WorkDoneReport(message="half", percentage=50))
    ctx.progress(WorkDoneEnd(message="done"))
    return sent


@router.request("closedConnections")
def closed(ctx: RequestContext, params: object) -> list[int]:
    return closed_connections


@router.request("print")
def stray_print(ctx: RequestContext, params: object) -> str:
    print("a stray print must not reach the protocol stream")
    return "printed"


@router.notification("test/ping", PingParams)
async def ping(ctx: NotificationContext, params: PingParams) -> None:
    ctx.connection.notify("test/pong", {"value": params.value})


def on_connection(connection: Connection) -> None:
    connection.on_close(lambda conn: closed_connections.append(conn.id))


async def on_shutdown() -> None:
    marker = os.environ.get("EXAMPLE_SHUTDOWN_MARKER")
    if marker:
        Path(marker).write_text("flushed\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    add_server_arguments(parser)
    args = parser.parse_args(argv)
    configure_logging(args.log_level, args.log_file)
    try:
        endpoint = endpoint_from_args(args)
        server = RpcServer(
            router,
            on_shutdown=on_shutdown,
            on_connection=on_connection,
            max_frame_bytes=args.max_message_bytes,
            shutdown_grace_seconds=1.0,
        )
        return server.run(endpoint, loop_factory=loop_factory_from_args(args))
    except TransportError as exc:  # SecurityError included
        print(f"example_server: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
