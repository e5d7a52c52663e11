"""Token accounting (pi's compaction tests): estimators, usage measures, thresholds, overflow."""

import math

import msgspec
import pytest

from sessiond.core.messages import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from sessiond.core.overflow import is_context_overflow, is_overflow_error_message
from sessiond.core.tokens import (
    CharsEstimator,
    assistant_usage,
    calculate_context_tokens,
    calculate_prompt_tokens,
    estimate_context_tokens,
    resolve_threshold_tokens,
    should_compact,
)
from sessiond.settings import CompactionSettings
from sessiond.tiktoken_offline import count_tokens, estimator

from ..builders import usage

chars = CharsEstimator()


def assistant_msg(stop="stop", the_usage=None, error=None, content=None):
    return AssistantMessage(
        content=content or [TextContent(text="x")],
        provider="p",
        model="m",
        usage=the_usage or usage(),
        stop_reason=stop,
        error_message=error,
    )


def test_usage_totals():
    assert calculate_context_tokens(usage(1000, 500, 200, 100)) == 1800
    assert calculate_context_tokens(usage(0, 0, 0, 0)) == 0
    u = usage(1000, 500, 200, 100)
    u.total_tokens = 0
    assert calculate_context_tokens(u) == 1800
    assert calculate_prompt_tokens(usage(10, 99, 20, 30)) == 60


def test_assistant_usage_skips_aborted_and_errors():
    assert assistant_usage(assistant_msg("aborted")) is None
    assert assistant_usage(assistant_msg("error")) is None
    assert assistant_usage(UserMessage(content="x")) is None
    assert assistant_usage(assistant_msg("toolUse")) is not None


def test_chars_estimator_per_role():
    assert chars.estimate(UserMessage(content="abcdefgh")) == 2
    assert (
        chars.estimate(
            UserMessage(content=[TextContent(text="abc"), ImageContent(data="x", mime_type="i")])
        )
        == 1201  # pi 1.6 charges 1200 a user image too (0.73.1 counted none)
    )
    tool = ToolCall(id="1", name="read", arguments={"path": "a.py", "n": 1.0})
    message = assistant_msg(
        content=[TextContent(text="hi"), ThinkingContent(thinking="think"), tool]
    )
    # "hi" + "think" + "read" + '{"path":"a.py","n":1}'
    assert chars.estimate(message) == math.ceil((2 + 5 + 4 + 21) / 4)
    result = ToolResultMessage(
        tool_call_id="1",
        tool_name="t",
        content=[TextContent(text="12345"), ImageContent(data="x", mime_type="i")],
        is_error=False,
    )
    assert chars.estimate(result) == math.ceil((5 + 4800) / 4)
    assert chars.estimate(CustomMessage(custom_type="c", content="abcd", display=True)) == 1
    assert (
        chars.estimate(
            BashExecutionMessage(command="ls", output="ab", cancelled=False, truncated=False)
        )
        == 1
    )
    assert chars.estimate(BranchSummaryMessage(summary="a" * 9, from_id="x")) == 3
    assert chars.estimate(CompactionSummaryMessage(summary="a" * 8, tokens_before=1)) == 2


def test_chars_estimator_counts_utf16_units():
    assert chars.estimate(UserMessage(content="😀😀")) == 1  # 4 code units
    assert chars.estimate(UserMessage(content="😀😀😀")) == 2  # 6 code units
    assert chars.estimate(UserMessage(content="漢字漢字漢")) == 2  # 5 code units


def test_tiktoken_estimator_counts_o200k_tokens():
    tiktoken_estimator = estimator("tiktoken")
    assert count_tokens("hello world") == 2
    assert tiktoken_estimator.estimate(UserMessage(content="hello world")) == 2
    # Special-token text inside a transcript is ordinary text, never an error.
    assert tiktoken_estimator.estimate(UserMessage(content="<|endoftext|>")) > 1
    result = ToolResultMessage(
        tool_call_id="1",
        tool_name="t",
        content=[ImageContent(data="x", mime_type="i")],
        is_error=False,
    )
    assert tiktoken_estimator.estimate(result) == 1200
    # roles pi leaves at zero are counted by sessiond's tiktoken estimator
    assert (
        tiktoken_estimator.estimate(
            CustomMessage(custom_type="c", content="hello world", display=True)
        )
        == 2
    )


def test_estimate_context_tokens_uses_last_usage_plus_trailing():
    messages = [
        UserMessage(content="a" * 40),
        assistant_msg(the_usage=usage(1000, 0)),
        UserMessage(content="b" * 40),
        assistant_msg("aborted", usage(9999, 0)),
        UserMessage(content="c" * 8),
    ]
    estimate = estimate_context_tokens(messages, chars)
    assert estimate.last_usage_index == 1 and estimate.usage_tokens == 1000
    aborted_estimate = chars.estimate(messages[3])
    assert estimate.trailing_tokens == 10 + aborted_estimate + 2
    assert estimate.tokens == 1000 + estimate.trailing_tokens


def test_estimate_without_usage_sums_estimates():
    estimate = estimate_context_tokens([UserMessage(content="a" * 40)], chars)
    assert (estimate.tokens, estimate.last_usage_index) == (10, None)


@pytest.mark.parametrize(
    ("settings", "tokens", "expected"),
    [
        (CompactionSettings(reserve_tokens=10000), 95000, True),
        (CompactionSettings(reserve_tokens=10000), 89000, False),
        (CompactionSettings(reserve_tokens=10000), 90000, False),  # strict >
        (CompactionSettings(reserve_tokens=10000), 90001, True),
        (CompactionSettings(reserve_tokens=10000, reserve_floor_percent=15), 86000, True),
        (CompactionSettings(reserve_tokens=10000, reserve_floor_percent=15), 84000, False),
        (CompactionSettings(threshold_percent=90), 89000, False),
        (CompactionSettings(threshold_percent=90), 90001, True),
        (CompactionSettings(threshold_percent=-1, reserve_tokens=30000), 70000, False),
        (CompactionSettings(threshold_percent=-1, reserve_tokens=30000), 70001, True),
        (CompactionSettings(threshold_tokens=50000, threshold_percent=90), 50001, True),
        (CompactionSettings(strategy="off"), 10**9, False),
        (CompactionSettings(enabled=False), 10**9, False),
    ],
)
def test_should_compact(settings, tokens, expected):
    assert should_compact(tokens, 100_000, settings) is expected


def test_threshold_clamps():
    assert resolve_threshold_tokens(1000, CompactionSettings(threshold_tokens=10**9)) == 999
    assert resolve_threshold_tokens(1000, CompactionSettings(threshold_percent=150)) == 990
    assert resolve_threshold_tokens(1000, CompactionSettings(threshold_percent=0.5)) == 10
    assert not should_compact(5, 0, CompactionSettings())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Provider finish_reason: model_context_window_exceeded", True),
        ("413 Request Entity Too Large: payload too large for this endpoint", True),
        ("Request exceeds the maximum size allowed", True),
        ("413 Forbidden", True),  # pi 1.6: any HTTP 413 is a request too large
        ("error 413 from the proxy", False),
        ("github-copilot API error (413): {}", True),
        ("Prompt too long", True),
        ("Input length (265330) exceeds model's maximum context length (262144).", True),
        ("prompt is too long: 210000 tokens > 200000 maximum", True),
        ("This model's maximum context length is 128000 tokens", True),
        ("400 status code (no body)", True),
        ("429 Too Many Requests", False),
        ("Internal server error", False),
    ],
)
def test_overflow_patterns(text, expected):
    assert is_overflow_error_message(text) is expected


def test_a_bare_status_line_is_an_overflow_only_from_cerebras():
    message = assistant_msg("error", error="400 status code (no body)")
    assert not is_context_overflow(message)  # the test answers come from provider "p"
    assert is_context_overflow(msgspec.structs.replace(message, provider="cerebras"))


def test_overflow_requires_error_stop_reason_for_patterns():
    assert is_context_overflow(assistant_msg("error", error="prompt is too long"))
    assert not is_context_overflow(assistant_msg("stop", error="prompt is too long"))
    assert not is_context_overflow(UserMessage(content="prompt is too long"))


def test_silent_overflow_as_pi_073():
    assert is_context_overflow(assistant_msg(the_usage=usage(500, 10, 501)), 1000)
    assert not is_context_overflow(assistant_msg(the_usage=usage(500, 10, 500)), 1000)
    # cache writes are not counted, and only a "stop" answer can overflow silently
    assert not is_context_overflow(assistant_msg(the_usage=usage(500, 10, 400, 200)), 1000)
    assert not is_context_overflow(assistant_msg("toolUse", usage(5000, 10)), 1000)
    assert not is_context_overflow(assistant_msg(the_usage=usage(5000, 10)), None)


def test_length_stop_with_no_output_at_a_full_window():
    assert is_context_overflow(assistant_msg("length", usage(900, 0, 90)), 1000)
    assert not is_context_overflow(assistant_msg("length", usage(900, 0, 80)), 1000)
    assert not is_context_overflow(assistant_msg("length", usage(990, 5)), 1000)


def test_rate_limit_texts_are_never_overflow():
    assert not is_overflow_error_message("Rate limit: too many tokens per minute")
    assert not is_overflow_error_message("Throttling error: input is too long for requested model")
    assert is_overflow_error_message("prompt too long; exceeded max context length by 12 tokens")
