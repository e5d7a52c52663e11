"""The offline extractive summarizer: no model, no network, same prompt in, sections out.

It reads the conversation out of the very prompt a model would get and fills
the sections that prompt asks for (chosen by ``purpose``) by fixed rules
(``build``; protocol/behaviour.md#offline-summary). The output is deterministic,
about as long as a model's summary of the same span, never longer than the
request's ``max_tokens`` (about four characters a token), and says on its first
line that no model wrote it.

Modules: ``parse`` reads the prompt, ``facts`` pairs tool calls with results,
``build`` applies the rules (``requests``, ``commands``, ``changes``, ``toolwork``,
``findings`` and ``names`` for each kind of fact; ``context`` for Critical Context),
``checkpoint`` reads and merges sections, ``limits`` and ``render`` fit the text to its
size, ``text`` has the sentence and clipping helpers.
"""

from __future__ import annotations

import asyncio

from sessiond.llm.base import Completion, CompletionRequest, ProgressCallback, ProgressMeter
from sessiond.llm.extractive.checkpoint import MARKER
from sessiond.llm.extractive.facts import extract
from sessiond.llm.extractive.parse import parse_prompt
from sessiond.llm.extractive.render import summarize
from sessiond.llm.extractive.text import clear_caches

__all__ = ["MARKER", "MODEL_LABEL", "ExtractiveSummarizer", "clear_caches", "extractive_summary"]

MODEL_LABEL = "extractive/rules"
# Below this the sections themselves would not fit.
_MIN_BUDGET_CHARS = 600
# Reading a prompt takes about 0.2 s per MB; longer than a few ms would stall the
# daemon's event loop, so big prompts are read in a worker thread.
_THREAD_ABOVE_CHARS = 100_000


def extractive_summary(request: CompletionRequest) -> str:
    parsed = parse_prompt(request.prompt)
    facts = extract(parsed)
    budget = max(_MIN_BUDGET_CHARS, request.max_tokens * 4)
    previous = parsed.previous_summary if request.purpose in ("update", "history") else None
    try:
        return summarize(facts, previous, request.purpose, budget)
    finally:
        # The caches serve the renders of one summary; kept, they would hold its messages.
        clear_caches()


class ExtractiveSummarizer:
    label = MODEL_LABEL

    def __repr__(self) -> str:
        return "ExtractiveSummarizer()"

    async def complete(
        self, request: CompletionRequest, progress: ProgressCallback | None = None
    ) -> Completion:
        if len(request.prompt) > _THREAD_ABOVE_CHARS:
            text = await asyncio.to_thread(extractive_summary, request)
        else:
            text = extractive_summary(request)
        ProgressMeter(progress, MODEL_LABEL).add(text)
        return Completion(text=text, model=MODEL_LABEL, extractive=True)
