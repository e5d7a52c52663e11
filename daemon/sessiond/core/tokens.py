"""Token accounting: per-message estimates, usage-based measures, thresholds.

Two estimators. ``chars`` is pi's ``ceil(chars / 4)`` with JavaScript string
lengths, for exact parity with pi. ``tiktoken`` (the default) counts o200k_base
tokens of the same text fragments, as oh-my-pi does; unlike oh-my-pi it also
counts ``custom``, ``developer``, ``pythonExecution`` and ``fileMention``
messages, which oh-my-pi counts as zero only because its switch still uses a
role name that the v3 migration renamed (``hookMessage``, now ``custom``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Final, Protocol

import msgspec

from sessiond.settings import CompactionSettings

from .jsjson import js_stringify, utf16_length
from .messages import (
    AnyMessage,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    DeveloperMessage,
    FileMentionMessage,
    HookMessage,
    ImageContent,
    PythonExecutionMessage,
    SystemMessage,
    TextContent,
    ThinkingContent,
    TokenUsage,
    ToolCall,
    ToolResultMessage,
    UnknownMessage,
    UserContentBlock,
    UserMessage,
)
from .system_state import current_system_message

IMAGE_TOKENS: Final = 1200
IMAGE_CHARS: Final = 4800


class Estimator(Protocol):
    """Estimates how many tokens one message costs in the prompt."""

    name: str

    def estimate(self, message: AnyMessage) -> int: ...


class CharsEstimator:
    """pi's estimate: ceil(characters / 4), characters as JavaScript counts them."""

    name = "chars"

    def estimate(self, message: AnyMessage) -> int:
        fragments, images = _pi_fragments(message)
        chars = sum(utf16_length(fragment) for fragment in fragments) + images * IMAGE_CHARS
        return math.ceil(chars / 4)


class TokenizerEstimator:
    """Tokens of the message's text fragments under a real encoding (o200k_base)."""

    name = "tiktoken"

    def __init__(self, encode_ordinary: Callable[[str], Sequence[int]]) -> None:
        self._encode = encode_ordinary

    def estimate(self, message: AnyMessage) -> int:
        fragments, images = _all_fragments(message)
        extra = images * IMAGE_TOKENS
        return extra + sum(len(self._encode(fragment)) for fragment in fragments if fragment)


def _texts(content: str | list[UserContentBlock]) -> tuple[list[str], int]:
    if isinstance(content, str):
        return [content], 0
    texts = [block.text for block in content if isinstance(block, TextContent)]
    images = sum(1 for block in content if isinstance(block, ImageContent))
    return texts, images


def _assistant_fragments(message: AssistantMessage) -> list[str]:
    fragments: list[str] = []
    for block in message.content:
        if isinstance(block, TextContent):
            fragments.append(block.text)
        elif isinstance(block, ThinkingContent):
            fragments.append(block.thinking)
        elif isinstance(block, ToolCall):
            fragments.append(block.name)
            fragments.append(js_stringify(block.arguments))
    return fragments


def _system_fragments(message: SystemMessage) -> list[str]:
    fragments = (
        [message.content]
        if isinstance(message.content, str)
        else [block.text for block in message.content if isinstance(block, TextContent)]
    )
    fragments.extend(text for text in (message.sections or {}).values() if text)
    if message.tools_added is not None:
        fragments.append(js_stringify(message.tools_added))
    return fragments


def _pi_fragments(message: AnyMessage) -> tuple[list[str], int]:
    """The text pi 1.6 counts per role, and the images it charges for."""
    if isinstance(message, (UserMessage, ToolResultMessage, CustomMessage)):
        return _texts(message.content)
    if isinstance(message, SystemMessage):
        return _system_fragments(message), 0
    if isinstance(message, AssistantMessage):
        return _assistant_fragments(message), 0
    if isinstance(message, BashExecutionMessage):
        return [message.command, message.output], 0
    if isinstance(message, (BranchSummaryMessage, CompactionSummaryMessage)):
        return [message.summary], 0
    return [], 0


def _all_fragments(message: AnyMessage) -> tuple[list[str], int]:
    """pi's fragments plus the roles pi and oh-my-pi leave at zero."""
    if isinstance(message, (DeveloperMessage, HookMessage)):
        texts, images = _texts(message.content)
        return texts, images if isinstance(message, HookMessage) else 0
    if isinstance(message, PythonExecutionMessage):
        return [message.code, message.output], 0
    if isinstance(message, FileMentionMessage):
        return [f"{item.path}\n{item.content or ''}" for item in message.files], 0
    if isinstance(message, UnknownMessage):
        return [], 0
    return _pi_fragments(message)


def calculate_context_tokens(usage: TokenUsage) -> int:
    """``totalTokens``, or the sum of its parts when a provider left it at zero."""
    return usage.total_tokens or (usage.input + usage.output + usage.cache_read + usage.cache_write)


def calculate_prompt_tokens(usage: TokenUsage) -> int:
    """The prompt side of a call: input plus cache reads and writes."""
    prompt = usage.input + usage.cache_read + usage.cache_write
    return prompt if prompt > 0 else calculate_context_tokens(usage)


def assistant_usage(message: AnyMessage) -> TokenUsage | None:
    """The usage of an assistant message that completed (not aborted, not an error) and
    measured something: pi 1.6 ignores all-zero usage."""
    if not isinstance(message, AssistantMessage):
        return None
    if message.stop_reason in ("aborted", "error"):
        return None
    if calculate_context_tokens(message.usage) <= 0:
        return None
    return message.usage


class ContextEstimate(msgspec.Struct, rename="camel", frozen=True):
    tokens: int
    usage_tokens: int
    trailing_tokens: int
    last_usage_index: int | None


def estimate_context_tokens(
    messages: Sequence[AnyMessage], estimator: Estimator
) -> ContextEstimate:
    """pi's ``estimateContextTokens``: the last measured usage plus estimates after it."""
    for index in range(len(messages) - 1, -1, -1):
        usage = assistant_usage(messages[index])
        if usage is not None:
            usage_tokens = calculate_context_tokens(usage)
            trailing = sum(estimator.estimate(m) for m in messages[index + 1 :])
            return ContextEstimate(usage_tokens + trailing, usage_tokens, trailing, index)
    trailing = sum(estimator.estimate(m) for m in messages)
    return ContextEstimate(trailing, 0, trailing, None)


def estimate_projected_context_tokens(
    messages: Sequence[AnyMessage],
    positions: Sequence[int],
    latest_invalidating: int,
    estimator: Estimator,
) -> ContextEstimate:
    """pi 1.6's ``estimateProjectedContextTokens`` of a projected context.

    ``positions[i]`` is the path position of the entry ``messages[i]`` came from and
    ``latest_invalidating`` the position of the latest ``context_edit`` or compaction on
    the path (-1 if none). Usage measured before that describes a context that no
    longer exists: then the size is the estimate of every message, the system
    messages counted once as their replay."""
    estimate = estimate_context_tokens(messages, estimator)
    usage_index = estimate.last_usage_index
    if usage_index is not None and positions[usage_index] > latest_invalidating:
        return estimate
    system = current_system_message(messages)
    tokens = estimator.estimate(system) if system is not None else 0
    tokens += sum(estimator.estimate(m) for m in messages if not isinstance(m, SystemMessage))
    return ContextEstimate(tokens, 0, tokens, None)


def effective_reserve_tokens(context_window: int, settings: CompactionSettings) -> int:
    """The reserve, with oh-my-pi's floor of a share of the window when one is set."""
    floor = math.floor(context_window * settings.reserve_floor_percent / 100)
    return max(floor, settings.reserve_tokens)


def resolve_threshold_tokens(context_window: int, settings: CompactionSettings) -> int:
    """The token count above which a context should be compacted.

    ``thresholdTokens`` wins when positive (clamped to 1..window-1), then
    ``thresholdPercent`` (clamped to 1..99 %), else window minus the reserve.
    """
    tokens, percent = settings.threshold_tokens, settings.threshold_percent
    if math.isfinite(tokens) and tokens > 0:
        return int(min(context_window - 1, max(1, math.floor(tokens))))
    if math.isfinite(percent) and percent > 0:
        return math.floor(context_window * min(99.0, max(1.0, percent)) / 100)
    return context_window - effective_reserve_tokens(context_window, settings)


def should_compact(context_tokens: int, context_window: int, settings: CompactionSettings) -> bool:
    if not settings.enabled or settings.strategy == "off" or context_window <= 0:
        return False
    return context_tokens > resolve_threshold_tokens(context_window, settings)
