"""What every handler shares: the trusted settings, the connected clients, the open sessions.

Settings are layered per request: the user's settings file, then the connection's
overrides (``initialize.settings``), then the session's (``settings/update``), then the
call's own (``settings`` in the params); every layer but the file is checked against
the file (``settings_trust``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any, Final, TypeVar

from sessiond.jsonrpc import AnswerLater, Connection, RequestContext, Router
from sessiond.jsonrpc.connection_limits import (
    DEFAULT_MAX_CONNECTIONS,
    FD_RESERVE_MIN,
    open_file_limit,
)
from sessiond.redaction import remember
from sessiond.service.actor import SessionActor
from sessiond.service.sessions import SessionLimits, SessionRegistry
from sessiond.settings import (
    LayerCache,
    Settings,
    load_settings,
    merge_settings,
    settings_to_builtins,
)
from sessiond.settings_trust import configured_secrets
from sessiond.store.foreign_writes import CatchUpNeeded, Followed

from .clients import ClientState, ConnectedClients
from .hooks import ClientHooks
from .notifications import announce_change

_log = logging.getLogger(__name__)
R = TypeVar("R")
# A request that meets others' changes this many times running gets ``busy``.
_CATCH_UP_TRIES: Final = 3


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
        self.clients = ConnectedClients()
        self.sessions = SessionRegistry(
            settings=lambda: self.base_settings,
            publish=self.clients.publish,
            hooks=self._hooks_for,
            on_followed=_followed,
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

    # -- sessions

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

    # -- settings

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


def _followed(actor: SessionActor, followed: Followed) -> None:
    announce_change(actor, followed.reason, followed.appended_ids)
