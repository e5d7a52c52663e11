import json
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest

from sessiond.errors import InvalidParamsError, TrustedSettingError
from sessiond.settings import (
    LayerCache,
    Settings,
    load_settings,
    merge_settings,
    parse_assignments,
    settings_to_builtins,
)
from sessiond.settings_trust import redacted_view


def test_defaults_are_pis():
    s = Settings()
    assert s.compaction.enabled is True
    assert s.compaction.reserve_tokens == 16384
    assert s.compaction.keep_recent_tokens == 20000
    assert s.compaction.threshold_percent == -1
    assert s.compaction.threshold_tokens == -1
    assert s.compaction.auto_continue is True
    assert s.compaction.remote_endpoint is None
    assert s.branch_summary.enabled is False
    assert s.branch_summary.reserve_tokens == 16384
    assert (s.retry.enabled, s.retry.max_retries, s.retry.base_delay_ms) == (True, 3, 2000)
    assert s.compaction.token_estimator == "tiktoken"
    assert s.storage.fsync == "batch"


def test_missing_default_file_gives_defaults_quietly(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    settings, warnings = load_settings()
    assert settings == Settings() and warnings == []


def test_missing_named_file_gives_defaults_with_a_warning(tmp_path: Path):
    settings, warnings = load_settings(tmp_path / "nope.json")
    assert settings == Settings()
    assert warnings == [f"{tmp_path / 'nope.json'}: no such settings file; using defaults"]


def test_bad_key_falls_back_and_is_named(tmp_path: Path):
    path = tmp_path / "settings.json"
    path.write_text(
        json.dumps(
            {
                "compaction": {"reserveTokens": "lots", "keepRecentTokens": 1234, "bogus": 1},
                "nonsense": {},
            }
        )
    )
    os.chmod(path, 0o600)
    settings, warnings = load_settings(path)
    assert settings.compaction.reserve_tokens == 16384
    assert settings.compaction.keep_recent_tokens == 1234
    text = "\n".join(warnings)
    assert "compaction.reserveTokens" in text and "keeping 16384" in text
    assert "compaction.bogus: unknown setting" in text
    assert "nonsense: unknown settings group" in text


def test_invalid_json_file_warns(tmp_path: Path):
    path = tmp_path / "settings.json"
    path.write_text("{not json")
    os.chmod(path, 0o600)
    settings, warnings = load_settings(path)
    assert settings == Settings()
    assert len(warnings) == 1 and "not valid JSON" in warnings[0]


def test_world_writable_file_is_warned_about(tmp_path: Path):
    path = tmp_path / "settings.json"
    path.write_text("{}")
    os.chmod(path, 0o666)
    _, warnings = load_settings(path)
    assert any("writable by other users" in w for w in warnings)


def test_strict_override_raises():
    with pytest.raises(InvalidParamsError) as info:
        merge_settings(
            Settings(), {"compaction": {"strategy": "sometimes"}}, strict=True, source="request"
        )
    assert "compaction.strategy" in info.value.message


def test_assignments_parse_json_values():
    overrides = parse_assignments(
        [
            "compaction.reserveTokens=8000",
            "compaction.remoteEndpoint=http://x/y",
            "retry.enabled=false",
        ]
    )
    assert overrides == {
        "compaction": {"reserveTokens": 8000, "remoteEndpoint": "http://x/y"},
        "retry": {"enabled": False},
    }
    merged, warnings = merge_settings(Settings(), overrides, strict=True, source="--set")
    assert merged.compaction.reserve_tokens == 8000 and merged.retry.enabled is False
    assert warnings == []
    with pytest.raises(InvalidParamsError):
        parse_assignments(["reserveTokens=1"])


def test_settings_round_trip_camel_case():
    data = msgspec.to_builtins(Settings())
    assert "reserveTokens" in data["compaction"] and "branchSummary" in data


def test_layer_cache_reuses_a_merge_until_the_layer_or_the_base_changes():
    cache = LayerCache(size=2)
    base = Settings()
    layer = {"compaction": {"reserveTokens": 8000}}
    first = cache.merge(base, layer, "client")
    assert first.compaction.reserve_tokens == 8000
    assert cache.merge(base, layer, "client") is first
    # settings/update changes the layer dict in place: the next merge must see it
    layer["compaction"]["reserveTokens"] = 9000
    assert cache.merge(base, layer, "client").compaction.reserve_tokens == 9000
    # a reloaded settings file is a new base, even with equal values
    reloaded = Settings()
    assert cache.merge(reloaded, layer, "client") is not cache.merge(base, layer, "client")
    # bad keys are skipped as the lenient merge skips them, never raised
    skipped = cache.merge(base, {"compaction": {"reserveTokens": "many"}}, "session")
    assert skipped.compaction.reserve_tokens == base.compaction.reserve_tokens


def test_layer_cache_stays_bounded():
    cache = LayerCache(size=3)
    base = Settings()
    merged = [cache.merge(base, {"compaction": {"reserveTokens": n}}, "client") for n in range(10)]
    assert [m.compaction.reserve_tokens for m in merged] == list(range(10))
    assert len(cache) == 3


# -- the trust boundary: what a client may set ------------------------------------------------

CONFIGURED = {
    "kind": "openai",
    "model": "gpt",
    "baseUrl": "http://user:pw1234567@llm.lan/v1",
    "apiKeyEnv": "MY_KEY",
    "headers": {"x-api-key": "header-secret-1", "x-title": "app"},
    "timeoutSeconds": 900,
}


def trusted_settings(**groups: Any) -> Settings:
    file = {"summarizer": {"candidates": [CONFIGURED]}, **groups}
    merged, warnings = merge_settings(Settings(), file, strict=True, source="file")
    assert warnings == []
    return merged


def client_merge(
    trusted: Settings, overrides: dict[str, Any], *, base: Settings | None = None, **options: Any
) -> Settings:
    merged, _ = merge_settings(
        base or trusted, overrides, strict=True, source="settings", configured=trusted, **options
    )
    return merged


def test_a_client_picks_a_configured_candidate_and_keeps_its_endpoint_and_key() -> None:
    trusted = trusted_settings()
    picked = client_merge(
        trusted,
        {
            "summarizer": {
                "candidates": [{"kind": "client"}, {"kind": "openai", "contextWindow": 8000}]
            }
        },
    )
    client, network = picked.summarizer.candidates
    assert client.kind == "client"
    assert (network.base_url, network.api_key_env) == (CONFIGURED["baseUrl"], "MY_KEY")
    assert network.headers == CONFIGURED["headers"] and network.context_window == 8000


@pytest.mark.parametrize(
    ("candidate", "named"),
    [
        ({"kind": "openai", "baseUrl": "http://127.0.0.1:9/v1"}, "baseUrl"),
        ({"kind": "openai", "model": "gpt", "apiKeyEnv": "HOME"}, "apiKeyEnv"),
        ({"kind": "openai", "headers": {"x-api-key": "mine"}}, "headers"),
        ({"kind": "anthropic"}, None),  # no anthropic candidate is configured
        ({"kind": "openai", "model": "other"}, None),
        ({"kind": "remote", "baseUrl": "http://127.0.0.1:9/x"}, "baseUrl"),
        ({"kind": "client", "apiKeyEnv": "HOME"}, "apiKeyEnv"),
        ({"kind": "client", "baseUrl": "http://127.0.0.1:9/v1"}, "baseUrl"),
    ],
)
def test_a_client_cannot_name_an_endpoint_a_key_variable_or_headers(
    candidate: dict[str, Any], named: str | None
) -> None:
    trusted = trusted_settings()
    overrides = {"summarizer": {"candidates": [{"kind": "client"}, candidate]}}
    with pytest.raises(TrustedSettingError) as refused:
        client_merge(trusted, overrides)
    setting = "summarizer.candidates[1]" + (f".{named}" if named else "")
    assert refused.value.details == {"setting": setting}
    assert refused.value.code == -32602 and refused.value.kind == "trustedSetting"
    # Lenient (initialize.settings): the entry is left out, the rest kept, a warning says so.
    merged, warnings = merge_settings(
        trusted, overrides, strict=False, source="initialize.settings", configured=trusted
    )
    assert [c.kind for c in merged.summarizer.candidates] == ["client"]
    assert len(warnings) == 1 and setting in warnings[0]


@pytest.mark.parametrize(
    "overrides",
    [
        {"compaction": {"remoteEndpoint": "http://127.0.0.1:9/compact"}},
        {"storage": {"allowedRoots": ["/"]}},
        {"storage": {"allowedRoots": None}},
    ],
)
def test_trusted_only_settings_are_refused_unless_unchanged(overrides: dict[str, Any]) -> None:
    trusted = trusted_settings(
        compaction={"remoteEndpoint": "https://c.example/v1?key=k1234567"},
        storage={"allowedRoots": ["/srv"]},
    )
    with pytest.raises(TrustedSettingError):
        client_merge(trusted, overrides)
    # The configured value, or what settings/get shows of it, is accepted unchanged.
    for group, values in overrides.items():
        for key in values:
            same = redacted_view(settings_to_builtins(trusted))[group][key]
            kept = client_merge(trusted, {group: {key: same}})
            assert kept == trusted


def test_settings_get_output_round_trips_and_shows_no_secret() -> None:
    trusted = trusted_settings(compaction={"remoteEndpoint": "https://c.example/v1?key=k1234567"})
    shown = redacted_view(settings_to_builtins(trusted))
    text = json.dumps(shown)
    for secret in ("header-secret-1", "pw1234567", "k1234567"):
        assert secret not in text
    assert shown["summarizer"]["candidates"][0]["headers"] == {
        "x-api-key": "[redacted]",
        "x-title": "[redacted]",
    }
    assert client_merge(trusted, shown) == trusted
    assert client_merge(trusted, shown, session_layer=True) == trusted


def test_messages_about_a_bad_value_do_not_quote_header_values() -> None:
    trusted = trusted_settings()
    with pytest.raises(InvalidParamsError) as refused:
        client_merge(trusted, {"summarizer": {"candidates": "all of them"}})
    assert "header-secret-1" not in refused.value.message and "[redacted]" in refused.value.message


@pytest.mark.parametrize(
    ("group", "key", "value", "maximum"),
    [
        ("hooks", "timeoutMs", 10**12, 300000),
        ("retry", "maxRetries", 11, 10),
        ("retry", "baseDelayMs", 60001, 60000),
        ("retry", "maxDelayMs", 0, 300000),
        ("retry", "maxCandidateDelayMs", 10**9, 300000),
    ],
)
def test_waits_a_client_sets_have_a_maximum(group: str, key: str, value: int, maximum: int) -> None:
    trusted = trusted_settings()
    with pytest.raises(InvalidParamsError) as refused:
        client_merge(trusted, {group: {key: value}})
    assert refused.value.kind == "invalidParams"
    assert refused.value.details == {"setting": f"{group}.{key}", "maximum": maximum}
    assert client_merge(trusted, {group: {key: maximum}}) is not None
    # The settings file may go further, and a client may send its value back.
    generous = trusted_settings(**{group: {key: value}})
    assert client_merge(generous, {group: {key: value}}) == generous


def test_a_candidates_timeout_has_a_client_maximum_too() -> None:
    trusted = trusted_settings()
    too_long = {"kind": "client", "timeoutSeconds": 601}
    with pytest.raises(InvalidParamsError) as refused:
        client_merge(trusted, {"summarizer": {"candidates": [too_long]}})
    assert refused.value.details["setting"] == "summarizer.candidates[0].timeoutSeconds"
    # The configured candidate's own 900 s is accepted when sent back.
    same = {"kind": "openai", "timeoutSeconds": 900}
    assert client_merge(trusted, {"summarizer": {"candidates": [same]}}) == trusted


def test_a_sessions_layer_only_shortens_waits() -> None:
    trusted = trusted_settings()
    own = client_merge(
        trusted,
        {"hooks": {"timeoutMs": 500}, "retry": {"enabled": False, "maxRetries": 1}},
    )
    session = {
        "hooks": {"timeoutMs": 300000},
        "retry": {"enabled": True, "maxRetries": 10, "baseDelayMs": 10, "maxDelayMs": 1000},
        "summarizer": {"candidates": [{"kind": "openai", "timeoutSeconds": 5}]},
    }
    merged = client_merge(trusted, session, base=own, session_layer=True)
    assert merged.hooks.timeout_ms == 500
    assert (merged.retry.enabled, merged.retry.max_retries) == (False, 1)
    assert (merged.retry.base_delay_ms, merged.retry.max_delay_ms) == (10, 1000)  # shorter: kept
    assert merged.summarizer.candidates[0].timeout_seconds == 5
    longer = {"summarizer": {"candidates": [{"kind": "openai", "timeoutSeconds": 600}]}}
    merged = client_merge(trusted, longer, session_layer=True)
    assert merged.summarizer.candidates[0].timeout_seconds == 600  # below the file's 900
    capped = client_merge(
        trusted_settings(summarizer={"candidates": [dict(CONFIGURED, timeoutSeconds=30)]}),
        longer,
        session_layer=True,
    )
    assert capped.summarizer.candidates[0].timeout_seconds == 30
    # Without the session flag (a client's own layers), a longer wait is the client's choice.
    assert client_merge(trusted, {"hooks": {"timeoutMs": 300000}}, base=own).hooks.timeout_ms == (
        300000
    )


def test_no_limit_in_the_file_is_shortened_by_a_session() -> None:
    unlimited = trusted_settings(retry={"maxDelayMs": 0})
    merged = client_merge(unlimited, {"retry": {"maxDelayMs": 1000}}, session_layer=True)
    assert merged.retry.max_delay_ms == 1000
    assert client_merge(unlimited, {"retry": {"maxDelayMs": 0}}, session_layer=True) == unlimited


def test_layer_cache_checks_against_the_trusted_settings() -> None:
    cache = LayerCache()
    trusted = trusted_settings()
    rogue = {"summarizer": {"candidates": [{"kind": "openai", "baseUrl": "http://evil/v1"}]}}
    assert cache.merge(trusted, rogue, "client").summarizer.candidates == []
    shortened = cache.merge(
        trusted, {"hooks": {"timeoutMs": 300000}}, "session", configured=trusted, session_layer=True
    )
    assert shortened.hooks.timeout_ms == trusted.hooks.timeout_ms
