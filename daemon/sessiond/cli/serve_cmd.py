"""``sessiond serve``: run the daemon on stdio, a Unix socket or TCP."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from sessiond.server.options import add_server_arguments

    parser = subparsers.add_parser(
        "serve",
        help="run the daemon (JSON-RPC over --stdio, --socket or --tcp)",
        description=(
            "Serve sessiond's protocol (JSON-RPC 2.0 with Content-Length framing). "
            "Logs go to stderr or --log-file, never to stdout."
        ),
    )
    add_server_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from sessiond.rpc.app import serve

    return serve(args)
