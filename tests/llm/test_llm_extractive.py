"""The offline extractive summarizer on realistic conversations, serialized as pi does."""

from __future__ import annotations

import re

import pytest

from sessiond.llm import CompletionRequest, ExtractiveSummarizer, extractive_summary
from sessiond.llm.extractive import MARKER
from sessiond.llm.extractive.facts import result_error
from sessiond.llm.extractive.parse import parse_prompt, parse_tool_calls
from sessiond.llm.extractive.text import impersonal, sentences
from sessiond.wire.completion import Purpose

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
    # The goal is the first request's first two sentences, not the whole message.
    goal = section(text, "Goal").strip()
    assert goal == (
        "The login form crashes when the password is empty. Fix it in src/auth/login.ts."
    )
    assert "- Don't change the public API, and always run the tests with `npm test`." in section(
        text, "Constraints & Preferences"
    )
    progress = section(text, "Progress")
    assert "### Done" in progress and "### In Progress" in progress and "### Blocked" in progress
    done = progress.split("### In Progress")[0]
    assert "- [x] Edited `src/auth/login.ts`" in done
    assert "- [x] Wrote `src/auth/validate.ts`" in done
    # What the assistant reported finished, in its words.
    assert "- [x] Fixed: login() now returns false for an empty password." in done
    # A request is never listed as done, and the failed test run did not pass.
    assert "User request" not in text and "unit test" not in done
    assert "npm test -- --run auth` passed" not in done
    blocked = progress.split("### Blocked")[1]
    assert "`npm test -- --run auth` failed: `TypeError: Cannot read properties of undefined" in (
        blocked
    )
    decisions = section(text, "Key Decisions")
    assert "- **Guard in login() rather than in validate()**: because validate" in (decisions)
    steps = section(text, "Next Steps")
    assert steps.startswith(
        '1. Answer the open user request: "Add a unit test for the empty-password case'
    )
    critical = section(text, "Critical Context")
    # Modified files are in Done (and in the file tags the daemon appends); a file read
    # and then modified counts as modified only (pi's computeFileLists).
    assert "Files read: `src/auth/session.ts`" in critical
    assert "src/auth/login.ts`, `src/auth/validate.ts" not in critical
    assert "`it.each`" in critical
    assert "Requested focus: security" in critical
    # The unanswered last request, verbatim, paragraph break included.
    assert "  > Great. Now add a unit test" in critical
    assert "  >\n  > Use vitest's `it.each` so we can add more cases later." in critical
    # Thinking is not a request, a decision or a quote.
    assert "Let me look at the login code first" not in text


def test_deterministic():
    assert summary(HISTORY_PROMPT) == summary(HISTORY_PROMPT)


def prompt_of(*parts: str, previous: str | None = None) -> str:
    text = "<conversation>\n" + "\n\n".join(parts) + "\n</conversation>\n\n"
    if previous is not None:
        text += f"<previous-summary>\n{previous}\n</previous-summary>\n\n"
    return text + "Summarize."


def test_goal_is_the_users_task_without_filler_or_the_rest_of_the_message():
    text = summary(
        prompt_of(
            "[User]: /mode",
            "[User]: alright, so read src/cli.py in full. the --verbose flag is ignored when a "
            "config file is given. I want you to fix that. also the help text has typos, and "
            "the README is out of date, and a dozen other small things.",
        )
    )
    goal = section(text, "Goal").strip()
    assert goal == (
        "Read src/cli.py in full. the --verbose flag is ignored when a config file is given."
    )


def test_later_requests_are_listed_under_the_goal_not_as_done():
    text = summary(
        prompt_of(
            "[User]: Port the parser to Rust.",
            "[Assistant]: Ported the parser to `src/parser.rs`.",
            "[User]: Now add a --json flag to the CLI please.",
            "[Assistant]: Added the `--json` flag.",
        )
    )
    goal = section(text, "Goal")
    assert goal.startswith("Port the parser to Rust.")
    assert "- Then: Add a --json flag to the CLI please." in goal
    done = section(text, "Progress").split("### In Progress")[0]
    assert "- [x] Ported the parser to `src/parser.rs`." in done
    assert "- [x] Added the `--json` flag." in done
    assert "--json flag to the CLI" not in done


def test_a_failed_edit_is_blocked_not_done_until_a_later_edit_succeeds():
    failing = prompt_of(
        "[User]: Rename fetchUser to loadUser in src/api.ts.",
        '[Assistant tool calls]: edit(path="src/api.ts", oldText="fetchUser(", '
        'newText="loadUser(")',
        "[Tool result]: Could not find the exact text in src/api.ts. The old text must match "
        "exactly including all whitespace and newlines.",
    )
    text = summary(failing)
    done = section(text, "Progress").split("### In Progress")[0]
    assert "src/api.ts" not in done
    blocked = section(text, "Progress").split("### Blocked")[1]
    assert "`src/api.ts` failed: `Could not find the exact text in src/api.ts." in blocked
    # The turn ended while tools were running: the request is in progress.
    in_progress = section(text, "Progress").split("### In Progress")[1].split("### Blocked")[0]
    assert "- [ ] Rename fetchUser to loadUser in src/api.ts. (last step: `edit` `src/api.ts`)" in (
        in_progress
    )
    assert "Finish: Rename fetchUser to loadUser" in section(text, "Next Steps")
    assert "Files modified" not in section(text, "Critical Context")

    fixed = summary(
        failing.replace(
            "\n</conversation>",
            '\n\n[Assistant tool calls]: edit(path="src/api.ts", oldText="fetchUser (", '
            'newText="export function loadUser (")\n\n'
            "[Tool result]: Successfully replaced text in src/api.ts.\n\n"
            "[Assistant]: Renamed it.\n</conversation>",
        )
    )
    progress = section(fixed, "Progress")
    assert "- [x] Edited `src/api.ts` (`loadUser()`)" in progress
    assert "### Blocked\n- (none)" in progress
    assert "### In Progress\n- (none)" in progress
    assert "- Resolved: `src/api.ts` failed with `Could not find the exact text" in section(
        fixed, "Critical Context"
    )


def test_commands_pass_or_fail_by_their_output():
    text = summary(
        prompt_of(
            "[User]: Make the test suite green.",
            '[Assistant tool calls]: bash(command="cd /repo && python -m pytest -q")',
            "[Tool result]: F.\nE   AssertionError: 3 != 4\n1 failed, 1 passed in 0.1s\n\n"
            "Command exited with code 1",
            '[Assistant tool calls]: edit(path="calc.py", oldText="a", newText="def add(a, b):")',
            "[Tool result]: Successfully replaced text in calc.py.",
            '[Assistant tool calls]: bash(command="python -m pytest -q")',
            "[Tool result]: ..\n2 passed, 0 failed in 0.1s",
            '[Assistant tool calls]: bash(command="git diff --stat")',
            "[Tool result]: calc.py | 2 +-",
            "[Assistant]: The suite is green now. Should I also add a test for `add` with floats?",
        )
    )
    done = section(text, "Progress").split("### In Progress")[0]
    assert "- [x] `python -m pytest -q` passed" in done
    assert "- [x] Edited `calc.py` (`add()`)" in done
    assert "### Blocked\n- (none)" in section(text, "Progress")
    critical = section(text, "Critical Context")
    assert (
        "- Resolved: `python -m pytest -q` failed with `E AssertionError: 3 != 4`, "
        "then succeeded" in critical
    )
    assert "Commands run: `git diff --stat`" in critical
    # The assistant's own proposal is the next step.
    assert "1. Should I also add a test for `add` with floats?" in section(text, "Next Steps")


def test_result_errors_are_read_from_the_tool_output():
    assert result_error("Command exited with code 2", command=True) is not None
    assert result_error("12 passed, 0 failed", command=True) is None
    assert result_error("FAIL src/a.test.ts\nTests: 1 failed", command=True) is not None
    # A read whose content mentions errors did not fail.
    assert result_error("def parse():\n    raise ValueError('error')", command=False) is None
    assert result_error("Error: ENOENT: no such file", command=False) == (
        "Error: ENOENT: no such file"
    )


def test_update_merges_instead_of_appending():
    first = summary(
        prompt_of(
            "[User]: Add caching to the HTTP client in src/http.py.",
            '[Assistant tool calls]: edit(path="src/http.py", oldText="a", newText="class Cache:")',
            "[Tool result]: Successfully replaced text in src/http.py.",
            '[Assistant tool calls]: bash(command="pytest tests/test_http.py")',
        )
    )
    progress = section(first, "Progress")
    assert "- [ ] Add caching to the HTTP client in src/http.py." in progress
    new_part = prompt_of(
        "[Tool result]: 5 passed",
        "[Assistant]: Added `Cache` with a TTL. We'll use an LRU instead of a plain dict "
        "because memory must stay bounded.",
        "[User]: Thanks! What does `Cache.get` return on a miss?",
        previous=first + "\n\n<read-files>\nsrc/util.py\n</read-files>",
    )
    text = summary(new_part, "update")
    assert text.count(MARKER) == 1 and text.count("## Goal") == 1
    assert section(text, "Goal").startswith("Add caching to the HTTP client")  # kept
    progress = section(text, "Progress")
    done = progress.split("### In Progress")[0]
    # The interrupted work was finished in the new part: it moved to Done.
    assert "- [x] Add caching to the HTTP client in src/http.py." in done
    assert "- [x] Edited `src/http.py` (`Cache`)" in done  # kept
    assert "- [x] Added `Cache` with a TTL." in done  # added
    assert "### In Progress\n- (none)" in progress
    assert "- **Use an LRU instead of a plain dict**: because memory" in section(
        text, "Key Decisions"
    )
    steps = section(text, "Next Steps")
    assert "Finish:" not in steps  # stale
    assert steps.startswith(
        '1. Answer the open user request: "What does `Cache.get` return on a miss?"'
    )
    critical = section(text, "Critical Context")
    # One line of each kind of name list, holding the names of both summaries.
    assert critical.count("- Other names:") <= 1 and critical.count("- Files read:") <= 1
    assert "What does `Cache.get` return on a miss?" in critical
    assert "<read-files>" not in text


def test_repeated_updates_stay_about_one_summary_long():
    text: str | None = None
    lengths = []
    for round_ in range(12):
        parts = []
        for i in range(6):
            n = round_ * 6 + i
            parts += [
                f"[User]: Please refactor module_{n}.py so that `run_{n}` is pure.",
                f'[Assistant tool calls]: edit(path="src/module_{n}.py", oldText="x", '
                f'newText="def run_{n}(value):")',
                f"[Tool result]: Successfully replaced text in src/module_{n}.py.",
                f"[Assistant]: Refactored `run_{n}` in `src/module_{n}.py`; it is now pure.",
            ]
        prompt = prompt_of(*parts, previous=text)
        text = summary(prompt, "update" if text else "history")
        lengths.append(len(text))
    assert text is not None
    assert max(lengths) <= 6500
    assert lengths[-1] < 1.3 * lengths[3]
    # The newest work is there in full; the oldest is folded into the names it touched.
    assert "`run_71`" in text and "`src/module_71.py`" in text
    assert "Earlier steps touched" in text


def test_update_with_a_model_written_previous_summary():
    previous = (
        "## Goal\nPort the CLI to Rust.\n\n## Progress\n### Done\n- [x] Parsed args with clap\n"
        "### In Progress\n- [ ] Config loading\n\n## Next Steps\n1. Finish config loading\n\n"
        "## Additional Notes\nUses edition 2021."
    )
    text = summary(prompt_of("[User]: also add --verbose", previous=previous), "update")
    assert section(text, "Goal").strip() == "Port the CLI to Rust."
    progress = section(text, "Progress")
    assert "- [x] Parsed args with clap" in progress
    assert "- [ ] Config loading" in progress  # no assistant since: still in progress
    assert "User request" not in progress
    assert section(text, "Next Steps").startswith(
        '1. Answer the open user request: "also add --verbose."'
    )
    assert "Uses edition 2021." in section(text, "Critical Context")


def test_size_follows_the_conversation_and_never_passes_the_budget():
    parts = []
    for i in range(300):
        parts += [
            f"[User]: Step {i}: update `handler_{i}` in src/h{i}.py to log its input.",
            f'[Assistant tool calls]: read(path="src/h{i}.py"); '
            f'edit(path="src/h{i}.py", oldText="a", newText="def handler_{i}(event):")',
            "[Tool result]: def handler(event): ...",
            f"[Tool result]: Successfully replaced text in src/h{i}.py.",
            f"[Assistant]: Updated `handler_{i}` so that it logs the event. " + "Detail. " * 40,
        ]
    prompt = prompt_of(*parts)
    text = summary(prompt)
    conversation = len(prompt)
    # A base and a twentieth of the conversation (render.size_target).
    assert 2000 < len(text) <= min(24000, 2000 + 0.05 * conversation)
    assert len(summary(prompt, max_tokens=500)) <= 2000


def test_turn_prefix_sections():
    text = summary(HISTORY_PROMPT, "turnPrefix", 8192)
    assert text.splitlines()[0] == MARKER
    request = section(text, "Original Request")
    # The task in a line, then the request's opening in the user's words.
    assert request.startswith(
        "The login form crashes when the password is empty. Fix it in src/auth/login.ts.\n\n"
        "> The login form crashes"
    )
    early = section(text, "Early Progress")
    # The turn's work is done work: it is listed under Done, as in a checkpoint.
    done = early.split("### In Progress")[0]
    assert done.startswith("### Done\n")
    assert "- [x] Edited `src/auth/login.ts`" in done
    assert "- [x] Read `src/auth/session.ts`" in done
    assert "`npm test -- --run auth` failed: `TypeError" in early.split("### Blocked")[1]
    context = section(text, "Context for Suffix")
    assert "- Last reply: Fixed: login() now returns false for an empty password." in context
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
    assert "## Goal\n(not stated)" in text


async def test_the_summarizer_object_marks_its_completion():
    result = await ExtractiveSummarizer().complete(
        CompletionRequest(system_prompt="s", prompt=HISTORY_PROMPT, max_tokens=1000)
    )
    assert result.extractive is True
    assert result.model == "extractive/rules"
    assert result.text.startswith(MARKER)


def test_names_in_prose_and_what_the_last_reply_says_is_open():
    text = summary(
        prompt_of(
            "[User]: Port the scorer and keep row-level logs in experiments/ledger.jsonl.",
            "[Assistant]: I read /workspace/pi/compaction.ts and found that "
            "findCutPoint never cuts at a tool result. I created score_compaction.py.\n"
            "- Current work is calibrating the scorer.\n- Blocked: no adapter trained yet.",
        )
    )
    progress = section(text, "Progress")
    # Reports in the assistant's voice become checkpoint lines, whole.
    assert (
        "- [x] Read /workspace/pi/compaction.ts and found that findCutPoint never cuts at a "
        "tool result." in progress
    )
    assert "- [x] Created score_compaction.py." in progress
    assert "- [ ] Current work is calibrating the scorer." in progress
    assert "### Blocked\n- Blocked: no adapter trained yet." in progress
    # Names written without backticks are names too; each is stated.
    for name in ("/workspace/pi/compaction.ts", "findCutPoint", "experiments/ledger.jsonl"):
        assert name in text
    assert "`Port`" not in text  # a capitalized word is not a name


def test_sentences_leave_list_markers_and_abbreviations_alone():
    assert sentences("Done:\n- Added a test. then more.\n2. Second item, e.g. this.") == (
        "Done:",
        "Added a test.",
        "then more.",
        "Second item, e.g. this.",
    )


def test_a_file_changed_again_is_listed_again_only_for_what_is_new():
    text = summary(
        prompt_of(
            "[User]: Add parsing to src/p.py.",
            '[Assistant tool calls]: write(path="src/p.py", content="def parse(text):\\n")',
            "[Tool result]: Successfully wrote 18 bytes to src/p.py",
            "[Assistant]: Wrote it.",
            "[User]: Also make it strict.",
            '[Assistant tool calls]: edit(path="src/p.py", oldText="x", newText="y = 1")',
            "[Tool result]: Successfully replaced text in src/p.py.",
            '[Assistant tool calls]: edit(path="src/p.py", oldText="y", '
            'newText="class StrictError(ValueError):")',
            "[Tool result]: Successfully replaced text in src/p.py.",
            "[Assistant]: Done.",
        )
    )
    done = section(text, "Progress").split("### In Progress")[0]
    assert "- [x] Wrote `src/p.py` (`parse()`)" in done
    # The second change is listed with what it declared, not again with `parse`.
    assert "- [x] Edited `src/p.py` (`StrictError`)" in done
    assert done.count("`src/p.py`") == 2


def test_the_assistants_voice_is_dropped_only_where_the_line_still_reads():
    assert impersonal("I created score.py.") == "Created score.py."
    assert impersonal("We'll use an LRU cache.") == "Use an LRU cache."
    assert impersonal("I decided to guard in login().") == "Guard in login()."
    assert impersonal("We now handle empty input.") == "We now handle empty input."
    assert impersonal("Idle workers are reused.") == "Idle workers are reused."


def test_a_shell_run_the_user_made_is_a_command_not_a_request():
    text = summary(
        prompt_of(
            "[User]: Rename the config loader to load_settings.",
            '[Assistant tool calls]: edit(path="src/config.py", newText="def load_settings():")',
            "[Tool result]: Successfully replaced 1 block(s) in src/config.py.",
            "[Assistant]: Renamed it in `src/config.py`.",
            "[User]: Ran `pytest -q tests/test_config.py`\n```\n1 failed, 3 passed\n```\n\n"
            "Command exited with code 1",
        )
    )
    assert "Ran `pytest" not in text and "open user request" not in text
    # Its failure is read from its output, as a tool's would be.
    blocked = section(text, "Progress").split("### Blocked")[1]
    assert "- `pytest -q tests/test_config.py` failed: `1 failed, 3 passed`" in blocked
    assert section(text, "Next Steps").startswith("1. Fix `pytest -q tests/test_config.py`")
