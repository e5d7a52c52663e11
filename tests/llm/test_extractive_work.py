"""The offline summary's rules on the work done through tools, each on a small hand-made
conversation: a change's own lines, the files read and what they declare, searches and
what they found, the agent's task list, work done through other tools (an issue tracker),
commits, a sub-agent's report, and the names left over told by the file that has them."""

from __future__ import annotations

import json

from sessiond.core.fileops import FileOps
from sessiond.core.messages import AssistantMessage, TokenUsage, ToolCall
from sessiond.llm.extractive.commands import short_command
from sessiond.llm.extractive.facts import changed_lines
from tests.llm.test_extractive_rules import section, summary


def call(name: str, **args: object) -> str:
    shown = ", ".join(f"{key}={json.dumps(value)}" for key, value in args.items())
    return f"{name}({shown})"


def calls(*made: str) -> str:
    return "[Assistant tool calls]: " + "; ".join(made)


def test_paths_are_written_as_the_tools_wrote_them() -> None:
    parts = ["[User]: Tidy the three modules."]
    for name in ("a", "b", "c"):
        parts += [
            calls(call("edit", path=f"/home/me/proj/src/{name}.py", oldText="x", newText="y=1")),
            f"[Tool result]: Successfully replaced text in /home/me/proj/src/{name}.py.",
        ]
    done = section(summary(*parts), "Done")
    for name in ("a", "b", "c"):
        assert f"`/home/me/proj/src/{name}.py`" in done
    assert "relative to" not in done


def test_a_change_is_quoted_as_a_diff_of_its_telling_lines() -> None:
    old = "def load(path):\n    return open(path).read()\n"
    new = (
        "# Read the config as UTF-8.\n"
        "def load(path, encoding='utf-8'):\n"
        "    with open(path, encoding=encoding) as handle:\n"
        "        return parse_config(handle.read())\n"
        "}\n"
    )
    text = summary(
        "[User]: Make `load` read the file as UTF-8 and run it through `parse_config`.",
        calls(call("Edit", file_path="/p/config.py", old_string=old, new_string=new)),
        "[Tool result]: The file /p/config.py has been updated.",
        "[Assistant]: `load` now passes the text to `parse_config`.",
    )
    done = section(text, "Done")
    assert "- [x] Edited `/p/config.py`" in done
    assert "  ```diff\n" in done
    assert "  + def load(path, encoding='utf-8'):" in done
    assert "  + return parse_config(handle.read())" in done
    assert "  - def load(path):" in done
    # A comment and a line of punctuation say nothing; unchanged lines are not news.
    assert "Read the config" not in done
    assert "+ }" not in done


def test_nested_edits_and_patches_are_read_for_their_lines() -> None:
    multi = call(
        "MultiEdit",
        file_path="/p/a.ts",
        edits=[
            {"old_string": "let retries = legacyRetries()", "new_string": "const r = maxRetries()"}
        ],
    )
    pi_edit = call(
        "edit", path="/p/b.ts", edits=[{"oldText": "a()", "newText": "const cache = newCache()"}]
    )
    text = summary(
        "[User]: Use `maxRetries` and `newCache` instead of `legacyRetries`.",
        calls(multi, pi_edit),
        "[Tool result]: Applied 1 edit to /p/a.ts",
        "[Tool result]: Successfully replaced text in /p/b.ts.",
        "[Assistant]: Let me make sure `legacyRetries` is gone.",
    )
    done = section(text, "Done")
    assert "+ const r = maxRetries()" in done
    assert "- let retries = legacyRetries()" in done
    assert "+ const cache = newCache()" in done
    # A patch tool's diff: its added and removed lines.
    patch = "*** Update File: c.py\n-old = fetch_rows()\n+new = fetch_rows(limit)\n+++ b/c.py\n"
    assert changed_lines({"input": patch}) == (
        ("new = fetch_rows(limit)",),
        ("old = fetch_rows()",),
    )


def test_a_file_read_shows_the_declarations_the_conversation_talks_about() -> None:
    listing = (
        "     1→import {\n"
        "     2→  type Session,\n"
        "     3→} from './types';\n"
        "     4→export async function openSession(id: string): Promise<Session> {\n"
        "     5→export function closeAll(): void {\n"
    )
    text = summary(
        "[User]: Why does `openSession` hang?",
        calls(call("Read", file_path="/p/session.ts")),
        f"[Tool result]: {listing}",
        "[Assistant]: `openSession` awaits a lock that `Session` never releases.",
    )
    critical = section(text, "Critical Context")
    assert "- Read `/p/session.ts`:" in critical
    assert "export async function openSession(id: string): Promise<Session>" in critical
    # Not talked about; and an import list's item is not a declaration.
    assert "closeAll" not in critical
    assert "type Session," not in critical


def test_searches_tell_the_pattern_where_and_what_they_found() -> None:
    text = summary(
        "[User]: Find where the token is refreshed.",
        calls(
            call("Grep", pattern="refreshToken", path="/p/src", output_mode="files_with_matches")
        ),
        "[Tool result]: Found 2 files\n/p/src/auth.ts\n/p/src/client.ts",
        calls(call("Glob", pattern="**/*.spec.ts")),
        "[Tool result]: No files found",
    )
    critical = section(text, "Critical Context")
    assert (
        "- Searched: `refreshToken` in `/p/src` found `/p/src/auth.ts`, `/p/src/client.ts`; "
        "`**/*.spec.ts`"
    ) in critical


def test_a_call_left_unanswered_does_not_take_the_next_calls_results() -> None:
    text = summary(
        "[User]: Look for both names.",
        calls(call("Grep", pattern="alpha", path="/p")),
        # No result: the run was aborted; the next message's calls get their own results.
        calls(call("Grep", pattern="beta", path="/p")),
        "[Tool result]: /p/beta.py",
    )
    critical = section(text, "Critical Context")
    assert "`beta` in `/p` found `/p/beta.py`" in critical
    assert "`alpha` in `/p` found" not in critical


def test_the_agents_task_list_gives_done_in_progress_and_next_steps() -> None:
    text = summary(
        "[User]: Ship the release.",
        calls(
            call("TaskCreate", subject="Bump the version"),
            call("TaskCreate", subject="Write the changelog"),
            call("TaskCreate", subject="Tag the release"),
        ),
        "[Tool result]: Task #1 created successfully: Bump the version",
        "[Tool result]: Task #2 created successfully: Write the changelog",
        "[Tool result]: Task #3 created successfully: Tag the release",
        calls(
            call("TaskUpdate", taskId="1", status="completed"),
            call("TaskUpdate", taskId="2", status="in_progress"),
        ),
        "[Tool result]: Updated task #1 status",
        "[Tool result]: Updated task #2 status",
    )
    assert "- [x] Bump the version" in section(text, "Done")
    assert "- [ ] Write the changelog" in section(text, "In Progress")
    assert "Tag the release" in section(text, "Next Steps")
    assert "Tag the release" not in section(text, "Done")


def test_a_whole_todo_list_replaces_the_earlier_one() -> None:
    first = [{"content": "Read the spec", "status": "in_progress"}]
    later = [
        {"content": "Read the spec", "status": "completed"},
        {"content": "Draft the parser", "status": "pending"},
    ]
    text = summary(
        "[User]: Build the parser.",
        calls(call("TodoWrite", todos=first)),
        "[Tool result]: Todos have been modified successfully.",
        calls(call("TodoWrite", todos=later)),
        "[Tool result]: Todos have been modified successfully.",
    )
    assert "- [x] Read the spec" in section(text, "Done")
    assert "Read the spec" not in section(text, "In Progress")
    assert "Draft the parser" in section(text, "Next Steps")


def test_work_done_through_other_tools_is_done_with_its_titles() -> None:
    text = summary(
        "[User]: File the two bugs in the tracker.",
        calls(
            call("mcp__tracker__create_issue", title="Crash on empty input", team="core"),
            call("mcp__tracker__create_issue", title="Slow start", team="core"),
            call("mcp__tracker__list_issues", team="core"),
        ),
        '[Tool result]: {"id": "A-1"}',
        '[Tool result]: {"id": "A-2"}',
        "[Tool result]: []",
    )
    done = section(text, "Done")
    assert '- [x] `mcp__tracker__create_issue`: "Crash on empty input"; "Slow start"' in done
    assert "list_issues" not in done  # looking is not doing


def test_a_commit_is_done_with_its_hash_branch_and_subject() -> None:
    text = summary(
        "[User]: Commit it.",
        calls(call("Bash", command='git commit -m "Fix the parser"')),
        "[Tool result]: [main 1a2b3c4] Fix the parser\n 1 file changed, 2 insertions(+)",
    )
    assert "- [x] Committed `1a2b3c4` on `main`: Fix the parser" in section(text, "Done")


def test_a_sub_agents_report_gives_findings() -> None:
    report = (
        "The retry loop lives in `fetchWithRetry()` in `src/net.ts`. "
        "It never resets `attemptCount` after a success."
    )
    text = summary(
        "[User]: Find out why requests stop after a while.",
        calls(call("Task", description="Explore the network code", prompt="Look at retries.")),
        f"[Tool result]: {report}",
        "[Assistant]: The agent found the cause.",
    )
    critical = section(text, "Critical Context")
    assert "It never resets `attemptCount` after a success." in critical


def test_names_left_over_are_told_by_the_file_that_has_them() -> None:
    text = summary(
        "[User]: Check how the totals are rounded.",
        calls(call("Read", file_path="/p/totals.ts")),
        "[Tool result]: const x = computeTotals(rows);\nreturn roundHalfEven(x);",
        "[Assistant]: Let me look at `computeTotals`, `roundHalfEven` and `legacyMode`.",
    )
    critical = section(text, "Critical Context")
    assert "- Other names, by the file that has them:" in critical
    assert "  - `/p/totals.ts`: " in critical
    assert "`legacyMode`" in critical.split("- Other names:")[1]


def test_a_command_is_shown_by_its_first_line_that_runs() -> None:
    assert short_command("# Check the server\ncurl -s localhost:3000 | head -3") == (
        "curl -s localhost:3000"
    )


def test_file_tracking_knows_claude_codes_file_tools_and_keeps_pis_rule() -> None:
    ops = FileOps()
    message = AssistantMessage(
        provider="p",
        model="m",
        usage=TokenUsage(input=0, output=0, cache_read=0, cache_write=0, total_tokens=0),
        stop_reason="toolUse",
        content=[
            ToolCall(id="1", name="Read", arguments={"file_path": "/p/a.py"}),
            ToolCall(id="2", name="Edit", arguments={"file_path": "/p/b.py"}),
            ToolCall(id="3", name="MultiEdit", arguments={"file_path": "/p/c.py"}),
            ToolCall(id="4", name="Write", arguments={"file_path": "/p/d.py"}),
            ToolCall(id="5", name="NotebookEdit", arguments={"notebook_path": "/p/e.ipynb"}),
            ToolCall(id="6", name="read", arguments={"path": "/p/f.py"}),
            # pi's own names take ``path`` only, and Claude Code's names ``file_path`` only.
            ToolCall(id="7", name="read", arguments={"file_path": "/p/g.py"}),
            ToolCall(id="8", name="Read", arguments={"path": "/p/h.py"}),
            ToolCall(id="9", name="Grep", arguments={"path": "/p/i.py"}),
        ],
    )
    ops.add_message(message)
    assert ops.lists() == (
        ["/p/a.py", "/p/f.py"],
        ["/p/b.py", "/p/c.py", "/p/d.py", "/p/e.ipynb"],
    )


def test_a_checks_diagnostic_fails_it_and_a_change_to_the_named_file_clears_it() -> None:
    diagnostic = "src/a.ts(3,5): error TS2322: Type 'boolean' is not assignable to type 'void'."
    failed = summary(
        "[User]: Type-check the project.",
        calls(call("Bash", command="npx tsc | tail -5")),
        f"[Tool result]: {diagnostic}",
    )
    # The pipe hid tsc's exit status; its diagnostic says the check failed.
    assert "`npx tsc` failed: `src/a.ts(3,5): error TS2322:" in section(failed, "Blocked")
    assert "passed" not in section(failed, "Done")
    cleared = summary(
        "[User]: Type-check the project.",
        calls(call("Bash", command="npx tsc | tail -5")),
        f"[Tool result]: {diagnostic}",
        calls(
            call("Edit", file_path="/p/src/a.ts", old_string="=> f(x)", new_string="=> { f(x); }")
        ),
        "[Tool result]: The file /p/src/a.ts has been updated.",
    )
    assert section(cleared, "Blocked").strip() == "- (none)"
    assert "then `/p/src/a.ts` was changed" in section(cleared, "Critical Context")


def test_a_silent_commands_left_out_result_does_not_take_the_next_calls() -> None:
    # The prompt leaves an empty result out: ``mkdir`` printed nothing, so the one result
    # that follows is the write's, which names its file.
    text = summary(
        "[User]: Create the module.",
        calls(
            call("Bash", command="mkdir -p /p/lib"),
            call("Write", file_path="/p/lib/queue.ts", content="export class TaskQueue {}"),
        ),
        "[Tool result]: File created successfully at: /p/lib/queue.ts",
        "[Assistant]: Created the module.",
    )
    done = section(text, "Done")
    assert "- [x] Wrote `/p/lib/queue.ts` (`TaskQueue`)" in done
    assert "- [x] Ran `mkdir -p /p/lib`" in done
