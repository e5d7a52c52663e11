"""Each rule of the offline summary on a small hand-made conversation: what a name is,
what a finished sentence is, what counts as work done, who is speaking."""

from __future__ import annotations

import re

from sessiond.llm import CompletionRequest, extractive_summary
from sessiond.llm.extractive.names import (
    code_spans,
    code_words,
    declared,
    is_name,
    names_only_in_code,
    prose_names,
)
from sessiond.llm.extractive.parse import unwrap_summary
from sessiond.llm.extractive.requests import is_task, task_line
from sessiond.llm.extractive.text import in_first_person, is_finished, sentences
from sessiond.wire.completion import Purpose


def summary(*parts: str, purpose: Purpose = "history", previous: str | None = None) -> str:
    prompt = "<conversation>\n" + "\n\n".join(parts) + "\n</conversation>\n\n"
    if previous is not None:
        prompt += f"<previous-summary>\n{previous}\n</previous-summary>\n\n"
    request = CompletionRequest(
        system_prompt="", prompt=prompt + "Summarize.", max_tokens=13107, purpose=purpose
    )
    return extractive_summary(request)


def section(text: str, title: str) -> str:
    match = re.search(rf"^##+ {re.escape(title)}\n(.*?)(?=^##|\Z)", text, re.S | re.M)
    assert match is not None, f"no section {title!r} in:\n{text}"
    return match.group(1)


def backticked(text: str) -> list[str]:
    return re.findall(r"`([^`\n]+)`", text)


# -- what a name is


def test_plain_words_are_not_names_even_in_backticks() -> None:
    for plain in ("for", "that", "and", "the tests", "READ ONLY", " spaced", "Done. Moving on now"):
        assert not is_name(plain), plain
    for name in (
        "parse_args",
        "src/app.py",
        "git status",
        "git push origin main",
        "--force",
        "Cache.get",
        "npm test",
    ):
        assert is_name(name), name
    # After a stray backtick the pairs are off by one: what they enclose is read as the
    # phrase it is, not as names (the names there are lost rather than misread).
    assert code_spans("Type a ` then `x` and `y`") == ()
    assert code_spans("Use `x` and `y`") == ("x", "y")


def test_a_sentence_keeps_its_code_font_only_on_names() -> None:
    assert names_only_in_code("- Shows a `READ ONLY` badge from `Badge.tsx`.") == (
        "- Shows a READ ONLY badge from `Badge.tsx`."
    )
    # A verbatim quote is left as it is.
    assert names_only_in_code("  > keep `for` here") == "  > keep `for` here"


def test_declarations_start_a_line_and_keywords_are_not_declared() -> None:
    code = "impl Default for Config {\n    fn default() -> Self {}\n}\npub async fn build_args(x)"
    assert declared(code) == ["Default", "default", "build_args"]
    assert "for" not in declared("// a type for the cache\nclass Cache:\n")


def test_code_shaped_words_and_member_chains_are_names() -> None:
    code = 'vi.stubEnv("NODE_ENV", "x"); const userId = getUser().id; process.env.NODE_ENV'
    assert code_words(code) == [
        "vi.stubEnv",
        "NODE_ENV",
        "userId",
        "getUser",
        "process.env.NODE_ENV",
    ]
    assert prose_names("Align it with Review.md and the notes in docs/plan.md, e.g. soon.") == (
        "Review.md",
        "docs/plan.md",
    )
    # Words joined by a slash are a pair of words unless they look like a path.
    assert prose_names("Pause/resume via Razorpay/Stripe, see ./run.sh and /etc/hosts") == (
        "./run.sh",
        "/etc/hosts",
    )


# -- finished sentences and who speaks


def test_a_finished_sentence_does_not_introduce_or_break_off() -> None:
    assert is_finished("All 12 tests pass.")
    assert is_finished("Fixed it")
    for open_ended in ("Split `TuiRenderer` into:", "Updated the parser and", "See the", "Wait…"):
        assert not is_finished(open_ended), open_ended
    # Sentences end after closing emphasis too; tables and lone tags are not sentences.
    assert sentences("**Done.** Next step.\n| a | b |\n<objective>\nReal text.") == (
        "**Done.**",
        "Next step.",
        "Real text.",
    )


def test_first_person_is_found_outside_code_and_quotes() -> None:
    assert in_first_person("Let me check `x`.") and in_first_person("We'll keep it.")
    assert not in_first_person('Fixed `my_var`; the user said "I want it".')


def test_the_goal_is_the_task_not_the_asking_and_not_the_users_i() -> None:
    assert task_line("Can you fix the login crash?", 200) == "Fix the login crash."
    assert task_line("I want you to add a --verbose flag", 200) == "Add a --verbose flag."
    assert task_line("I think the sidebar looks off on mobile", 200) == (
        'The user wrote: "I think the sidebar looks off on mobile."'
    )
    assert task_line("/clear\n/plan 12\n\n# Plan\n\nPlan the phase.", 200) == (
        "`/plan 12`: Plan. Plan the phase."
    )
    assert not is_task("/clear") and is_task("/plan 12")
    assert task_line("[Request interrupted by user]\nRename the module", 200) == (
        "Rename the module."
    )


def test_no_line_is_a_cut_off_sentence() -> None:
    long_report = "Refactored the renderer so that " + "every panel draws itself " * 30 + "."
    text = summary(
        "[User]: Please split the renderer.",
        '[Assistant tool calls]: edit(path="src/r.ts", oldText="a", newText="b")',
        "[Tool result]: Successfully replaced text in src/r.ts.",
        f"[Assistant]: Split `TuiRenderer` into:\n- `Panel`\n- `Frame`\n{long_report} "
        "All 4 tests pass.",
    )
    done = section(text, "Done")
    assert "- [x] All 4 tests pass." in done
    assert "into:" not in done and "Refactored the renderer" not in done
    assert "…" not in text


def test_decisions_are_choices_not_announcements() -> None:
    text = summary(
        "[User]: Speed up the cache.",
        "[Assistant]: Let me update WP14 to create main-new.ts instead of modifying main.ts:",
        '[Assistant tool calls]: write(path="main-new.ts", content="x")',
        "[Tool result]: Wrote main-new.ts",
        "[Assistant]: I'll use an LRU instead of a plain dict because memory must stay bounded.",
    )
    decisions = section(text, "Key Decisions")
    assert "- **Use an LRU instead of a plain dict**: because memory must stay bounded." in (
        decisions
    )
    assert "WP14" not in decisions and "Let me" not in text.split("## Critical Context")[0]


# -- what counts as work done


def test_the_work_of_one_long_turn_is_done_work() -> None:
    # A compaction that cuts inside one long turn summarizes its start as a turn prefix.
    parts = ["[User]: Implement the plan in docs/plan.md."]
    for n in range(6):
        parts += [
            f'[Assistant tool calls]: write(path="src/step{n}.py", content="def step_{n}(): pass")',
            f"[Tool result]: Wrote src/step{n}.py",
            f"[Assistant]: Created `step_{n}` in `src/step{n}.py`.",
        ]
    parts += ['[Assistant tool calls]: bash(command="pytest -q")', "[Tool result]: 6 passed"]
    text = summary(*parts, purpose="turnPrefix")
    done = section(text, "Done")
    assert "(none)" not in done
    assert "- [x] Wrote `src/step0.py` (`step_0()`)" in done
    assert "- [x] `pytest -q` passed" in done
    assert "- [x] Created `step_5` in `src/step5.py`." in done


def test_a_change_is_listed_with_what_it_declared_and_what_was_talked_about() -> None:
    text = summary(
        "[User]: Make the retry limit configurable; call it `MAX_RETRIES`.",
        '[Assistant tool calls]: edit(path="src/net.py", oldText="retries = 3", '
        'newText="MAX_RETRIES = 3\\ndef fetch_with_retry(url):\\n    attempt_count = 0")',
        "[Tool result]: Successfully replaced text in src/net.py.",
    )
    done = section(text, "Done")
    assert "- [x] Edited `src/net.py` (`fetch_with_retry()`, `MAX_RETRIES`)" in done
    assert "attempt_count" not in done  # a local the conversation never talks about


def test_commands_that_changed_something_are_done_those_that_looked_are_not() -> None:
    text = summary(
        "[User]: Commit the fix on a new branch.",
        '[Assistant tool calls]: bash(command="git status --short"); '
        'bash(command="git checkout -b fix/login"); bash(command="ls -la src")',
        "[Tool result]: M src/a.py",
        "[Tool result]: Switched to a new branch 'fix/login'",
        "[Tool result]: a.py",
        '[Assistant tool calls]: bash(command="git commit -am fix 2>&1 | tail -3")',
        "[Tool result]: [fix/login 1a2b3c] fix",
        "[Assistant]: Committed.",
    )
    done = section(text, "Done")
    assert "- [x] Ran `git checkout -b fix/login`, `git commit -am fix`" in done
    assert "git status" not in done and "ls -la" not in done


# -- where names come from


def test_findings_state_the_names_worked_on_in_the_assistants_words() -> None:
    text = summary(
        "[User]: Why does `npm()` match twice in the generated rc file?",
        "[Assistant]: Now let me check the generator.",
        '[Assistant tool calls]: read(path="src/shell.rs")',
        "[Tool result]: fn generate_rc() {}",
        "[Assistant]: The count is 2 because `pnpm()` contains `npm()` as a substring. "
        "Searching for `npm() {` instead is unambiguous.",
    )
    critical = section(text, "Critical Context")
    assert "- The count is 2 because `pnpm()` contains `npm()` as a substring." in critical
    assert "Now let me check" not in critical


def test_a_task_notification_is_not_an_earlier_summary() -> None:
    notification = (
        "<task-notification>\n<task-id>a1</task-id>\n<summary>Agent failed: boom</summary>\n"
        "</task-notification>"
    )
    assert unwrap_summary(notification) is None
    wrapped = "Earlier parts were condensed.\n\n<summary>\n## Goal\nShip it.\n</summary>"
    assert unwrap_summary(wrapped) == "## Goal\nShip it."


def test_an_earlier_summarys_prose_gives_way_to_the_new_work() -> None:
    previous = "## Notes\n" + "".join(
        f"Line {n} of the earlier narrative, without any name in it at all.\n" for n in range(400)
    )
    previous += "- The parser lives in `src/parse.py`.\n"
    text = summary(
        "[User]: Now add `--strict`.",
        '[Assistant tool calls]: edit(path="src/cli.py", oldText="a", newText="STRICT_MODE = 1")',
        "[Tool result]: Successfully replaced text in src/cli.py.",
        "[Assistant]: Added `--strict`.",
        previous=previous,
        purpose="update",
    )
    critical = section(text, "Critical Context")
    assert "- The parser lives in `src/parse.py`." in critical  # a line that names, kept
    assert "lines of the earlier summary left out)" in critical
    assert "- [x] Edited `src/cli.py`" in section(text, "Done")
    assert len(text) < len(previous)


def test_no_backticked_plain_words_anywhere() -> None:
    text = summary(
        "[User]: Make the `READ ONLY` badge red and keep `for` loops simple.",
        '[Assistant tool calls]: edit(path="src/Badge.tsx", oldText="a", newText="color: red")',
        "[Tool result]: Successfully replaced text in src/Badge.tsx.",
        "[Assistant]: Made the `READ ONLY` badge red in `Badge.tsx`.",
    )
    assert all(is_name(span) for span in backticked(text.split("Open user request")[0]))


def test_next_steps_are_proposals_not_sentences_that_say_next() -> None:
    text = summary(
        "[User]: Why are there .js files?",
        "[Assistant]: There's no `outDir`, so `tsc` emits `.js` files right next to the "
        "sources. Should I move them to `dist/`?",
    )
    steps = section(text, "Next Steps")
    assert "1. Should I move them to `dist/`?" in steps
    assert "right next to" not in steps


def test_terminal_codes_are_not_quoted() -> None:
    text = summary(
        "[User]: Run the tests.",
        '[Assistant tool calls]: bash(command="npm test")',
        "[Tool result]: \x1b[1m\x1b[46m RUN \x1b[49m\x1b[22m v4.0.18",
        purpose="turnPrefix",
    )
    assert "\x1b" not in text
    assert ">  RUN  v4.0.18" in text
