"""The daemon: its clients, its open sessions, and what every method handler shares.

Settings are layered per request: the user's settings file, then the
connection's overrides (``initialize.settings``), then the session's
(``settings/update``), then the call's own (``settings`` in the params). Every
layer but the file is a client's, checked against the file (``settings_trust``):
clients choose among configured endpoints and keys, never name their own, and a
session's layer can shorten a request's waits but not lengthen them.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from typing import Any, Final, Literal, TypeVar, get_args

from sessiond._version import __version__
from sessiond.core.tokens import resolve_threshold_tokens, should_compact
from sessiond.errors import InvalidParamsError
from sessiond.jsonrpc import (
    DEFAULT_MAX_CONNECTIONS,
    FD_RESERVE_MIN,
    AnswerLater,
    Connection,
    MessageType,
    RequestContext,
    Router,
    WorkDoneBegin,
    WorkDoneEnd,
    WorkDoneReport,
    open_file_limit,
)
from sessiond.llm.base import Progress
from sessiond.redaction import remember
from sessiond.service.actor import SessionActor
from sessiond.service.sessions import SessionLimits, SessionRegistry
from sessiond.service.summaries import SummaryContext
from sessiond.settings import (
    LayerCache,
    Settings,
    load_settings,
    merge_settings,
    settings_to_builtins,
)
from sessiond.settings_trust import configured_secrets
from sessiond.store.following import CatchUpNeeded, Followed

from .clients import MAX_CLIENT_NAME, Clients, ClientState
from .hooks import ClientHooks
from .types import (
    PROTOCOL_VERSION,
    ChangeReason,
    ClientInfo,
    HookName,
    InitializeParams,
    InitializeResult,
    ServerCapabilities,
    ServerInfo,
    SessionChanged,
    Usage,
)

_log = logging.getLogger(__name__)
R = TypeVar("R")
# A request that meets others' changes this many times running gets ``busy``.
_CATCH_UP_TRIES: Final = 3
HOOK_NAMES = list(get_args(HookName))
NOTIFICATIONS = [
    "session/changed",
    "session/recovered",
    "compaction/started",
    "compaction/ended",
    "$/progress",
    "window/logMessage",
]
# $/progress reports at most this often while a summary streams in.
_PROGRESS_INTERVAL = 0.25


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


class Daemon:
    def __init__(self, settings: Settings | None = None, warnings: list[str] | None = None) -> None:
        if settings is None:
            settings, warnings = load_settings()
        self.base_settings = settings
        # Every key and header value the settings give access to, so that no log line,
        # error or summary can repeat one (keys are also read again at each call).
        remember(*configured_secrets(settings_to_builtins(settings), os.environ))
        self._layers = LayerCache()
        self.settings_warnings = list(warnings or [])
        for warning in self.settings_warnings:
            _log.warning("settings: %s", warning)
        self.clients = Clients()
        self.sessions = SessionRegistry(
            settings=lambda: self.base_settings,
            publish=self.clients.publish,
            hooks=self._hooks_for,
            on_followed=self._followed,
            limits=SessionLimits.fitted(open_file_limit(), DEFAULT_MAX_CONNECTIONS, FD_RESERVE_MIN),
        )
        self.router = Router()

    # -- connections

    def on_connection(self, connection: Connection) -> None:
        self.clients.add(connection)
        connection.on_close(self._on_close)

    def _on_close(self, connection: Connection) -> None:
        self.sessions.client_gone(connection.id)
        self.clients.remove(connection.id)

    async def on_shutdown(self) -> None:
        self.sessions.sync_all()
        self.sessions.close_all()

    def client(self, ctx: RequestContext) -> ClientState:
        state = self.clients.get(ctx.connection.id)
        if state is None:  # a connection the server did not announce (tests, embedding)
            state = self.clients.add(ctx.connection)
        return state

    def _hooks_for(self, actor: SessionActor) -> ClientHooks:
        # Not on behalf of a request: the settings file's wait, which no client can stretch.
        return ClientHooks(self.clients, actor, lambda: self.base_settings.hooks.timeout_ms / 1000)

    def hooks(self, actor: SessionActor, settings: Settings) -> ClientHooks:
        """The session's hooks for one request: its effective ``hooks.timeoutMs`` applies
        (the connection's ``initialize.settings`` included, not only the session's, which
        can only shorten it: see ``settings``)."""
        timeout = settings.hooks.timeout_ms / 1000
        return ClientHooks(self.clients, actor, lambda: timeout)

    # -- lifecycle handlers

    def initialize(self, ctx: RequestContext, params: InitializeParams) -> InitializeResult:
        state = self.client(ctx)
        state.name = (params.client_info or ClientInfo(name="client")).name[:MAX_CLIENT_NAME]
        warnings = list(self.settings_warnings)
        # A client built for a later daemon may name hooks this one does not have: they are
        # ignored, as unknown settings are, so that the client can still connect.
        unknown = [hook for hook in params.capabilities.hooks if hook not in HOOK_NAMES]
        if unknown:
            shown = ", ".join(json.dumps(hook)[:80] for hook in unknown[:10])
            warnings.append(f"capabilities.hooks: unknown hooks ignored: {shown}")
            params.capabilities.hooks = [h for h in params.capabilities.hooks if h in HOOK_NAMES]
        state.capabilities = params.capabilities
        effective = self.base_settings
        if params.settings:
            effective, problems = merge_settings(
                self.base_settings,
                params.settings,
                strict=False,
                source="initialize.settings",
                configured=self.base_settings,
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
                methods=sorted(self.router.requests),
                notifications=NOTIFICATIONS,
                hooks=HOOK_NAMES,
                summarizers=[c.kind for c in effective.summarizer.candidates] or ["extractive"],
            ),
            warnings=warnings,
        )

    def shutdown(self, ctx: RequestContext, params: object) -> None:
        self.sessions.sync_all()

    # -- what handlers share

    def actor(self, session_id: str) -> SessionActor:
        """The open session as it is (for what does not read its file: settings, aborts)."""
        return self.sessions.get(session_id)

    def on_session(self, session_id: str, work: Callable[[SessionActor], R]) -> R:
        """``work(actor)`` on the open session, up to date with its file: at once when
        nothing changed and nothing waits (the common case, answered inline); else
        ``AnswerLater``, whose coroutine runs it once a worker thread has read the
        changes (see ``service.actor``), in the order the session's requests came."""
        actor = self.sessions.get(session_id)
        if actor.ready_now():
            try:
                return work(actor)
            except CatchUpNeeded as needed:
                raise AnswerLater(self._when_caught_up(actor, work, needed.repair)) from None
        raise AnswerLater(self._when_caught_up(actor, work, False))

    async def ready(self, session_id: str) -> SessionActor:
        """The open session, up to date with its file (for handlers that wait anyway)."""
        actor = self.sessions.get(session_id)
        if actor.ready_now():
            return actor
        return await actor.use(lambda ready: ready)

    async def _when_caught_up(
        self, actor: SessionActor, work: Callable[[SessionActor], R], repair: bool
    ) -> R:
        for _ in range(_CATCH_UP_TRIES - 1):
            try:
                return await actor.use(work, repair=repair)
            except CatchUpNeeded as needed:
                if actor.follow_error is not None:
                    # The changes cannot be read (the file became a link, say): that is
                    # why this cannot be done, not that it should be tried again.
                    raise actor.follow_error from None
                repair = needed.repair  # others wrote again meanwhile
        return await actor.use(work, repair=repair)

    def settings(
        self,
        ctx: RequestContext,
        actor: SessionActor | None = None,
        call: dict[str, Any] | None = None,
    ) -> Settings:
        """Effective settings: file, then connection, then session, then this call.

        The session's layer is shared by every client of the session, so it may only
        shorten the waits of this request (hook timeouts, retries): what the file and
        this client's own layers allow is the most it waits."""
        state = self.client(ctx)
        trusted = self.base_settings
        settings = trusted
        if state.overrides:
            settings = self._layers.merge(settings, state.overrides, "client", configured=trusted)
        if actor is not None and actor.overrides:
            settings = self._layers.merge(
                settings, actor.overrides, "session", configured=trusted, session_layer=True
            )
        if call:
            settings, _ = merge_settings(
                settings, call, strict=True, source="settings", configured=trusted
            )
        return settings

    def usage(self, actor: SessionActor, settings: Settings, window: int | None) -> Usage:
        """How full the context is: pi 1.6's projected estimate (the last measured usage
        plus the estimates after it, unless a compaction or a context edit, pruning's
        included, came after that measurement)."""
        if window is not None and window <= 0:
            raise InvalidParamsError("contextWindow must be a positive number of tokens")
        context_window = window or settings.context.default_context_window
        estimator = actor.estimator(settings)
        estimate = actor.store.leaf_view.estimate_context(estimator)
        tokens = estimate.tokens
        threshold = resolve_threshold_tokens(context_window, settings.compaction)
        return Usage(
            tokens=tokens,
            context_window=context_window,
            threshold=threshold,
            should_compact=should_compact(tokens, context_window, settings.compaction),
            percent=round(100 * tokens / context_window, 2),
            usage_tokens=estimate.usage_tokens,
            trailing_tokens=estimate.trailing_tokens,
            estimator=estimator.name,
        )

    def _followed(self, actor: SessionActor, followed: Followed) -> None:
        self.changed(actor, followed.reason, followed.appended_ids)

    def changed(
        self,
        actor: SessionActor,
        reason: ChangeReason,
        appended: list[str] | None = None,
    ) -> None:
        actor.publish(
            "session/changed",
            SessionChanged(
                session_id=actor.session_id,
                reason=reason,
                leaf_id=actor.store.leaf_id,
                entry_count=actor.store.entry_count,
                appended_ids=appended or [],
            ),
        )

    def summaries(
        self,
        ctx: RequestContext,
        actor: SessionActor,
        settings: Settings,
        mode: Literal["manual", "auto"],
        title: str,
    ) -> SummaryContext:
        """A summarizer for this request, reporting ``$/progress`` when it has a token.
        ``llm/complete`` goes only to a client that has the session open."""
        client = self.clients.llm_client(
            preferred=ctx.connection.id, audience=lambda: actor.subscribers
        )
        progress = None
        if ctx.work_done_token is not None and self.client(ctx).wants("$/progress"):
            ctx.progress(WorkDoneBegin(title=title, cancellable=True))
            last = [0.0]

            def progress(update: Progress) -> None:
                now = time.monotonic()
                if now - last[0] < _PROGRESS_INTERVAL:
                    return
                last[0] = now
                ctx.progress(
                    WorkDoneReport(message=f"{update.model}: {update.chars} characters received")
                )

        # The summarizers load on first use: most requests never need them.
        from sessiond.service.summarizers import summary_context

        return summary_context(settings, mode=mode, client=client, progress=progress)

    def end_progress(self, ctx: RequestContext, message: str) -> None:
        if ctx.work_done_token is not None and self.client(ctx).wants("$/progress"):
            ctx.progress(WorkDoneEnd(message=message))
