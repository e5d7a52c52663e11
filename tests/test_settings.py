import json
import os
from pathlib import Path

import msgspec
import pytest

from sessiond.errors import InvalidParamsError
from sessiond.settings import (
    LayerCache,
    Settings,
    load_settings,
    merge_settings,
    parse_assignments,
)


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


def test_missing_file_gives_defaults(tmp_path: Path):
    settings, warnings = load_settings(tmp_path / "nope.json")
    assert settings == Settings() and warnings == []


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
