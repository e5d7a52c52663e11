"""Typed settings: pi's and oh-my-pi's keys and defaults plus sessiond's own.

Settings come from three layers, later ones winning: the defaults below, the
user's ``settings.json`` in the platformdirs config directory, and overrides
given per call (``--set KEY=VALUE`` on the CLI, ``settings`` in a request).

A bad value in the user's file never stops sessiond: that one key falls back
to its default and a warning names it. A bad override in a request is an error,
because the caller is there to see it.

The file and the command line are trusted; a request's overrides are a client's
and are checked against them (``settings_trust``): endpoints, headers and key
variables only ever come from trusted configuration.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from .errors import InvalidParamsError, SessiondError
from .settings_trust import admit, bound, redacted_view

_OPTIONS: dict[str, Any] = {"rename": "camel", "kw_only": True, "forbid_unknown_fields": True}

NonNegativeInt = Annotated[int, msgspec.Meta(ge=0)]
PositiveInt = Annotated[int, msgspec.Meta(ge=1)]


class CompactionSettings(msgspec.Struct, **_OPTIONS):
    enabled: bool = True
    # "handoff" is oh-my-pi's; sessiond accepts the value and compacts as context-full.
    strategy: Literal["context-full", "handoff", "off"] = "context-full"
    threshold_percent: float = -1
    threshold_tokens: float = -1
    reserve_tokens: NonNegativeInt = 16384
    # oh-my-pi raises the reserve to 15 % of the window; pi does not (0).
    reserve_floor_percent: Annotated[float, msgspec.Meta(ge=0, le=99)] = 0
    keep_recent_tokens: NonNegativeInt = 20000
    auto_continue: bool = True
    remote_enabled: bool = True
    remote_endpoint: str | None = None
    # sessiond's own keys
    token_estimator: Literal["tiktoken", "chars"] = "tiktoken"
    # oh-my-pi's two-to-three sentence summary of the kept work, on every compaction.
    short_summary: bool = True
    adjust_keep_by_usage: bool = True
    prune_tool_outputs: bool = True
    # Past this share of the threshold, the summary is written in the background while
    # the agent goes on, and committed at the threshold; 0 switches it off.
    background_at: Annotated[float, msgspec.Meta(ge=0, lt=1)] = 0.7


class BranchSummarySettings(msgspec.Struct, **_OPTIONS):
    enabled: bool = False
    reserve_tokens: NonNegativeInt = 16384
    skip_prompt: bool = False


class RetrySettings(msgspec.Struct, **_OPTIONS):
    enabled: bool = True
    max_retries: NonNegativeInt = 3
    base_delay_ms: NonNegativeInt = 2000
    max_delay_ms: NonNegativeInt = 60000
    # A single wait longer than this moves on to the next summarizer candidate.
    max_candidate_delay_ms: NonNegativeInt = 30000


SummarizerKind = Literal["openai", "anthropic", "remote", "client", "extractive"]


class SummarizerCandidate(msgspec.Struct, **_OPTIONS):
    """One model sessiond may summarize with, tried in the order listed."""

    kind: SummarizerKind
    model: str = ""
    base_url: str | None = None
    # The *name* of the environment variable holding the key; never the key itself.
    api_key_env: str | None = None
    context_window: PositiveInt = 128000
    timeout_seconds: Annotated[float, msgspec.Meta(gt=0)] = 120.0
    reasoning: bool = False
    headers: dict[str, str] = msgspec.field(default_factory=dict)


class SummarizerSettings(msgspec.Struct, **_OPTIONS):
    # Empty: the offline extractive summarizer. It is also the last resort
    # after every listed candidate failed, unless ``extractiveFallback`` is off.
    candidates: list[SummarizerCandidate] = msgspec.field(default_factory=list)
    extractive_fallback: bool = True


class StorageSettings(msgspec.Struct, **_OPTIONS):
    fsync: Literal["always", "batch", "never"] = "batch"
    # With "batch", appended lines reach the disk at most this long after the append.
    fsync_interval_ms: NonNegativeInt = 200
    # Keep what a scan found in the cache directory, so that the next open of the file
    # reads only what was appended since (see store/index_file.py).
    persistent_index: bool = True
    session_dir: str | None = None
    # When set, clients may only open, create or list sessions under these
    # directories (symlinks resolved). Unset: any path the user can read.
    allowed_roots: list[str] | None = None


class HookSettings(msgspec.Struct, **_OPTIONS):
    timeout_ms: NonNegativeInt = 30000


class ContextSettings(msgspec.Struct, **_OPTIONS):
    # Used when a request does not say which context window the model has.
    default_context_window: PositiveInt = 128000


class Settings(msgspec.Struct, **_OPTIONS):
    compaction: CompactionSettings = msgspec.field(default_factory=CompactionSettings)
    branch_summary: BranchSummarySettings = msgspec.field(default_factory=BranchSummarySettings)
    retry: RetrySettings = msgspec.field(default_factory=RetrySettings)
    summarizer: SummarizerSettings = msgspec.field(default_factory=SummarizerSettings)
    storage: StorageSettings = msgspec.field(default_factory=StorageSettings)
    hooks: HookSettings = msgspec.field(default_factory=HookSettings)
    context: ContextSettings = msgspec.field(default_factory=ContextSettings)


def settings_to_builtins(settings: Settings) -> dict[str, Any]:
    """The settings as plain JSON-ready data, camelCase keys."""
    data = msgspec.to_builtins(settings)
    assert isinstance(data, dict)
    return data


def _group_names() -> dict[str, type[msgspec.Struct]]:
    groups: dict[str, type[msgspec.Struct]] = {}
    for field in msgspec.structs.fields(Settings):
        assert isinstance(field.type, type) and issubclass(field.type, msgspec.Struct)
        groups[field.encode_name] = field.type
    return groups


_GROUPS = _group_names()


def _group_keys(group: type[msgspec.Struct]) -> set[str]:
    return {field.encode_name for field in msgspec.structs.fields(group)}


def merge_settings(
    base: Settings,
    overrides: Mapping[str, Any],
    *,
    strict: bool,
    source: str,
    configured: Settings | None = None,
    session_layer: bool = False,
) -> tuple[Settings, list[str]]:
    """Apply ``{group: {key: value}}`` overrides on top of ``base``.

    With ``strict`` the first bad key raises (``InvalidParamsError``, or
    ``TrustedSettingError`` for what a client may not set); without it each bad key is
    skipped (its current value kept) and described in the returned warnings.
    ``source`` names where the overrides came from, for the messages.

    ``configured`` is None for trusted overrides (the settings file, ``--set``). For a
    client's overrides it is the trusted settings they are checked against: the rules
    of ``settings_trust`` (endpoints and key sources only from trusted configuration,
    client maximums), plus, with ``session_layer``, waits that only shorten.
    """
    warnings: list[str] = []
    merged = settings_to_builtins(base)
    trusted = settings_to_builtins(configured) if configured is not None else None

    def problem(text: str) -> None:
        if strict:
            raise InvalidParamsError(f"{source}: {text}", setting=text.split(":", maxsplit=1)[0])
        warnings.append(f"{source}: {text}")

    def refuse(error: SessiondError, outcome: str = "ignored") -> None:
        if strict:
            raise type(error)(f"{source}: {error.message}", **error.details)
        warnings.append(f"{source}: {error.message}; {outcome}")

    if not isinstance(overrides, Mapping):  # JSON input: the annotation is a hope
        problem("settings must be a JSON object")  # type: ignore[unreachable]
        return base, warnings
    for group_name, group_values in overrides.items():
        group_type = _GROUPS.get(group_name)
        if group_type is None:
            problem(f"{group_name}: unknown settings group, ignored")
            continue
        if not isinstance(group_values, Mapping):
            problem(f"{group_name}: expected an object of settings, ignored")
            continue
        known = _group_keys(group_type)
        for key, given in group_values.items():
            dotted = f"{group_name}.{key}"
            if key not in known:
                problem(f"{dotted}: unknown setting, ignored")
                continue
            value = given
            if trusted is not None:
                try:
                    value, refusals = admit(
                        group_name, key, given, trusted, session_layer=session_layer
                    )
                except SessiondError as error:
                    refuse(error)
                    continue
                for refusal in refusals:
                    refuse(refusal, "left out of the list")
            candidate = dict(merged[group_name])
            candidate[key] = value
            try:
                checked = msgspec.convert(candidate, group_type)
            except msgspec.ValidationError as exc:
                current = _shown(group_name, key, merged[group_name].get(key))
                problem(f"{dotted}: {_describe(exc)}; keeping {current}")
                continue
            if trusted is not None:
                try:
                    candidate[key] = bound(
                        group_name,
                        key,
                        msgspec.to_builtins(getattr(checked, _attribute(group_type, key))),
                        configured=trusted[group_name].get(key),
                        current=merged[group_name].get(key),
                        session_layer=session_layer,
                    )
                except SessiondError as error:
                    refuse(error)
                    continue
            merged[group_name] = candidate
    return msgspec.convert(merged, Settings), warnings


def _attribute(group: type[msgspec.Struct], encoded: str) -> str:
    return next(f.name for f in msgspec.structs.fields(group) if f.encode_name == encoded)


def _shown(group: str, key: str, value: Any) -> str:
    """A current value as a message may quote it: without header values or URL secrets."""
    shown = redacted_view({group: {key: value}})[group][key]
    return msgspec.json.encode(shown).decode()


class LayerCache:
    """Remembers ``merge_settings`` results for client and session layers.

    Handlers ask for the effective settings on every request; merging re-validates
    every group and costs more than a whole cheap request. Layers are dicts that
    ``settings/update`` changes in place, so the key is their encoded content. The
    base and the trusted settings are part of the key by identity: a reloaded file is
    a new object, and each entry holds them, so that an id cannot be taken by another
    object meanwhile."""

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._merged: dict[
            tuple[int, int, str, bool, bytes], tuple[Settings, Settings, Settings]
        ] = {}

    def __len__(self) -> int:
        return len(self._merged)

    def merge(
        self,
        base: Settings,
        overrides: Mapping[str, Any],
        source: str,
        *,
        configured: Settings | None = None,
        session_layer: bool = False,
    ) -> Settings:
        """Lenient merge of a client's layer (bad keys skipped: they were checked when set),
        checked against ``configured`` (the trusted settings; default ``base``)."""
        trusted = base if configured is None else configured

        def merge() -> Settings:
            return merge_settings(
                base,
                overrides,
                strict=False,
                source=source,
                configured=trusted,
                session_layer=session_layer,
            )[0]

        try:
            key = (id(base), id(trusted), source, session_layer, msgspec.json.encode(overrides))
        except (TypeError, ValueError):  # not JSON: uncachable, merge_settings will say why
            return merge()
        hit = self._merged.get(key)
        if hit is not None and hit[0] is base and hit[1] is trusted:
            return hit[2]
        merged = merge()
        if len(self._merged) >= self._size:
            self._merged.pop(next(iter(self._merged)))
        self._merged[key] = (base, trusted, merged)
        return merged


def _describe(exc: msgspec.ValidationError) -> str:
    text = str(exc)
    # msgspec appends " - at `$.key`"; the caller already names the key.
    return text.split(" - at `", 1)[0]


def parse_assignments(assignments: Iterable[str]) -> dict[str, Any]:
    """``["compaction.reserveTokens=8000", ...]`` to nested overrides.

    The value is read as JSON when it parses (numbers, booleans, null, lists),
    else taken as a plain string.
    """
    overrides: dict[str, Any] = {}
    for assignment in assignments:
        key, sep, raw = assignment.partition("=")
        group, dot, name = key.strip().partition(".")
        if not sep or not dot or not group or not name:
            raise InvalidParamsError(
                f"--set expects GROUP.KEY=VALUE (for example compaction.reserveTokens=8000), "
                f"got {assignment!r}"
            )
        value: Any
        try:
            value = msgspec.json.decode(raw.encode())
        except msgspec.DecodeError:
            value = raw
        overrides.setdefault(group, {})[name] = value
    return overrides


def default_settings_path() -> Path:
    from .paths import config_dir

    return config_dir() / "settings.json"


def load_settings(path: Path | None = None) -> tuple[Settings, list[str]]:
    """Read the user's settings file. Never raises for a bad file; returns warnings."""
    named = path is not None
    path = path if path is not None else default_settings_path()
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        # Having no settings file is the normal case; a file named on the command line
        # that is not there is a typo the user should hear about.
        return Settings(), [f"{path}: no such settings file; using defaults"] if named else []
    except OSError as exc:
        return Settings(), [f"{path}: cannot read settings ({exc.strerror}); using defaults"]
    warnings = _permission_warnings(path)
    try:
        data = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        return Settings(), [*warnings, f"{path}: not valid JSON ({exc}); using defaults"]
    settings, problems = merge_settings(Settings(), data, strict=False, source=str(path))
    return settings, [*warnings, *problems]


def _permission_warnings(path: Path) -> list[str]:
    """A settings file others can write could point a summarizer at their server."""
    if os.name != "posix":
        return []
    try:
        mode = path.stat().st_mode
    except OSError:
        return []
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        return [
            f"{path}: writable by other users (mode {stat.S_IMODE(mode):o}); anyone who can "
            "edit it can redirect summaries and the API keys they carry. Run chmod 600 on it."
        ]
    return []
