"""``sessiond serve``: run the daemon on stdio, a Unix socket or TCP."""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from sessiond.jsonrpc import add_server_arguments

    parser.description = (
        "Serve sessiond's protocol (JSON-RPC 2.0 with Content-Length framing). "
        "Logs go to stderr or --log-file, never to stdout."
    )
    add_server_arguments(parser)
    from .common import add_settings_arguments

    # The daemon's trusted settings: endpoints, keys and headers come from here (or the
    # settings file), never from a client.
    add_settings_arguments(parser)
    # Its stdout is the protocol (stdio) and its stderr the log, which is made inert line
    # by line (jsonrpc.logs): nothing to wrap.
    parser.set_defaults(handler=run, raw_output=True)


def run(args: argparse.Namespace) -> int:
    from sessiond.api.app import serve
    from sessiond.jsonrpc import TransportError

    try:
        return serve(args)
    except TransportError as exc:
        # Cannot start as asked (address, token, options): a usage error, status 2.
        print(f"sessiond: error: {exc}", file=sys.stderr)
        return 2
