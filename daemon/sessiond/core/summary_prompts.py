"""The texts sent to a summarizer, built from ``prompts/``.

The user message is the serialized conversation in ``<conversation>`` tags,
then the previous summary and any extra context lines from hooks, then the
instructions. The system prompt is the same for every kind of summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from .templates import template

SPLIT_TURN_SEPARATOR: Final = "\n\n---\n\n**Turn Context (split turn):**\n\n"
NO_PRIOR_HISTORY: Final = "No prior history."


def system_prompt() -> str:
    return template("system/summarization-system")


def auto_continue_prompt() -> str:
    return template("system/auto-continue")


def with_focus(base: str, custom_instructions: str | None) -> str:
    """pi appends custom instructions as an "Additional focus"."""
    if custom_instructions:
        return f"{base}\n\nAdditional focus: {custom_instructions}"
    return base


def _blocks(
    conversation: str,
    previous_summary: str | None,
    extra_context: Sequence[str],
    instructions: str,
) -> str:
    text = f"<conversation>\n{conversation}\n</conversation>\n\n"
    if previous_summary:
        text += f"<previous-summary>\n{previous_summary}\n</previous-summary>\n\n"
    if extra_context:
        lines = "\n".join(f"- {line}" for line in extra_context)
        text += f"<additional-context>\n{lines}\n</additional-context>\n\n"
    return text + instructions


def history_instructions(
    previous_summary: str | None,
    custom_instructions: str | None = None,
    prompt_override: str | None = None,
) -> str:
    """The initial or update prompt (or a hook's replacement), plus the focus."""
    name = (
        "compaction/compaction-update-summary"
        if previous_summary
        else "compaction/compaction-summary"
    )
    base = prompt_override if prompt_override else template(name)
    return with_focus(base, custom_instructions)


def history_prompt(
    conversation: str,
    previous_summary: str | None,
    *,
    extra_context: Sequence[str] = (),
    custom_instructions: str | None = None,
    prompt_override: str | None = None,
) -> str:
    return _blocks(
        conversation,
        previous_summary,
        extra_context,
        history_instructions(previous_summary, custom_instructions, prompt_override),
    )


def turn_prefix_prompt(conversation: str, custom_instructions: str | None = None) -> str:
    """The turn prefix's prompt; pi 1.6 adds the run's focus to it too."""
    instructions = with_focus(template("compaction/compaction-turn-prefix"), custom_instructions)
    return _blocks(conversation, None, (), instructions)


def short_summary_prompt(
    conversation: str, merged_summary: str | None, extra_context: Sequence[str] = ()
) -> str:
    return _blocks(
        conversation, merged_summary, extra_context, template("compaction/compaction-short-summary")
    )


def branch_instructions(custom_instructions: str | None, replace_instructions: bool) -> str:
    """pi's rule: custom text replaces the prompt when asked to, else adds a focus."""
    if custom_instructions and replace_instructions:
        return custom_instructions
    return with_focus(template("branch/branch-summary"), custom_instructions)


def branch_prompt(conversation: str, instructions: str) -> str:
    return _blocks(conversation, None, (), instructions)


def branch_preamble() -> str:
    return template("branch/branch-summary-preamble")


def history_max_tokens(reserve_tokens: int) -> int:
    return int(0.8 * reserve_tokens)


def turn_prefix_max_tokens(reserve_tokens: int) -> int:
    return int(0.5 * reserve_tokens)


def short_summary_max_tokens(reserve_tokens: int) -> int:
    return min(512, int(0.2 * reserve_tokens))


BRANCH_SUMMARY_MAX_TOKENS: Final = 2048
