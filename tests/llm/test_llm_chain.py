"""The candidate chain: retries, backoff, moving on, modes, fallback (oh-my-pi's rules)."""

from __future__ import annotations

import asyncio

import pytest
from llm_fakes import Reply, anthropic_stream, json_reply, openai_stream, sse_reply

from sessiond.llm import CompletionRequest, ProviderError, SummarizerChain, retry_delay_ms
from sessiond.settings import (
    RetrySettings,
    Settings,
    SummarizerCandidate,
    SummarizerSettings,
)

REQUEST = CompletionRequest(
    system_prompt="sys",
    prompt="<conversation>\n[User]: Fix the bug in src/app.py\n</conversation>\n\nSummarize.",
    max_tokens=500,
)
A = "/a/v1/chat/completions"
B = "/b/v1/chat/completions"


def openai(server, name: str, **kwargs) -> SummarizerCandidate:
    return SummarizerCandidate(
        kind="openai", model=name, base_url=f"{server.url}/{name}/v1", timeout_seconds=2, **kwargs
    )


def chain(server, sleep, *names: str, fallback: bool = False, **retry) -> SummarizerChain:
    settings = SummarizerSettings(
        candidates=[openai(server, n) for n in names], extractive_fallback=fallback
    )
    return SummarizerChain(settings, RetrySettings(**retry), sleep=sleep)


def ok(text: str = "summary") -> Reply:
    return sse_reply(openai_stream([text]))


def fail(status: int, message: str = "boom", **headers: str) -> Reply:
    return json_reply({"error": {"message": message}}, status, headers=headers)


async def test_429_with_retry_after_waits_that_long_then_retries(server, no_sleep):
    delays, sleep = no_sleep
    server.script(A, fail(429, "slow down", **{"retry-after": "5"}), ok("second time"))
    result = await chain(server, sleep, "a").complete(REQUEST)
    assert result.text == "second time"
    assert delays == [5.0]  # max(2000 ms base, 5000 ms asked)
    assert len(server.requests) == 2
    first, second = result.attempts
    assert (first.outcome, first.error_kind, first.status, first.delay_ms) == (
        "error",
        "rateLimit",
        429,
        5000,
    )
    assert (second.outcome, second.attempt) == ("ok", 2)


async def test_500s_then_success_backs_off_exponentially(server, no_sleep):
    delays, sleep = no_sleep
    server.script(A, fail(500), fail(503), ok())
    result = await chain(server, sleep, "a").complete(REQUEST)
    assert result.text == "summary" and result.model == "openai/a"
    assert delays == [2.0, 4.0]
    assert [a.attempt for a in result.attempts] == [1, 2, 3]


async def test_exhausted_candidate_moves_to_the_next(server, no_sleep):
    delays, sleep = no_sleep
    server.script(A, fail(500))
    server.script(B, ok("from b"))
    result = await chain(server, sleep, "a", "b").complete(REQUEST)
    assert result.text == "from b" and result.model == "openai/b"
    assert [r.path for r in server.requests] == [A] * 4 + [B]
    assert delays == [2.0, 4.0, 8.0]
    assert [(a.candidate, a.outcome) for a in result.attempts][-2:] == [
        ("openai/a", "error"),
        ("openai/b", "ok"),
    ]


async def test_a_wait_over_30_s_moves_on_when_another_candidate_remains(server, no_sleep):
    delays, sleep = no_sleep
    server.script(A, fail(429, "later", **{"retry-after": "45"}))
    server.script(B, ok("b answered"))
    result = await chain(server, sleep, "a", "b").complete(REQUEST)
    assert result.text == "b answered"
    assert delays == []
    assert [r.path for r in server.requests] == [A, B]


async def test_a_wait_over_30_s_on_the_last_candidate_is_waited(server, no_sleep):
    delays, sleep = no_sleep
    server.script(A, fail(429, "later", **{"retry-after": "45"}), ok())
    assert (await chain(server, sleep, "a").complete(REQUEST)).text == "summary"
    assert delays == [45.0]


async def test_a_wait_over_max_delay_is_not_waited(server, no_sleep):
    delays, sleep = no_sleep
    server.script(A, fail(429, "tomorrow", **{"retry-after": "86400"}))
    with pytest.raises(ProviderError) as caught:
        await chain(server, sleep, "a").complete(REQUEST)
    assert delays == []
    assert caught.value.message == "429 tomorrow"


async def test_401_moves_on_and_is_reported_as_pis_credentials_error(server, no_sleep):
    delays, sleep = no_sleep
    server.script(A, fail(401, "auth_unavailable: bad key"))
    server.script(B, fail(401, "no auth available"))
    with pytest.raises(ProviderError) as caught:
        await chain(server, sleep, "a", "b").complete(REQUEST)
    assert delays == []
    assert [r.path for r in server.requests] == [A, B]
    message = caught.value.message
    assert message.startswith("Compaction requires usable credentials for openai/b.")
    assert "auth_unavailable" not in message
    assert caught.value.error_kind == "auth"
    assert len(caught.value.attempts) == 2


async def test_overflow_is_never_retried(server, no_sleep):
    delays, sleep = no_sleep
    server.script(A, fail(400, "prompt is too long: 300000 tokens > 200000 maximum"))
    server.script(B, ok("b fits"))
    result = await chain(server, sleep, "a", "b").complete(REQUEST)
    assert result.text == "b fits"
    assert delays == []
    assert [r.path for r in server.requests] == [A, B]
    assert result.attempts[0].error_kind == "overflow"


async def test_other_errors_move_on_in_auto_mode(server, no_sleep):
    delays, sleep = no_sleep
    server.script(A, fail(400, "unsupported parameter"))
    server.script(B, ok())
    assert (await chain(server, sleep, "a", "b").complete(REQUEST)).model == "openai/b"
    assert delays == []


async def test_manual_mode_raises_at_once_without_retry(server, no_sleep):
    delays, sleep = no_sleep
    server.script(A, fail(500, "internal error"))
    server.script(B, ok())
    with pytest.raises(ProviderError) as caught:
        await chain(server, sleep, "a", "b", fallback=True).complete(REQUEST, mode="manual")
    assert caught.value.message == "500 internal error"
    assert [r.path for r in server.requests] == [A]
    assert delays == []


async def test_manual_mode_moves_on_after_auth_failures(server, no_sleep):
    _delays, sleep = no_sleep
    server.script(A, fail(403, "forbidden"))
    server.script(B, ok("b"))
    result = await chain(server, sleep, "a", "b").complete(REQUEST, mode="manual")
    assert result.text == "b"


async def test_manual_mode_with_no_credentials_anywhere(no_sleep):
    _delays, sleep = no_sleep
    settings = SummarizerSettings(
        candidates=[SummarizerCandidate(kind="anthropic", model="c", api_key_env="NOPE_KEY")],
        extractive_fallback=False,
    )
    with pytest.raises(ProviderError) as caught:
        await SummarizerChain(settings, sleep=sleep, environ={}).complete(REQUEST, mode="manual")
    assert caught.value.message.startswith(
        "Compaction requires usable credentials for anthropic/c."
    )


async def test_missing_key_skips_the_candidate(server, no_sleep):
    _delays, sleep = no_sleep
    server.script("/v1/messages", sse_reply(anthropic_stream([["from claude"]])))
    settings = SummarizerSettings(
        candidates=[
            SummarizerCandidate(kind="openai", model="gpt", api_key_env="MISSING_KEY"),
            SummarizerCandidate(
                kind="anthropic", model="claude", base_url=server.url, api_key_env="ANT_KEY"
            ),
        ]
    )
    environ = {"ANT_KEY": "sk-ant-live-key-0123456789"}
    result = await SummarizerChain(settings, sleep=sleep, environ=environ).complete(REQUEST)
    assert result.text == "from claude"
    skipped = result.attempts[0]
    assert (skipped.candidate, skipped.outcome) == ("openai/gpt", "skipped")
    assert "MISSING_KEY" in (skipped.error or "")
    assert server.requests[0].headers["x-api-key"] == environ["ANT_KEY"]


async def test_keys_are_read_at_call_time(server, no_sleep):
    _delays, sleep = no_sleep
    server.script(A, ok())
    environ: dict[str, str] = {}
    settings = SummarizerSettings(
        candidates=[openai(server, "a", api_key_env="LATE_KEY")], extractive_fallback=False
    )
    summarizers = SummarizerChain(settings, sleep=sleep, environ=environ)
    with pytest.raises(ProviderError) as caught:
        await summarizers.complete(REQUEST)
    assert caught.value.message == "Compaction failed: no available model"
    environ["LATE_KEY"] = "sk-late-0123456789abcdef"
    await summarizers.complete(REQUEST)
    assert server.requests[-1].headers["authorization"] == "Bearer sk-late-0123456789abcdef"


async def test_a_remote_base_url_without_key_variable_is_skipped(no_sleep):
    _delays, sleep = no_sleep
    settings = SummarizerSettings(
        candidates=[
            SummarizerCandidate(kind="openai", model="x", base_url="https://llm.example.com/v1")
        ]
    )
    result = await SummarizerChain(settings, sleep=sleep, environ={}).complete(REQUEST)
    assert result.extractive is True
    assert result.attempts[0].outcome == "skipped"


async def test_no_candidates_means_extractive(no_sleep):
    _delays, sleep = no_sleep
    result = await SummarizerChain(sleep=sleep).complete(REQUEST)
    assert result.extractive is True
    assert result.fallback_reason is None
    assert result.model == "extractive/rules"
    assert "## Goal" in result.text


async def test_every_candidate_failing_falls_back_to_extractive(server, no_sleep):
    delays, sleep = no_sleep
    server.script(A, fail(500, "upstream exploded"))
    result = await chain(server, sleep, "a", fallback=True, max_retries=1).complete(REQUEST)
    assert result.extractive is True
    assert result.fallback_reason == "500 upstream exploded"
    assert delays == [2.0]
    assert [a.outcome for a in result.attempts] == ["error", "error", "ok"]
    assert result.attempts[-1].candidate == "extractive/rules"


async def test_without_fallback_the_last_error_is_raised(server, no_sleep):
    _delays, sleep = no_sleep
    server.script(A, fail(400, "bad a"))
    server.script(B, fail(400, "bad b"))
    with pytest.raises(ProviderError) as caught:
        await chain(server, sleep, "a", "b").complete(REQUEST)
    assert caught.value.message == "400 bad b"
    assert [a["candidate"] for a in caught.value.to_data()["attempts"]] == ["openai/a", "openai/b"]


async def test_retries_disabled(server, no_sleep):
    delays, sleep = no_sleep
    server.script(A, fail(503))
    with pytest.raises(ProviderError):
        await chain(server, sleep, "a", enabled=False).complete(REQUEST)
    assert delays == [] and len(server.requests) == 1


async def test_remote_endpoint_replaces_models_for_history_but_not_turn_prefix(server, no_sleep):
    _delays, sleep = no_sleep
    server.script("/remote", json_reply({"summary": "remote summary"}))
    server.script(A, ok("model summary"))
    settings = Settings()
    settings.compaction.remote_endpoint = f"{server.url}/remote"
    settings.summarizer.candidates = [openai(server, "a")]
    summarizers = SummarizerChain.from_settings(settings, sleep=sleep)
    for purpose in ("history", "update", "short"):
        request = CompletionRequest(system_prompt="s", prompt="p", max_tokens=10, purpose=purpose)
        assert (await summarizers.complete(request)).text == "remote summary"
    prefix = CompletionRequest(system_prompt="s", prompt="p", max_tokens=10, purpose="turnPrefix")
    assert (await summarizers.complete(prefix)).text == "model summary"
    assert [r.path for r in server.requests] == ["/remote"] * 3 + [A]
    settings.compaction.remote_enabled = False
    disabled = SummarizerChain.from_settings(settings, sleep=sleep)
    assert (await disabled.complete(REQUEST)).text == "model summary"


async def test_remote_endpoint_failures_are_retried_like_models(server, no_sleep):
    delays, sleep = no_sleep
    server.script("/remote", Reply(status=503), json_reply({"summary": "at last"}))
    summarizers = SummarizerChain(remote_endpoint=f"{server.url}/remote", sleep=sleep)
    result = await summarizers.complete(REQUEST)
    assert result.text == "at last"
    assert delays == [2.0]
    assert result.attempts[0].error == "Remote compaction failed (503 Service Unavailable)"


async def test_fit_is_applied_per_candidate(server, no_sleep):
    _delays, sleep = no_sleep
    server.script(A, ok())
    windows: list[int | None] = []

    def fit(request: CompletionRequest, window: int | None) -> CompletionRequest:
        windows.append(window)
        return CompletionRequest(
            system_prompt=request.system_prompt, prompt="fitted", max_tokens=request.max_tokens
        )

    await chain(server, sleep, "a").complete(REQUEST, fit=fit)
    assert windows == [128000]
    assert server.requests[0].body["messages"][1]["content"] == "fitted"


async def test_cancelling_during_backoff_stops_at_once(server):
    server.script(A, fail(503))
    # A 20 s backoff (the longest the chain waits on one candidate is 30 s): only the
    # cancellation can end it within the test's wait of 10 s.
    summarizers = chain(server, asyncio.sleep, "a", base_delay_ms=20_000)
    task = asyncio.create_task(summarizers.complete(REQUEST))
    while not server.requests:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=10)
    assert done and task.cancelled()
    assert len(server.requests) == 1  # no retry went out after the cancellation


def test_retry_delay_rules():
    retry = RetrySettings()
    transient = ProviderError("503 Service Unavailable", status=503)
    assert [retry_delay_ms(transient, n, retry) for n in range(4)] == [2000, 4000, 8000, None]
    other = ProviderError("400 bad request", status=400)
    assert retry_delay_ms(other, 0, retry) is None
    # A retry-after makes anything retryable, and wins when longer.
    asked = ProviderError("400 bad request", status=400, retry_after_ms=7000)
    assert retry_delay_ms(asked, 0, retry) == 7000
    assert retry_delay_ms(asked, 3, RetrySettings(max_retries=5)) == 16000
    in_text = ProviderError("upstream said retry-after-ms=2500")
    assert retry_delay_ms(in_text, 0, retry) == 2500
    usage = ProviderError("usage_limit_reached for today")
    assert usage.error_kind == "usageLimit"
    assert retry_delay_ms(usage, 0, retry) == 2000


async def test_without_credentials_only_auto_mode_falls_back_to_extractive(no_sleep):
    _delays, sleep = no_sleep
    settings = SummarizerSettings(
        candidates=[SummarizerCandidate(kind="anthropic", model="c", api_key_env="NOPE_KEY")]
    )
    summarizers = SummarizerChain(settings, sleep=sleep, environ={})
    result = await summarizers.complete(REQUEST, mode="auto")
    assert result.extractive is True
    assert result.fallback_reason == "Compaction failed: no available model"
    # pi's manual path: the credentials error, even with the fallback on
    with pytest.raises(ProviderError) as caught:
        await summarizers.complete(REQUEST, mode="manual")
    assert caught.value.error_kind == "auth"
    assert caught.value.message.startswith(
        "Compaction requires usable credentials for anthropic/c."
    )
