"""What a client may set: the trust boundary of settings.

Trusted configuration is the user's settings file and the command line (``--set``).
Clients are not trusted, through any of their layers (``initialize.settings``,
``settings/update`` for the connection or a session, a call's ``settings``): a
client that could choose where a summary is sent, or which environment variable its
key is read from, could have the daemon send the user's key (and the conversation) to
a server of its own. So:

- Endpoints and key sources come only from trusted configuration: ``TRUSTED_ONLY``
  settings, and the ``baseUrl``, ``apiKeyEnv`` and ``headers`` of summarizer
  candidates. A client's candidate either needs no endpoint (``client``,
  ``extractive``) or names a configured candidate (same kind, and the same ``model``,
  ``baseUrl``, ``apiKeyEnv``, ``headers`` where it gives them, as configured or as
  ``settings/get`` shows them); the configured candidate is used, with the client's
  ``contextWindow``, ``timeoutSeconds`` and ``reasoning``.
- Waits a client can stretch have maximums (``CLIENT_MAXIMUMS``); a larger value is
  refused unless it is the configured one (so a ``settings/get`` answer sent back
  is accepted).
- A session's layer reaches every client of the session, so for the settings that
  bound a request's waits (``SHORTEN_ONLY``) it can shorten them, never lengthen
  them past what the requesting client's own layers say.

These functions work on plain (camelCase) data, before and after ``msgspec`` checks
the values' types; ``settings.merge_settings`` applies them to untrusted layers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .errors import InvalidParamsError, SessiondError, TrustedSettingError
from .redaction import REDACTED, header_secrets, redact_url, url_secrets

Key = tuple[str, str]

# Settings only trusted configuration sets: an endpoint that receives the
# conversation, and the confinement of session paths (a client could lift it).
TRUSTED_ONLY: frozenset[Key] = frozenset(
    {("compaction", "remoteEndpoint"), ("storage", "allowedRoots")}
)
# Candidate fields that say where a request goes and what credentials it carries.
TRUSTED_CANDIDATE_FIELDS = ("baseUrl", "apiKeyEnv", "headers")
# Fields a client may give to pick a configured candidate.
IDENTITY_FIELDS = ("model", *TRUSTED_CANDIDATE_FIELDS)
# Candidate fields a client may set on a candidate it picked.
CLIENT_CANDIDATE_FIELDS = ("contextWindow", "timeoutSeconds", "reasoning")
# Kinds that need no endpoint and no key.
SELF_CONTAINED_KINDS = frozenset({"client", "extractive"})
NETWORK_KINDS = frozenset({"openai", "anthropic", "remote"})
# Settings and candidate fields holding a URL (shown with credentials redacted).
URL_FIELDS = frozenset({"baseUrl", "remoteEndpoint"})

CLIENT_MAXIMUMS: dict[Key, int] = {
    ("hooks", "timeoutMs"): 300_000,
    ("retry", "maxRetries"): 10,
    ("retry", "baseDelayMs"): 60_000,
    ("retry", "maxDelayMs"): 300_000,
    ("retry", "maxCandidateDelayMs"): 300_000,
}
# 0 means "no limit" for these: more than any maximum.
ZERO_IS_UNLIMITED: frozenset[Key] = frozenset({("retry", "maxDelayMs")})
CLIENT_MAX_TIMEOUT_SECONDS = 600.0
CLIENT_MAX_CANDIDATES = 8
# Settings that bound how long a request waits: a session's layer may only lower them.
SHORTEN_ONLY: frozenset[Key] = frozenset({*CLIENT_MAXIMUMS, ("retry", "enabled")})

DEFAULT_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


def key_variable(kind: str, api_key_env: str | None, base_url: str | None) -> str | None:
    """The environment variable a candidate's key is read from (the provider's usual
    one for openai and anthropic without ``apiKeyEnv`` and ``baseUrl``)."""
    if api_key_env is None and base_url is None:
        return DEFAULT_KEY_ENV.get(kind)
    return api_key_env


# -- before the value's type is checked -----------------------------------------------------


def admit(
    group: str,
    key: str,
    value: Any,
    configured: Mapping[str, Any],
    *,
    session_layer: bool,
) -> tuple[Any, list[SessiondError]]:
    """What a client's ``value`` for ``group.key`` stands for, checked against the
    trusted ``configured`` settings (plain data, every group).

    Raises for a value the client may not set at all. For ``summarizer.candidates``
    it also returns the refusals of single entries, which the caller raises (strict)
    or drops with a warning (lenient); the returned list then leaves them out.
    """
    dotted = f"{group}.{key}"
    trusted_value = configured.get(group, {}).get(key)
    if (group, key) in TRUSTED_ONLY:
        if _same_value(value, trusted_value, key):
            return trusted_value, []
        raise TrustedSettingError(
            f"{dotted} can only be set in the settings file or on the command line",
            setting=dotted,
        )
    if (group, key) == ("summarizer", "candidates"):
        return _candidates(value, trusted_value or [], dotted, session_layer=session_layer)
    return value, []


def _candidates(
    value: Any, configured: list[dict[str, Any]], dotted: str, *, session_layer: bool
) -> tuple[Any, list[SessiondError]]:
    if not isinstance(value, list):
        return value, []  # not a list: the type check says so
    # As many as the settings file lists, so that its own list can be sent back.
    most = max(CLIENT_MAX_CANDIDATES, len(configured))
    if len(value) > most:
        raise InvalidParamsError(
            f"{dotted}: a client may list at most {most} candidates",
            setting=dotted,
            maximum=most,
        )
    kept: list[Any] = []
    refused: list[SessiondError] = []
    for index, given in enumerate(value):
        try:
            kept.append(
                _candidate(given, configured, f"{dotted}[{index}]", session_layer=session_layer)
            )
        except SessiondError as refusal:
            refused.append(refusal)
    return kept, refused


def _candidate(
    given: Any, configured: list[dict[str, Any]], where: str, *, session_layer: bool
) -> Any:
    if not isinstance(given, dict) or given.get("kind") not in (
        SELF_CONTAINED_KINDS | NETWORK_KINDS
    ):
        return given  # not a candidate: the type check says why
    kind = given["kind"]
    if kind in SELF_CONTAINED_KINDS:
        _check_timeout(given, where, configured_timeout=None)
        for name in TRUSTED_CANDIDATE_FIELDS:
            if given.get(name):
                raise TrustedSettingError(
                    f"{where}.{name}: a {kind} candidate has no {name}, and a client "
                    "cannot give one",
                    setting=f"{where}.{name}",
                )
        return given
    same_kind = [c for c in configured if c.get("kind") == kind]
    for candidate in same_kind:
        if all(
            _same_value(given[name], candidate.get(name), name)
            for name in IDENTITY_FIELDS
            if name in given
        ):
            return _picked(given, candidate, where, session_layer=session_layer)
    differing = next(
        (
            name
            for name in TRUSTED_CANDIDATE_FIELDS
            if name in given
            and not any(_same_value(given[name], c.get(name), name) for c in same_kind)
        ),
        None,
    )
    named = f"{where}.{differing}" if differing else where
    given_fields = [name for name in IDENTITY_FIELDS if name in given]
    asked = _listed(given_fields) if given_fields else "kind"
    raise TrustedSettingError(
        f"{named}: no configured {kind} candidate has the {asked} given; a client can only "
        "choose among the candidates of the settings file or the command line, where "
        'endpoints and keys are configured (or use kind "client")',
        setting=named,
    )


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _picked(
    given: dict[str, Any], candidate: dict[str, Any], where: str, *, session_layer: bool
) -> dict[str, Any]:
    """The configured ``candidate`` with what the client may change of it."""
    picked = dict(candidate)
    for name, value in given.items():
        if name in CLIENT_CANDIDATE_FIELDS:
            picked[name] = value
        elif name not in IDENTITY_FIELDS and name != "kind":
            picked[name] = value  # unknown: the type check names it
    configured_timeout = candidate.get("timeoutSeconds")
    _check_timeout(given, where, configured_timeout=configured_timeout)
    timeout, configured_seconds = _number(picked.get("timeoutSeconds")), _number(configured_timeout)
    if session_layer and timeout is not None and configured_seconds is not None:
        picked["timeoutSeconds"] = min(timeout, configured_seconds)
    return picked


def _check_timeout(given: dict[str, Any], where: str, *, configured_timeout: Any) -> None:
    timeout = _number(given.get("timeoutSeconds"))
    if (
        timeout is not None
        and timeout > CLIENT_MAX_TIMEOUT_SECONDS
        and timeout != configured_timeout
    ):
        raise InvalidParamsError(
            f"{where}.timeoutSeconds: a client may set at most {CLIENT_MAX_TIMEOUT_SECONDS:g}",
            setting=f"{where}.timeoutSeconds",
            maximum=CLIENT_MAX_TIMEOUT_SECONDS,
        )


def _same_value(given: Any, configured: Any, name: str = "") -> bool:
    """Whether a client's value is the configured one, or what ``settings/get`` shows of it."""
    if given == configured:
        return True
    if name in URL_FIELDS and isinstance(configured, str) and isinstance(given, str):
        return given == redact_url(configured)
    if name == "headers" and isinstance(configured, dict) and isinstance(given, dict):
        return given.keys() == configured.keys() and all(
            given[header] in (configured[header], REDACTED) for header in configured
        )
    return False


# -- after the value's type is checked ---------------------------------------------------


def bound(
    group: str,
    key: str,
    value: Any,
    *,
    configured: Any,
    current: Any,
    session_layer: bool,
) -> Any:
    """A client's (type-checked) value within the client maximum; in a session's layer,
    no longer a wait than ``current`` (the requesting client's own value)."""
    dotted = f"{group}.{key}"
    maximum = CLIENT_MAXIMUMS.get((group, key))
    if maximum is not None and value != configured:
        unlimited = (group, key) in ZERO_IS_UNLIMITED and value == 0
        if unlimited or value > maximum:
            raise InvalidParamsError(
                f"{dotted}: a client may set at most {maximum}"
                + (" (0, no limit, only in the settings file)" if unlimited else ""),
                setting=dotted,
                maximum=maximum,
            )
    if session_layer and (group, key) in SHORTEN_ONLY:
        if isinstance(value, bool):
            return value and bool(current)
        if (group, key) in ZERO_IS_UNLIMITED:
            return min(value or math.inf, current or math.inf) if value or current else 0
        return min(value, current)
    return value


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    return None


# -- what clients are shown, and what must never be said ----------------------------------


def redacted_view(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Settings as plain data for a client: header values, URL passwords and query
    values replaced by ``[redacted]`` (names of key variables are shown, never keys)."""
    view = {group: dict(values) for group, values in settings.items()}
    endpoint = view.get("compaction", {}).get("remoteEndpoint")
    if isinstance(endpoint, str):
        view["compaction"]["remoteEndpoint"] = redact_url(endpoint)
    summarizer = view.get("summarizer")
    if summarizer is not None and isinstance(summarizer.get("candidates"), list):
        summarizer["candidates"] = [_redacted_candidate(c) for c in summarizer["candidates"]]
    return view


def _redacted_candidate(candidate: Any) -> Any:
    if not isinstance(candidate, dict):
        return candidate
    shown = dict(candidate)
    if isinstance(shown.get("headers"), dict):
        shown["headers"] = {name: REDACTED for name in shown["headers"]}
    if isinstance(shown.get("baseUrl"), str):
        shown["baseUrl"] = redact_url(shown["baseUrl"])
    return shown


def configured_secrets(settings: Mapping[str, Any], environ: Mapping[str, str]) -> list[str]:
    """Every secret the trusted settings give access to: keys in the variables the
    candidates name, header values, and credentials in URLs."""
    found: list[str] = []
    endpoint = settings.get("compaction", {}).get("remoteEndpoint")
    found += url_secrets(endpoint if isinstance(endpoint, str) else None)
    for candidate in settings.get("summarizer", {}).get("candidates", []):
        found += header_secrets(candidate.get("headers") or {})
        found += url_secrets(candidate.get("baseUrl"))
        variable = key_variable(
            candidate.get("kind", ""), candidate.get("apiKeyEnv"), candidate.get("baseUrl")
        )
        if variable:
            found.append(environ.get(variable, "").strip())
    return [secret for secret in found if secret]
