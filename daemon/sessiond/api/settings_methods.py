"""``settings/*``: the effective settings, globally or for one session.

What a client is shown never holds a secret: header values and credentials in URLs
are ``[redacted]`` (``settings_trust.redacted_view``). Sent back unchanged, that view
is accepted, and the configured values stay in use."""

from __future__ import annotations

from typing import Any

from sessiond.jsonrpc import RequestContext
from sessiond.settings import Settings, merge_settings, settings_to_builtins
from sessiond.settings_trust import SHORTEN_ONLY, redacted_view

from .daemon import Daemon
from .methods import MethodTable
from .types import GetSettingsParams, SettingsResult, UpdateSettingsParams


def _shown(settings: Settings) -> dict[str, Any]:
    return redacted_view(settings_to_builtins(settings))


METHODS = MethodTable()


@METHODS.request("settings/get", GetSettingsParams)
def get_settings(daemon: Daemon, ctx: RequestContext, params: GetSettingsParams) -> SettingsResult:
    actor = daemon.actor(params.session_id) if params.session_id else None
    return SettingsResult(
        settings=_shown(daemon.settings(ctx, actor)),
        warnings=list(daemon.settings_warnings),
    )


@METHODS.request("settings/update", UpdateSettingsParams)
def update_settings(
    daemon: Daemon, ctx: RequestContext, params: UpdateSettingsParams
) -> SettingsResult:
    # Validate strictly first: a bad key is the caller's to fix, nothing is applied.
    trusted = daemon.base_settings
    merge_settings(trusted, params.settings, strict=True, source="settings", configured=trusted)
    if params.session_id:
        actor = daemon.actor(params.session_id)
        _deep_update(actor.overrides, params.settings)
        effective = daemon.settings(ctx, actor)
        return SettingsResult(
            settings=_shown(effective),
            warnings=_not_lengthened(params.settings, settings_to_builtins(effective)),
        )
    state = daemon.client(ctx)
    _deep_update(state.overrides, params.settings)
    return SettingsResult(settings=_shown(daemon.settings(ctx)))


def _not_lengthened(asked: dict[str, Any], effective: dict[str, Any]) -> list[str]:
    """Say so when a session's value of a wait is more than this client's own requests use:
    a session's settings can shorten waits, never lengthen them."""
    notes = []
    for group, key in sorted(SHORTEN_ONLY):
        values = asked.get(group)
        if not isinstance(values, dict) or key not in values:
            continue
        used = effective[group][key]
        if values[key] != used:
            notes.append(
                f"{group}.{key}: a session's value only shortens waits; requests from this "
                f"connection use {used} (set it in initialize.settings or the call's settings "
                "for a longer wait)"
            )
    return notes


def _deep_update(target: dict[str, object], changes: dict[str, object]) -> None:
    for group, values in changes.items():
        current = target.get(group)
        if isinstance(current, dict) and isinstance(values, dict):
            current.update(values)
        else:
            target[group] = dict(values) if isinstance(values, dict) else values
