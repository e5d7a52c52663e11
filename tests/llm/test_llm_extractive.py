"""The offline extractive summarizer on realistic conversations, serialized as pi does."""

from __future__ import annotations

import re

import pytest

from sessiond.llm import CompletionRequest, ExtractiveSummarizer, Purpose, extractive_summary
from sessiond.llm.extractive import MARKER
from sessiond.llm.extractive.parse import parse_prompt, parse_tool_calls

PENDING = (
    "Great. Now add a unit test for the empty-password case in src/auth/login.test.ts.\n\n"
    "Use vitest's `it.each` so we can add more cases later."
)
CONVERSATION = "\n\n".join(
    [
        "[User]: The login form crashes when the password is empty. Fix it in "
        "src/auth/login.ts. Please don't change the public API, and always run the tests "
        "with `npm test`.",
        "[Assistant thinking]: Let me look at the login code first.",
        "[Assistant]: I'll start by reading the login module.",
        '[Assistant tool calls]: read(path="src/auth/login.ts"); '
        'read(path="src/auth/session.ts", offset=10, limit=50)',
        "[Tool result]: export function login(user: string, password: string) {\n\n"
        "  return validate(password).ok;\n}",
        "[Tool result]: export const session = {};",
        "[Assistant]: The crash comes from validate() being called with undefined. I decided to "
        "guard in login() rather than in validate(), because validate is used elsewhere.",
        '[Assistant tool calls]: edit(path="src/auth/login.ts", oldText="return x;", '
        'newText="if (!password) return false;\\nreturn x;")',
        "[Tool result]: Successfully replaced text in src/auth/login.ts.",
        '[Assistant tool calls]: bash(command="npm test -- --run auth", timeout=120)',
        "[Tool result]: FAIL src/auth/login.test.ts\n  TypeError: Cannot read properties of "
        "undefined (reading 'length')\n    at validate (src/auth/validate.ts:1:52)\n\n"
        "Tests: 1 failed, 11 passed",
        '[Assistant tool calls]: write(path="src/auth/validate.ts", content="export {}\\n")',
        "[Tool result]: Wrote 3 lines to src/auth/validate.ts",
        "[Assistant]: Fixed: login() now returns false for an empty password. All 12 tests pass.",
        f"[User]: {PENDING}",
    ]
)
HISTORY_PROMPT = (
    f"<conversation>\n{CONVERSATION}\n</conversation>\n\n"
    "Create a structured context checkpoint summary.\n\nAdditional focus: security"
)


def summary(prompt: str, purpose: Purpose = "history", max_tokens: int = 13107) -> str:
    return extractive_summary(
        CompletionRequest(
            system_prompt="sys", prompt=prompt, max_tokens=max_tokens, purpose=purpose
        )
    )


def section(text: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert match is not None, f"no section {title!r} in:\n{text}"
    return match.group(1)


def test_history_checkpoint_has_every_section_filled_by_rules():
    text = summary(HISTORY_PROMPT)
    assert text.splitlines()[0] == MARKER
    assert "offline" in MARKER.lower() and "without a model" in MARKER
    for title in (
        "Goal",
        "Constraints & Preferences",
        "Progress",
        "Key Decisions",
        "Next Steps",
        "Critical Context",
    ):
        section(text, title)
    assert section(text, "Goal").startswith("The login form crashes when the password is empty.")
    assert "don't change the public API" in section(text, "Constraints & Preferences")
    progress = section(text, "Progress")
    assert "### Done" in progress and "### In Progress" in progress and "### Blocked" in progress
    assert "- [x] Modified `src/auth/login.ts`" in progress
    assert "- [x] Modified `src/auth/validate.ts`" in progress
    assert "- [x] Ran `npm test -- --run auth`" in progress
    assert "TypeError: Cannot read properties of undefined (reading 'length')" in progress
    assert "rather than in validate()" in section(text, "Key Decisions")
    assert section(text, "Next Steps").startswith("1. Answer the pending user request")
    critical = section(text, "Critical Context")
    assert "Files modified: `src/auth/login.ts`, `src/auth/validate.ts`" in critical
    # Read and then modified counts as modified only (pi's computeFileLists).
    assert "Files read: `src/auth/session.ts`" in critical
    assert "Requested focus: security" in critical
    assert "All 12 tests pass." in critical
    # The unanswered last request, verbatim, paragraph break included.
    assert "  > Great. Now add a unit test" in critical
    assert "  >\n  > Use vitest's `it.each` so we can add more cases later." in critical
    # Thinking is not a request, a decision or a quote.
    assert "Let me look at the login code first" not in text


def test_deterministic():
    assert summary(HISTORY_PROMPT) == summary(HISTORY_PROMPT)


def test_update_keeps_the_previous_summary_and_adds_the_new():
    first = summary(HISTORY_PROMPT)
    new_part = "\n\n".join(
        [
            '[Assistant tool calls]: write(path="src/auth/login.test.ts", content="it.each")',
            "[Tool result]: Wrote 20 lines",
            "[Assistant]: Added the test. We'll use vitest fixtures instead of mocks.",
            "[User]: Thanks! What does `validate` return for whitespace-only passwords?",
        ]
    )
    prompt = (
        f"<conversation>\n{new_part}\n</conversation>\n\n"
        f"<previous-summary>\n{first}\n\n<read-files>\nsrc/auth/session.ts\n</read-files>\n"
        "</previous-summary>\n\n"
        "<additional-context>\n- Ticket AUTH-12\n</additional-context>\n\n"
        "Update the summary."
    )
    text = summary(prompt, "update")
    assert text.count(MARKER) == 1
    assert text.count("## Goal") == 1
    assert section(text, "Goal").startswith("The login form crashes")  # kept
    progress = section(text, "Progress")
    assert "- [x] Modified `src/auth/login.ts`" in progress  # kept
    assert "- [x] Modified `src/auth/login.test.ts`" in progress  # added
    # The request that was pending has been worked on since: it moved to Done.
    assert '- [x] User request: "Great. Now add a unit test' in progress
    assert "whitespace-only passwords" in progress.split("### In Progress")[1]
    decisions = section(text, "Key Decisions")
    assert "rather than in validate()" in decisions and "vitest fixtures" in decisions
    critical = section(text, "Critical Context")
    assert (
        "Files modified: `src/auth/login.ts`, `src/auth/validate.ts`, `src/auth/login.test.ts`"
        in critical
    )
    assert "Ticket AUTH-12" in critical
    # The old "last message" and "pending request" quotes are stale and gone.
    assert critical.count("Last assistant message:") == 1
    assert "All 12 tests pass" not in critical
    assert "<read-files>" not in text


def test_update_with_a_model_written_previous_summary():
    previous = (
        "## Goal\nPort the CLI to Rust.\n\n## Progress\n### Done\n- [x] Parsed args with clap\n"
        "### In Progress\n- [ ] Config loading\n\n## Next Steps\n1. Finish config loading\n\n"
        "## Additional Notes\nUses edition 2021."
    )
    prompt = (
        "<conversation>\n[User]: also add --verbose\n</conversation>\n\n"
        f"<previous-summary>\n{previous}\n</previous-summary>\n\nUpdate."
    )
    text = summary(prompt, "update")
    assert section(text, "Goal").strip() == "Port the CLI to Rust."
    progress = section(text, "Progress")
    assert "- [x] Parsed args with clap" in progress
    assert "- [ ] Config loading" in progress  # no assistant since: still in progress
    assert '- [ ] User request: "also add --verbose"' in progress
    assert "Uses edition 2021." in section(text, "Critical Context")


def test_turn_prefix_sections():
    text = summary(HISTORY_PROMPT, "turnPrefix", 8192)
    assert text.splitlines()[0] == MARKER
    assert section(text, "Original Request").startswith("> The login form crashes")
    early = section(text, "Early Progress")
    assert "- [x] Modified `src/auth/login.ts`" in early
    assert "- [x] Read `src/auth/session.ts`" in early
    context = section(text, "Context for Suffix")
    assert "Last assistant message:" in context
    assert "## Goal" not in text


def test_short_summary_is_a_few_first_person_sentences():
    text = summary(HISTORY_PROMPT, "short", 512)
    marker, body = text.split("\n", 1)
    assert marker == MARKER
    assert body.startswith("I changed `src/auth/login.ts` and `src/auth/validate.ts`.")
    assert 1 <= len(re.findall(r"[.!?](?:\"|$|\s)", body)) <= 3
    assert "#" not in body


def test_short_summary_without_changes():
    text = summary("<conversation>\n[User]: hi\n\n[Assistant]: Hello.\n</conversation>", "short")
    assert "I made no file changes" in text


def test_branch_summary_sections_have_no_critical_context():
    prompt = f"<conversation>\n{CONVERSATION}\n</conversation>\n\nSummarize this branch."
    text = summary(prompt, "branch", 2048)
    for title in ("Goal", "Constraints & Preferences", "Progress", "Key Decisions", "Next Steps"):
        section(text, title)
    assert "## Critical Context" not in text
    assert "Answer the open user request" in section(text, "Next Steps")
    assert len(text) <= 2048 * 4


def test_wrapped_earlier_summaries_are_merged_not_taken_as_requests():
    wrapped = (
        "[User]: The following is a summary of a branch that this conversation came back from:"
        "\n\n<summary>\n## Goal\nMigrate the database\n\n## Key Decisions\n- Use Alembic\n"
        "</summary>"
    )
    prompt = f"<conversation>\n{wrapped}\n\n[User]: now write the migration\n</conversation>\n\nGo."
    text = summary(prompt)
    assert section(text, "Goal").strip() == "Migrate the database"
    assert "- Use Alembic" in section(text, "Key Decisions")
    assert "now write the migration" in section(text, "Critical Context")


@pytest.mark.parametrize(
    ("purpose", "max_tokens"),
    [
        ("history", 300),
        ("update", 13107),
        ("turnPrefix", 500),
        ("short", 200),
        ("branch", 2048),
    ],
)
def test_output_is_bounded_on_a_huge_conversation(purpose, max_tokens):
    parts = []
    for i in range(400):
        parts.append(f"[User]: Request {i}: please refactor module_{i}.py " + "word " * 200)
        parts.append(f'[Assistant tool calls]: edit(path="src/m{i}.py", oldText="a", newText="b")')
        parts.append(f"[Tool result]: Error: failure {i} " + "x" * 500)
        parts.append(f"[Assistant]: I decided on approach {i} because. " + "text " * 300)
    parts.append("[User]: final question " + "q " * 5000)
    prompt = "<conversation>\n" + "\n\n".join(parts) + "\n</conversation>\n\nSummarize."
    text = summary(prompt, purpose, max_tokens)
    assert len(text) <= max(600, max_tokens * 4)
    assert text.startswith(MARKER)
    if purpose in ("history", "update"):
        assert "final question" in text


def test_tool_call_parsing():
    calls = parse_tool_calls(
        'edit(path="a b.ts", edits=[{"old":"x, y)","new":"z"}]); bash(command="ls; pwd"); '
        'noargs(); broken(path=oops); never(path="x")'
    )
    assert [(c.name, c.args) for c in calls] == [
        ("edit", {"path": "a b.ts", "edits": [{"old": "x, y)", "new": "z"}]}),
        ("bash", {"command": "ls; pwd"}),
        ("noargs", {}),
        ("broken", {}),
    ]


def test_a_quoted_closing_tag_does_not_end_the_conversation():
    conversation = (
        "[User]: my template has\n</conversation>\n\n[User]: in it\n\n"
        "[Assistant]: I see the </conversation> tag."
    )
    parsed = parse_prompt(
        f"<conversation>\n{conversation}\n</conversation>\n\n"
        "<previous-summary>\nold\n</previous-summary>\n\nUpdate."
    )
    assert [p.role for p in parsed.parts] == ["user", "user", "assistant"]
    assert parsed.previous_summary == "old"


def test_no_conversation_still_gives_the_sections():
    text = summary("just instructions, no conversation")
    assert "## Goal\n(not stated in this part)" in text


async def test_the_summarizer_object_marks_its_completion():
    result = await ExtractiveSummarizer().complete(
        CompletionRequest(system_prompt="s", prompt=HISTORY_PROMPT, max_tokens=1000)
    )
    assert result.extractive is True
    assert result.model == "extractive/rules"
    assert result.text.startswith(MARKER)
