"""``settings/*``: the effective settings, globally or for one session."""

from __future__ import annotations

from sessiond.server import RequestContext
from sessiond.settings import merge_settings, settings_to_builtins

from .daemon import Daemon
from .types import GetSettingsParams, SettingsResult, UpdateSettingsParams


def register(daemon: Daemon) -> None:
    router = daemon.router

    @router.request("settings/get", GetSettingsParams)
    def get(ctx: RequestContext, params: GetSettingsParams) -> SettingsResult:
        actor = daemon.actor(params.session_id) if params.session_id else None
        return SettingsResult(
            settings=settings_to_builtins(daemon.settings(ctx, actor)),
            warnings=list(daemon.settings_warnings),
        )

    @router.request("settings/update", UpdateSettingsParams)
    def update(ctx: RequestContext, params: UpdateSettingsParams) -> SettingsResult:
        # Validate strictly first: a bad key is the caller's to fix, nothing is applied.
        merge_settings(
            daemon.base_settings, params.settings, strict=True, source="settings", trusted=False
        )
        if params.session_id:
            actor = daemon.actor(params.session_id)
            _deep_update(actor.overrides, params.settings)
            return SettingsResult(settings=settings_to_builtins(daemon.settings(ctx, actor)))
        state = daemon.client(ctx)
        _deep_update(state.overrides, params.settings)
        return SettingsResult(settings=settings_to_builtins(daemon.settings(ctx)))


def _deep_update(target: dict[str, object], changes: dict[str, object]) -> None:
    for group, values in changes.items():
        current = target.get(group)
        if isinstance(current, dict) and isinstance(values, dict):
            current.update(values)
        else:
            target[group] = dict(values) if isinstance(values, dict) else values
