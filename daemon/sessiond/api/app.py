"""Wiring the daemon's methods onto the JSON-RPC server, and running it."""

from __future__ import annotations

import argparse
import logging

from sessiond.jsonrpc import (
    RpcServer,
    configure_logging,
    endpoint_from_args,
    limits_from_args,
    loop_factory_from_args,
)
from sessiond.settings import Settings, load_settings, merge_settings, parse_assignments

from . import (
    compaction_methods,
    context_methods,
    lifecycle_methods,
    session_methods,
    settings_methods,
    tree_methods,
)
from .daemon import Daemon

_log = logging.getLogger(__name__)


def build_daemon(daemon: Daemon | None = None) -> Daemon:
    """A daemon with every method of the protocol on its router."""
    daemon = daemon or Daemon()
    for table in (
        lifecycle_methods.METHODS,
        session_methods.METHODS,
        context_methods.METHODS,
        tree_methods.METHODS,
        settings_methods.METHODS,
        compaction_methods.METHODS,
    ):
        table.bind(daemon.router, daemon)
    # LSP's "initialized" notification: nothing to do, but it is expected, not unknown.
    daemon.router.notification("initialized")(lambda ctx, params: None)
    return daemon


def trusted_settings(args: argparse.Namespace) -> tuple[Settings, list[str]]:
    """The daemon's trusted settings: the settings file (``--settings`` or the user's),
    then ``--set`` assignments. Only these may name endpoints, keys and headers."""
    settings, warnings = load_settings(getattr(args, "settings", None))
    overrides = parse_assignments(getattr(args, "assignments", []))
    if overrides:
        settings, _ = merge_settings(settings, overrides, strict=True, source="--set")
    return settings, warnings


def serve(args: argparse.Namespace) -> int:
    """``sessiond serve``: run the daemon on the transport the options name.

    Raises ``TransportError`` when it cannot start as asked (the CLI prints it, exits 2).
    """
    configure_logging(args.log_level, args.log_file)
    endpoint = endpoint_from_args(args)
    loop_factory = loop_factory_from_args(args)
    limits = limits_from_args(args)
    daemon = build_daemon(Daemon(*trusted_settings(args)))
    if daemon.base_settings.compaction.token_estimator == "tiktoken":
        from sessiond.tiktoken_offline import warm_up_in_background

        warm_up_in_background()
    server = RpcServer(
        daemon.router,
        on_shutdown=daemon.on_shutdown,
        on_connection=daemon.on_connection,
        max_frame_bytes=args.max_message_bytes,
        limits=limits,
    )
    return server.run(endpoint, loop_factory=loop_factory)
