"""Classification, retry-after parsing, scrubbing and the SSE decoder, as units."""

from __future__ import annotations

import pytest

from sessiond.llm.candidates import resolve
from sessiond.llm.errors import (
    ProviderError,
    classify,
    error_text_from_body,
    http_error_message,
    is_transient_error_message,
    scrub,
    snippet,
)
from sessiond.llm.retry_after import retry_after_from_headers, retry_after_from_text
from sessiond.llm.sse import SseDecoder, SseEvent
from sessiond.llm.transport import is_local_url
from sessiond.settings import SummarizerCandidate

NOW = 1_700_000_000_000.0  # ms


@pytest.mark.parametrize(
    ("text", "status", "kind"),
    [
        ("prompt is too long: 213462 tokens > 200000 maximum", 400, "overflow"),
        ("413 status code (no body)", 413, "overflow"),
        ("Your input exceeds the context window of this model", None, "overflow"),
        ("auth_unavailable: no credentials", None, "auth"),
        ("No auth available for provider", None, "auth"),
        ("Forbidden", 403, "auth"),
        ("usage_limit_reached", 429, "usageLimit"),
        ("Quota exceeded for this month", None, "usageLimit"),
        ("Too Many Requests", 429, "rateLimit"),
        ("rate_limit_error: slow down", None, "rateLimit"),
        ("Overloaded", 529, "transient"),
        ("socket hang up", None, "transient"),
        ("fetch failed", None, "transient"),
        ("Request timed out", None, "transient"),
        ("stream stall", None, "transient"),
        ("Service Unavailable", 503, "transient"),
        ("invalid model name", 400, "other"),
    ],
)
def test_classify(text, status, kind):
    assert classify(text, status) == kind


def test_rate_limit_words_win_over_overflow_patterns_as_pi_073():
    # pi 0.73.1 never reads rate limiting as an overflow, whatever else the text says
    assert classify("429 request_too_large: rate limited", 429) == "rateLimit"
    # but an overflow text wins over the HTTP status
    assert classify("request_too_large: request exceeds the maximum size", 429) == "overflow"


def test_anthropic_envelope_error_is_transient():
    assert is_transient_error_message(
        "Anthropic stream envelope error: stream ended before message_start"
    )
    assert not is_transient_error_message("Anthropic stream envelope error: other")


def test_provider_error_details_keep_the_protocol_kind():
    error = ProviderError("503 Service Unavailable", status=503, retry_after_ms=10)
    assert error.kind == "summarizerFailed"
    assert error.to_data() == {
        "kind": "summarizerFailed",
        "errorKind": "transient",
        "status": 503,
        "retryAfterMs": 10,
    }


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After-Ms": "1500"}, 1500),
        ({"retry-after": "2"}, 2000),
        ({"retry-after": "0.5"}, 500),
        ({"retry-after": "Tue, 14 Nov 2023 22:13:30 GMT"}, 10_000),
        ({"retry-after": "Tue, 14 Nov 2023 22:13:00 GMT"}, 0),  # in the past: clamped
        ({"x-ratelimit-reset-ms": "250"}, 250),
        ({"x-ratelimit-reset-ms": str(int(NOW + 4000))}, 4000),
        ({"x-ratelimit-reset": "3"}, 3000),
        ({"x-ratelimit-reset": str(int(NOW / 1000 + 7))}, 7000),
        ({"retry-after": "soon"}, None),
        ({}, None),
        # Priority: retry-after-ms beats retry-after.
        ({"retry-after": "9", "retry-after-ms": "100"}, 100),
    ],
)
def test_retry_after_headers(headers, expected):
    assert retry_after_from_headers(headers, now_ms=NOW) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("429 slow down; retry-after-ms=1200", 1200),
        ("headers: retry-after: 4", 4000),
        ("retry-after=Tue, 14 Nov 2023 22:13:25 GMT", 5000),
        ("x-ratelimit-reset-ms: 600", 600),
        ("x-ratelimit-reset=2", 2000),
        ("nothing to see", None),
        ("retry-after-ms=-5", None),  # not a number we accept
    ],
)
def test_retry_after_text(text, expected):
    assert retry_after_from_text(text, now_ms=NOW) == expected


def test_scrub_removes_known_secrets_and_key_shapes():
    text = "key abc123secret and Bearer tok3nvalue99 and sk-live0123456789abcd and Bearer auth"
    cleaned = scrub(text, ["abc123secret", None, ""])
    assert "abc123secret" not in cleaned
    assert "tok3nvalue99" not in cleaned
    assert "sk-live0123456789abcd" not in cleaned
    assert cleaned.endswith("Bearer auth")  # prose survives


@pytest.mark.parametrize(
    ("body", "text"),
    [
        (b'{"error": {"message": "m", "type": "t"}}', "t: m"),
        (
            b'{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}',
            "overloaded_error: Overloaded",
        ),
        (b'{"error": "plain"}', "plain"),
        (b'{"detail": "fastapi style"}', "fastapi style"),
        (
            b'[{"error": {"message": "wrapped", "code": 429, "status": "RESOURCE_EXHAUSTED"}}]',
            "RESOURCE_EXHAUSTED: wrapped",
        ),
        (b"<html>gateway</html>", "<html>gateway</html>"),
        (b"", ""),
    ],
)
def test_error_text_from_body(body, text):
    assert error_text_from_body(body) == text


def test_sse_decoder_follows_the_event_stream_rules():
    decoder = SseDecoder()
    lines = [": comment", "event: delta", "data: a", "data:b", "id: 7", "", "", "data: c", ""]
    events = [e for line in lines if (e := decoder.feed(line)) is not None]
    assert events == [SseEvent("delta", "a\nb"), SseEvent("message", "c")]
    # An event cut off before its blank line is never dispatched.
    assert decoder.feed("data: unfinished") is None


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:8080/v1", True),
        ("http://localhost:11434/v1", True),
        ("http://[::1]:8000/v1", True),
        ("http://192.168.1.20:8000/v1", True),
        ("http://gpu-box:8000/v1", True),
        ("http://ollama.local/v1", True),
        ("https://api.openai.com/v1", False),
        ("https://openrouter.ai/api/v1", False),
        ("http://8.8.8.8/v1", False),
        ("http://[::1/v1", False),
        ("", False),
    ],
)
def test_is_local_url(url, local):
    assert is_local_url(url) is local


def test_candidate_keys_and_defaults():
    environ = {"OPENAI_API_KEY": "sk-default-0123456789", "MINE": "k-mine-0123"}
    default = resolve(SummarizerCandidate(kind="openai", model="gpt"), environ, None)
    assert default.summarizer is not None and default.secrets == ("sk-default-0123456789",)
    assert default.label == "openai/gpt"
    missing = resolve(SummarizerCandidate(kind="anthropic", model="c"), environ, None)
    assert missing.summarizer is None and "ANTHROPIC_API_KEY" in (missing.skip_reason or "")
    named = resolve(
        SummarizerCandidate(
            kind="openai", model="x", base_url="https://x.test", api_key_env="MINE"
        ),
        environ,
        None,
    )
    assert named.summarizer is not None and named.secrets == ("k-mine-0123",)
    local = resolve(
        SummarizerCandidate(kind="openai", model="llama", base_url="http://127.0.0.1:8080/v1"),
        {},
        None,
    )
    assert local.summarizer is not None and local.secrets == ()
    header_auth = resolve(
        SummarizerCandidate(
            kind="openai",
            model="x",
            base_url="https://gw.test/v1",
            headers={"Authorization": "Bearer from-settings-99999"},
        ),
        {},
        None,
    )
    assert header_auth.summarizer is not None
    assert header_auth.secrets == ("Bearer from-settings-99999",)
    remote = resolve(SummarizerCandidate(kind="remote"), {}, None)
    assert remote.summarizer is None and "baseUrl" in (remote.skip_reason or "")


def test_a_key_cut_by_the_error_texts_length_limit_is_scrubbed_whole() -> None:
    key = "k" + "0123456789abcdef" * 2 + "XYZW"  # 37 characters, no key shape
    body = ("." * (2000 - 20) + key + " and more").encode()
    text = error_text_from_body(body, [key])
    assert key[:8] not in text and key[:4] not in text
    assert text.startswith("." * 1980 + "[redacted]")
    message = http_error_message(
        502, b'{"error": {"message": "bad ' + key[5:17].encode() + b'"}}', [key]
    )
    assert key[5:17] not in message and message.endswith("bad [redacted]")


def test_a_snippet_never_ends_with_a_piece_of_a_secret() -> None:
    key = "k" + "0123456789abcdef" * 2 + "XYZW"
    cut = snippet("." * 195 + key[:5] + "......", 200, [key])
    assert cut == "." * 195 + "[redacted]"
