"""Turning messages into a summary with a summarizer, whatever their size.

A request is fitted to the summarizer's context window before it is sent. First
tool output is cut shorter in the serialized conversation. If that is not
enough, a history summary folds the conversation in chunks, oldest first, each
chunk's summary carried into the next as the previous summary; the other kinds
(turn prefix, short, branch) keep the first message and as many of the newest
as fit. A compaction never fails because its conversation is too long for the
model that summarizes it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Final, cast

from sessiond.core.convert import LlmMessage, convert_to_llm
from sessiond.core.messages import AnyMessage
from sessiond.core.serialize import TOOL_RESULT_CHAR_LIMIT, serialize_conversation
from sessiond.core.summary_prompts import history_prompt, system_prompt
from sessiond.llm.base import Completion, CompletionRequest, ProgressCallback
from sessiond.wire.completion import Purpose, ReasoningLevel

# Tool-output caps tried, in order, before anything else is given up.
_TOOL_LIMITS: Final = (TOOL_RESULT_CHAR_LIMIT, 1000, 500, 200)
# Room for the token estimate being off and for the provider's message framing.
_SAFETY: Final = 0.9
_CUT_NOTE: Final = "\n\n[... cut to fit the summarizer's context window]"

_LEVELS: Final[frozenset[str]] = frozenset({"minimal", "low", "medium", "high", "xhigh"})

TokenCounter = Callable[[str], int]
PromptBuilder = Callable[[str], str]
# A summarizer's ``complete``, with its mode (manual or auto) already chosen.
CompleteFn = Callable[[CompletionRequest, ProgressCallback | None], Awaitable[Completion]]


def reasoning_for(thinking_level: str) -> ReasoningLevel | None:
    """The reasoning a compaction summary asks for at the session's thinking level, as
    pi (0.73.1 and 1.6) passes it: none when thinking is off, else the same level. A level pi
    does not know (a newer one) counts as "high"."""
    if thinking_level == "off":
        return None
    if thinking_level in _LEVELS:
        return cast(ReasoningLevel, thinking_level)
    return "high"


@dataclass
class SummaryContext:
    """Everything a summary call needs besides the text: who, how big, who listens."""

    complete: CompleteFn
    count_tokens: TokenCounter
    # The smallest context window among the summarizer's models; None: no limit.
    window: int | None = None
    progress: ProgressCallback | None = None
    completions: list[Completion] = field(default_factory=list)

    async def call(
        self, prompt: str, max_tokens: int, purpose: Purpose, *, reasoning: ReasoningLevel | None
    ) -> str:
        request = CompletionRequest(
            system_prompt=system_prompt(),
            prompt=prompt,
            max_tokens=max_tokens,
            reasoning=reasoning is not None,
            purpose=purpose,
            reasoning_level=reasoning,
        )
        completion = await self.complete(request, self.progress)
        self.completions.append(completion)
        return completion.text

    def fits(self, prompt: str, max_tokens: int) -> bool:
        if self.window is None:
            return True
        needed = self.count_tokens(system_prompt()) + self.count_tokens(prompt) + max_tokens
        return needed <= self.window * _SAFETY

    def conversation_budget(self, empty_prompt: str, max_tokens: int) -> int:
        """Tokens left for the serialized conversation inside ``empty_prompt``."""
        if self.window is None:
            return 1 << 62
        used = self.count_tokens(system_prompt()) + self.count_tokens(empty_prompt) + max_tokens
        return max(256, int(self.window * _SAFETY) - used)


async def summarize_history(
    context: SummaryContext,
    messages: Sequence[AnyMessage],
    previous_summary: str | None,
    *,
    max_tokens: int,
    extra_context: Sequence[str] = (),
    custom_instructions: str | None = None,
    prompt_override: str | None = None,
    reasoning: ReasoningLevel | None = None,
) -> str:
    """A history summary (the initial prompt, or the update prompt after a previous one)."""

    def build(conversation: str, previous: str | None) -> str:
        return history_prompt(
            conversation,
            previous,
            extra_context=extra_context,
            custom_instructions=custom_instructions,
            prompt_override=prompt_override,
        )

    def purpose(previous: str | None) -> Purpose:
        return "update" if previous else "history"

    llm_messages = convert_to_llm(messages)
    for limit in _TOOL_LIMITS:
        prompt = build(serialize_conversation(llm_messages, limit), previous_summary)
        if context.fits(prompt, max_tokens):
            return await context.call(
                prompt, max_tokens, purpose(previous_summary), reasoning=reasoning
            )

    # The carried summary can grow as long as the answer the model may give.
    budget = context.conversation_budget(build("", "x" * (max_tokens * 4)), max_tokens)
    summary = previous_summary
    for chunk in _chunks(llm_messages, budget, context.count_tokens):
        summary = await context.call(
            build(chunk, summary), max_tokens, purpose(summary), reasoning=reasoning
        )
    return summary or ""


async def summarize_fitted(
    context: SummaryContext,
    messages: Sequence[AnyMessage],
    build: PromptBuilder,
    *,
    max_tokens: int,
    purpose: Purpose,
    reasoning: ReasoningLevel | None,
) -> str:
    """One summary call whose conversation is trimmed to fit: tool output first,
    then the middle of the conversation (its first message and newest ones stay)."""
    llm_messages = convert_to_llm(messages)
    for limit in _TOOL_LIMITS:
        prompt = build(serialize_conversation(llm_messages, limit))
        if context.fits(prompt, max_tokens):
            return await context.call(prompt, max_tokens, purpose, reasoning=reasoning)
    budget = context.conversation_budget(build(""), max_tokens)
    conversation = _ends(llm_messages, budget, context.count_tokens)
    return await context.call(build(conversation), max_tokens, purpose, reasoning=reasoning)


def _pieces(messages: Sequence[LlmMessage], budget: int, count: TokenCounter) -> list[str]:
    pieces: list[str] = []
    for message in messages:
        text = serialize_conversation([message], _TOOL_LIMITS[-1])
        if text:
            pieces.append(_cut_to(text, budget, count) if count(text) > budget else text)
    return pieces


def _chunks(messages: Sequence[LlmMessage], budget: int, count: TokenCounter) -> list[str]:
    """The conversation in consecutive pieces, each within ``budget`` tokens."""
    chunks: list[str] = []
    current: list[str] = []
    used = 0
    for piece in _pieces(messages, budget, count):
        tokens = count(piece) + 2
        if current and used + tokens > budget:
            chunks.append("\n\n".join(current))
            current, used = [], 0
        current.append(piece)
        used += tokens
    if current:
        chunks.append("\n\n".join(current))
    return chunks


def _ends(messages: Sequence[LlmMessage], budget: int, count: TokenCounter) -> str:
    """The first message and as many of the newest as fit, with a note of the gap."""
    pieces = _pieces(messages, budget // 2, count)
    if not pieces:
        return ""
    head = pieces[0]
    used = count(head)
    tail: list[str] = []
    for piece in reversed(pieces[1:]):
        tokens = count(piece) + 2
        if used + tokens > budget - 32:
            break
        tail.append(piece)
        used += tokens
    tail.reverse()
    omitted = len(pieces) - 1 - len(tail)
    middle = [f"[... {omitted} messages left out to fit the summarizer's context window]"]
    return "\n\n".join([head, *(middle if omitted else []), *tail])


def _cut_to(text: str, budget: int, count: TokenCounter) -> str:
    """The longest prefix of ``text`` that, with a note, stays within ``budget`` tokens."""
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if count(text[:middle] + _CUT_NOTE) <= budget:
            low = middle
        else:
            high = middle - 1
    return text[:low] + _CUT_NOTE
