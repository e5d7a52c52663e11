"""``initialize`` and ``shutdown``: what a client and the daemon tell each other first and last."""

from __future__ import annotations

import json
from typing import Any, get_args

from sessiond._version import __version__
from sessiond.jsonrpc import MessageType, RequestContext
from sessiond.jsonrpc.router import NoParams
from sessiond.settings import merge_settings

from .clients import MAX_CLIENT_NAME
from .daemon import Daemon
from .lifecycle_types import (
    ClientInfo,
    InitializeParams,
    InitializeResult,
    ServerCapabilities,
    ServerInfo,
)
from .methods import MethodTable
from .types import PROTOCOL_VERSION, HookName

METHODS = MethodTable()
HOOK_NAMES = list(get_args(HookName))
NOTIFICATIONS = [
    "session/changed",
    "session/recovered",
    "compaction/started",
    "compaction/ended",
    "$/progress",
    "window/logMessage",
]


def protocol_version_warning(version: Any) -> str | None:
    """What to tell a client whose ``initialize.protocolVersion`` is not ``"1"``.

    It is served anyway: refusing a client over the spelling of a version it may
    well speak would help nobody."""
    if version is None or version == PROTOCOL_VERSION:
        return None
    if isinstance(version, str):
        shown = version
    else:
        shown = json.dumps(version)
        if shown == PROTOCOL_VERSION:
            return f"protocolVersion {shown} should be the string {json.dumps(PROTOCOL_VERSION)}"
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return (
        f"client speaks protocol {shown}; this daemon speaks {PROTOCOL_VERSION} "
        "(methods may be missing or differ)"
    )


@METHODS.request("initialize", InitializeParams)
def initialize(daemon: Daemon, ctx: RequestContext, params: InitializeParams) -> InitializeResult:
    state = daemon.client(ctx)
    state.name = (params.client_info or ClientInfo(name="client")).name[:MAX_CLIENT_NAME]
    warnings = list(daemon.settings_warnings)
    # A client built for a later daemon may name hooks this one does not have: they are
    # ignored, as unknown settings are, so that the client can still connect.
    unknown = [hook for hook in params.capabilities.hooks if hook not in HOOK_NAMES]
    if unknown:
        shown = ", ".join(json.dumps(hook)[:80] for hook in unknown[:10])
        warnings.append(f"capabilities.hooks: unknown hooks ignored: {shown}")
        params.capabilities.hooks = [h for h in params.capabilities.hooks if h in HOOK_NAMES]
    state.capabilities = params.capabilities
    effective = daemon.base_settings
    if params.settings:
        effective, problems = merge_settings(
            daemon.base_settings,
            params.settings,
            strict=False,
            source="initialize.settings",
            configured=daemon.base_settings,
        )
        warnings += problems
        state.overrides = dict(params.settings)
    version_warning = protocol_version_warning(params.protocol_version)
    if version_warning is not None:
        warnings.append(version_warning)
    state.initialized = True
    if state.wants("window/logMessage"):
        for warning in warnings:
            ctx.connection.log_message(f"sessiond: {warning}", MessageType.WARNING)
    return InitializeResult(
        server_info=ServerInfo(name="sessiond", version=__version__),
        protocol_version=PROTOCOL_VERSION,
        capabilities=ServerCapabilities(
            methods=sorted(daemon.router.requests),
            notifications=NOTIFICATIONS,
            hooks=HOOK_NAMES,
            summarizers=[c.kind for c in effective.summarizer.candidates] or ["extractive"],
        ),
        warnings=warnings,
    )


@METHODS.request("shutdown")
def shutdown(daemon: Daemon, ctx: RequestContext, params: NoParams) -> None:
    daemon.sessions.sync_all()
