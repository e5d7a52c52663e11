"""Wiring the daemon's methods onto the JSON-RPC server, and running it."""

from __future__ import annotations

import argparse
import logging

from sessiond.server import RpcServer, configure_logging, endpoint_from_args
from sessiond.server.options import loop_factory_from_args
from sessiond.server.transports import TransportError

from . import compaction_methods, context_methods, session_methods, settings_methods, tree_methods
from .daemon import Daemon
from .types import InitializeParams

_log = logging.getLogger(__name__)


def build_daemon(daemon: Daemon | None = None) -> Daemon:
    daemon = daemon or Daemon()
    router = daemon.router
    router.request("initialize", InitializeParams)(daemon.initialize)
    router.request("shutdown")(daemon.shutdown)
    # LSP's "initialized" notification: nothing to do, but it is expected, not unknown.
    router.notification("initialized")(lambda ctx, params: None)
    for module in (
        session_methods,
        context_methods,
        compaction_methods,
        tree_methods,
        settings_methods,
    ):
        module.register(daemon)
    return daemon


def serve(args: argparse.Namespace) -> int:
    """``sessiond serve``: run the daemon on the transport the options name."""
    configure_logging(args.log_level, args.log_file)
    try:
        endpoint = endpoint_from_args(args)
        loop_factory = loop_factory_from_args(args)
    except TransportError as exc:
        _log.error("%s", exc)
        return 2
    daemon = build_daemon()
    if daemon.base_settings.compaction.token_estimator == "tiktoken":
        from sessiond.tokenizer import warm_up_in_background

        warm_up_in_background()
    server = RpcServer(
        daemon.router,
        on_shutdown=daemon.on_shutdown,
        on_connection=daemon.on_connection,
        max_frame_bytes=args.max_message_bytes,
    )
    return server.run(endpoint, loop_factory=loop_factory)
