"""The offline CLI, run as a user runs it: a subprocess on real files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sessiond.store.session import SessionStore

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sample-session.jsonl"


def sessiond(
    *args: str, env: dict[str, str], check: bool = True
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "sessiond", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    if check and result.returncode != 0:
        raise AssertionError(f"sessiond {' '.join(args)} failed:\n{result.stderr}")
    return result


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    return {
        **os.environ,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
    }


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    copy = tmp_path / "sample.jsonl"
    shutil.copy(SAMPLE, copy)
    return copy


def test_context_json_matches_the_store(sample: Path, env):
    data = json.loads(sessiond("context", str(sample), "--json", env=env).stdout)
    with SessionStore.open(sample, readonly=True) as store:
        context = store.build_context()
        assert data["thinkingLevel"] == context.thinking_level
        assert data["model"] == {
            "provider": context.model.provider,
            "modelId": context.model.model_id,
        }
        assert len(data["messages"]) == len(context.messages)
    assert data["messages"][0]["role"] == "compactionSummary"
    llm = json.loads(sessiond("context", str(sample), "--json", "--llm", env=env).stdout)
    assert {m["role"] for m in llm["messages"]} <= {"user", "assistant", "toolResult"}
    assert "<summary>" in llm["messages"][0]["content"][0]["text"]


def test_context_at_another_leaf_and_unknown_leaf(sample: Path, env):
    with SessionStore.open(sample, readonly=True) as store:
        first_user = next(r.id for r in store.records() if r.role == "user")
    text = sessiond("context", str(sample), "--leaf", first_user, env=env).stdout
    assert text.startswith("1 messages") and "[0] user:" in text
    failed = sessiond("context", str(sample), "--leaf", "nope", env=env, check=False)
    assert (
        failed.returncode == 1 and failed.stderr.strip() == "sessiond: error: Entry nope not found"
    )
    assert "Traceback" not in failed.stderr


def test_tree_picture_and_json(sample: Path, env):
    picture = sessiond("tree", str(sample), env=env).stdout
    assert "<- leaf" in picture and "\u251c\u2500" in picture and "compaction (" in picture
    assert "[fence fix" in picture  # a label
    data = json.loads(sessiond("tree", str(sample), "--json", env=env).stdout)
    with SessionStore.open(sample, readonly=True) as store:
        assert len(data["nodes"]) == store.entry_count and data["leafId"] == store.leaf_id
        labelled = [n for n in data["nodes"] if n.get("label")]
        assert labelled and all(n["labelTimestamp"] for n in labelled)
        node = next(n for n in data["nodes"] if len(n["children"]) > 1)
        assert [c.id for c in store.children_records(node["id"])] == node["children"] or sorted(
            node["children"]
        ) == sorted(c.id for c in store.children_records(node["id"]))


def test_info_reports_counts_usage_and_recovery(sample: Path, env):
    with open(sample, "ab") as handle:
        handle.write(b'{"type":"message","id":"torn"')
    text = sessiond("info", str(sample), "--context-window", "8000", env=env).stdout
    assert "Name      mdtoc: code fences, anchors" in text
    assert "Branches  3 leaves" in text
    assert "compaction due" in text  # about 7k tokens of an 8k window
    assert "torn last line" in text and "not repaired (read-only)" in text
    assert sample.read_bytes().endswith(b'"id":"torn"')  # info never changes the file


def test_compact_dry_run_json_and_run(sample: Path, env):
    before = sample.read_bytes()
    plan = json.loads(
        sessiond(
            "compact",
            str(sample),
            "--dry-run",
            "--json",
            "--set",
            "compaction.keepRecentTokens=1500",
            env=env,
        ).stdout
    )
    assert set(plan) == {
        "firstKeptEntryId",
        "isSplitTurn",
        "tokensBefore",
        "previousSummary",
        "summarizeEntryIds",
        "turnPrefixEntryIds",
        "readFiles",
        "modifiedFiles",
    }
    assert plan["previousSummary"].startswith("## Goal") and sample.read_bytes() == before
    entry = json.loads(
        sessiond(
            "compact",
            str(sample),
            "--json",
            "--instructions",
            "slugs",
            "--set",
            "compaction.keepRecentTokens=1500",
            env=env,
        ).stdout
    )
    assert entry["type"] == "compaction" and entry["firstKeptEntryId"] == plan["firstKeptEntryId"]
    assert entry["details"]["summarizer"]["extractive"] is True
    again = sessiond("compact", str(sample), env=env, check=False)
    assert again.returncode == 1 and again.stderr.strip() == "sessiond: error: Already compacted"


def test_compact_refused_while_another_process_holds_the_session(sample: Path, env):
    with SessionStore.open(sample):
        result = sessiond("compact", str(sample), env=env, check=False)
    assert result.returncode == 1 and "is open in sessiond" in result.stderr


def test_bad_settings_are_errors_on_the_command_line(sample: Path, env):
    result = sessiond(
        "compact",
        str(sample),
        "--dry-run",
        "--set",
        "compaction.keepRecentTokens=lots",
        env=env,
        check=False,
    )
    assert result.returncode == 1 and "compaction.keepRecentTokens" in result.stderr


def test_a_settings_file_that_is_not_there_is_named(sample: Path, env, tmp_path: Path):
    missing = tmp_path / "typo.json"
    result = sessiond("info", str(sample), "--settings", str(missing), env=env)
    assert f"sessiond: warning: {missing}: no such settings file" in result.stderr
    assert "Entries" in result.stdout


def test_branch_plan_and_navigate(sample: Path, env):
    with SessionStore.open(sample, readonly=True) as store:
        users = [r.id for r in store.path_records() if r.role == "user"]
        target = users[1]
    plan = json.loads(sessiond("branch-plan", str(sample), target, env=env).stdout)
    assert plan["editorText"] and plan["commonAncestorId"] == target
    with SessionStore.open(sample, readonly=True) as store:
        assert plan["newLeafId"] == store.get_entry(target).parent_id
    moved = sessiond("navigate", str(sample), target, env=env).stdout
    assert "nothing written" in moved
    result = json.loads(
        sessiond("navigate", str(sample), target, "--summarize", "--json", env=env).stdout
    )
    summary = result["summaryEntry"]
    assert summary["type"] == "branch_summary" and summary["parentId"] == plan["newLeafId"]
    assert result["editorText"] == plan["editorText"]
    with SessionStore.open(sample, readonly=True) as store:
        assert store.leaf_id == summary["id"]


def test_schema_check(tmp_path: Path, env):
    current = ROOT / "protocol" / "schema.json"
    assert sessiond("schema", "--check", str(current), env=env, check=False).returncode == 0
    stale = tmp_path / "schema.json"
    stale.write_text("{}")
    result = sessiond("schema", "--check", str(stale), env=env, check=False)
    assert result.returncode == 1 and "stale" in result.stderr


def test_not_a_session_file(tmp_path: Path, env):
    bogus = tmp_path / "notes.jsonl"
    bogus.write_text("hello\n")
    result = sessiond("tree", str(bogus), env=env, check=False)
    assert (
        result.returncode == 1
        and "not a session file" in result.stderr
        and "Traceback" not in result.stderr
    )


def test_read_only_commands_use_and_leave_the_persistent_index(sample: Path, env):
    """The command line's read-only commands write the index (atomically, in the cache
    directory) and read it the next time; the session file is never written."""
    import time

    from sessiond.store import index_file

    time.sleep(0.05)  # the copy's last change a timestamp tick before the first index
    before = (sample.read_bytes(), sample.stat().st_mtime_ns)
    first = sessiond("context", str(sample), "--json", env=env).stdout
    index_dir = Path(env["XDG_CACHE_HOME"]) / "sessiond" / "index"
    index = index_file.index_path_for(sample, index_dir)
    assert index.is_file()
    written = index.stat().st_mtime_ns
    again = sessiond("context", str(sample), "--json", env=env).stdout
    assert again == first
    assert index.stat().st_mtime_ns == written  # read, not rewritten: nothing was appended
    assert (sample.read_bytes(), sample.stat().st_mtime_ns) == before


def test_import_a_claude_code_transcript_then_compact_it_offline(tmp_path: Path, env):
    transcript = (
        ROOT
        / "bench"
        / "summaries"
        / "corpus"
        / "claude-napoli-matcha"
        / "0c_c3173e5050_0_full.jsonl.gz"
    )
    target = tmp_path / "imported.jsonl"
    result = sessiond("import", "claude-code", str(transcript), "-o", str(target), env=env)
    assert result.stdout.startswith(f"Wrote {target}: ")
    assert "(38 tool calls, 1 compaction)" in result.stdout.splitlines()[0]
    info = sessiond("info", str(target), env=env).stdout
    assert "compaction 1" in info and "Recovery  clean" in info
    # Again without --force: refused, and the file is left as it was.
    before = target.read_bytes()
    again = sessiond(
        "import", "claude-code", str(transcript), "-o", str(target), env=env, check=False
    )
    assert again.returncode == 1 and again.stderr.startswith("sessiond: error: ")
    assert "exists" in again.stderr and target.read_bytes() == before
    # The imported session compacts like any other (the offline summarizer, no model).
    compacted = sessiond(
        "compact", str(target), "--set", "compaction.keepRecentTokens=2000", env=env
    ).stdout
    assert compacted.startswith("Compacted: entry ")
    assert "Offline extractive summary" in compacted
    # Claude Code's file tools (``Edit`` with a ``file_path``) fill the tags.
    changed = "/Users/ob1/projects/opus-hackathon/napoli-matcha/CLAUDE.md"
    entry = json.loads(target.read_text().splitlines()[-1])
    assert entry["type"] == "compaction"
    assert entry["details"]["modifiedFiles"] == [changed]
    assert entry["summary"].endswith(f"<modified-files>\n{changed}\n</modified-files>")


def test_import_refuses_what_is_not_a_transcript(tmp_path: Path, env):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type":"user","message":{"role":"user","content":"hi"}}\n{oops\n')
    result = sessiond(
        "import", "claude-code", str(bad), "-o", str(tmp_path / "o.jsonl"), env=env, check=False
    )
    assert result.returncode == 1
    assert result.stderr.strip() == "sessiond: error: line 2 of the transcript: not JSON"
    assert not (tmp_path / "o.jsonl").exists()
    usage = sessiond("import", "codex", str(bad), env=env, check=False)
    assert usage.returncode == 2


_LOADED = """
import sys
from sessiond.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(" ".join(sorted(sys.modules)))
"""


def _modules_loaded(*args: str, env: dict[str, str]) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", _LOADED, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    return set(done.stdout.split())


@pytest.mark.parametrize("args", [["--version"], ["--help"], []])
def test_the_version_and_the_help_load_no_command(args: list[str], env: dict[str, str]) -> None:
    loaded = _modules_loaded(*args, env=env)
    ours = {name for name in loaded if name.split(".")[0] == "sessiond"}
    assert ours == {
        "sessiond",
        "sessiond._version",
        "sessiond.errors",
        "sessiond.cli",
        "sessiond.cli.main",
        "sessiond.cli.parser",
    }
    assert "msgspec" not in loaded and "asyncio" not in loaded


@pytest.mark.parametrize("command", ["context", "tree", "info"])
def test_a_command_on_a_file_loads_no_daemon(command: str, env: dict[str, str]) -> None:
    """Reading a session from the command line loads the store, not the daemon: no event
    loop, no TLS, no other command's module."""
    loaded = _modules_loaded(command, str(SAMPLE), env=env)
    assert "sessiond.store.session" in loaded
    assert not {"asyncio", "ssl"} & loaded
    assert [name for name in loaded if name.endswith("_cmd")] == [f"sessiond.cli.{command}_cmd"]
