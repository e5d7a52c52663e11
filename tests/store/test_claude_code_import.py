"""Claude Code transcripts read as pi sessions: real recorded ones from the corpus, and
hand-made ones for each rule (parallel calls, redacted ids, sub-agents, local commands,
compactions) and for hostile input."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import pytest

from sessiond.core.context import context_from_path
from sessiond.core.entries import MessageEntry
from sessiond.core.messages import (
    AssistantMessage,
    BashExecutionMessage,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from sessiond.errors import InvalidParamsError, InvalidSessionFileError
from sessiond.store.claude_code import ClaudeCodeReader, summary_body
from sessiond.store.session import SessionStore
from sessiond.store.transcripts import import_claude_code, transcript_lines

CORPUS = Path(__file__).resolve().parents[2] / "bench" / "summaries" / "corpus"
LONG_TURN = CORPUS / "claude-dual" / "84_b2b35255d7_1_full.jsonl.gz"
REQUESTS = CORPUS / "claude-napoli-matcha" / "0c_c3173e5050_0_full.jsonl.gz"


# -- hand-made transcripts


class Transcript:
    """Records as Claude Code writes them, one a line."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.clock = 0

    def _add(self, record: dict[str, Any]) -> None:
        self.clock += 1
        base = {
            "isSidechain": False,
            "cwd": "/home/me/project",
            "sessionId": "s-1",
            "timestamp": f"2026-01-01T10:00:{self.clock:02d}.000Z",
            "uuid": f"u{self.clock}",
        }
        self.records.append({**base, **record})

    def user(self, content: Any, **extra: Any) -> Transcript:
        self._add({"type": "user", "message": {"role": "user", "content": content}, **extra})
        return self

    def assistant(self, message_id: str, *blocks: dict[str, Any], **extra: Any) -> Transcript:
        message = {
            "id": message_id,
            "role": "assistant",
            "model": "claude-test",
            "content": list(blocks),
            "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 100},
        }
        self._add({"type": "assistant", "message": message, **extra})
        return self

    def result(self, call_id: str, text: str, *, error: bool = False) -> Transcript:
        block = {"type": "tool_result", "tool_use_id": call_id, "content": text}
        if error:
            block["is_error"] = True
        return self.user([block])

    def compaction(self, summary: str, tokens: int = 1234) -> Transcript:
        self._add(
            {
                "type": "system",
                "subtype": "compact_boundary",
                "parentUuid": None,
                "compactMetadata": {"trigger": "auto", "preTokens": tokens},
            }
        )
        return self.user(summary, isCompactSummary=True)

    def write(self, path: Path, *, compress: bool = False) -> Path:
        data = "".join(json.dumps(record) + "\n" for record in self.records).encode()
        path.write_bytes(gzip.compress(data) if compress else data)
        return path


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def messages(path: Path) -> list[Any]:
    entries = list(ClaudeCodeReader().entries(transcript_lines(path)))
    return [e.message if isinstance(e, MessageEntry) else e for e in entries]


def test_one_answer_is_one_message_with_its_results_in_call_order(tmp_path: Path) -> None:
    # Claude Code writes a record per content block, and parallel results between them,
    # in the order the tools finished.
    path = (
        Transcript()
        .user("Read both files.")
        .assistant("m1", {"type": "thinking", "thinking": "Two reads.", "signature": "sig"})
        .assistant("m1", text("Reading them."))
        .assistant("m1", call("t1", "Read", file_path="/a.py"))
        .assistant("m1", call("t2", "Read", file_path="/b.py"))
        .result("t2", "b contents")
        .result("t1", "a contents")
        .assistant("m2", text("Both read."))
        .write(tmp_path / "t.jsonl")
    )
    user, answer, first, second, final = messages(path)
    assert isinstance(user, UserMessage) and user.content == "Read both files."
    assert isinstance(answer, AssistantMessage)
    assert [type(b) for b in answer.content] == [
        ThinkingContent,
        type(answer.content[1]),
        ToolCall,
        ToolCall,
    ]
    thinking = answer.content[0]
    assert isinstance(thinking, ThinkingContent)
    assert thinking.thinking == "Two reads." and thinking.thinking_signature == "sig"
    assert answer.stop_reason == "toolUse" and answer.provider == "anthropic"
    assert answer.usage.cache_read == 100 and answer.usage.total_tokens == 115
    assert isinstance(first, ToolResultMessage) and isinstance(second, ToolResultMessage)
    assert (first.tool_call_id, first.tool_name, first.content[0].text) == (
        "t1",
        "Read",
        "a contents",
    )  # type: ignore[union-attr]
    assert (second.tool_call_id, second.content[0].text) == ("t2", "b contents")  # type: ignore[union-attr]
    assert isinstance(final, AssistantMessage) and final.stop_reason == "stop"


def test_redacted_ids_are_paired_by_order_and_made_distinct(tmp_path: Path) -> None:
    path = (
        Transcript()
        .user("Run two commands.")
        .assistant("m1", call("REDACTED", "Bash", command="ls"))
        .assistant("m1", call("REDACTED", "Bash", command="pwd"))
        .result("REDACTED", "listing")
        .result("REDACTED", "/home/me", error=True)
        .write(tmp_path / "t.jsonl")
    )
    _user, answer, first, second = messages(path)
    assert isinstance(answer, AssistantMessage)
    ids = [b.id for b in answer.content if isinstance(b, ToolCall)]
    assert ids == ["REDACTED", "REDACTED-2"]
    assert isinstance(first, ToolResultMessage) and isinstance(second, ToolResultMessage)
    assert (first.tool_call_id, first.is_error) == ("REDACTED", False)
    assert (second.tool_call_id, second.is_error) == ("REDACTED-2", True)


def test_a_result_whose_id_matches_no_call_takes_the_oldest_unanswered(tmp_path: Path) -> None:
    path = (
        Transcript()
        .user("Go.")
        .assistant("m1", call("t1", "Bash", command="a"), call("t2", "Bash", command="b"))
        .result("x9", "first out")
        .result("t2", "second out")
        .write(tmp_path / "t.jsonl")
    )
    reader = ClaudeCodeReader()
    entries = list(reader.entries(transcript_lines(path)))
    results = [e.message for e in entries if isinstance(e, MessageEntry)][2:]
    assert [(r.tool_call_id, r.content[0].text) for r in results] == [
        ("t1", "first out"),
        ("t2", "second out"),
    ]
    assert reader.stats.paired_by_order == 1 and reader.stats.unpaired_results == 0


def test_sub_agents_and_terminal_only_records_are_left_out(tmp_path: Path) -> None:
    path = (
        Transcript()
        .user("<local-command-caveat>Caveat: the messages below ...</local-command-caveat>")
        .user(
            "<command-name>/context</command-name>\n<command-message>context</command-message>"
            "\n<command-args></command-args>"
        )
        .user("<local-command-stdout>## Context Usage</local-command-stdout>")
        .user("Sub-agent prompt", isSidechain=True)
        .assistant("s1", text("sub-agent answer"), isSidechain=True)
        .user(
            "<command-message>plan</command-message>\n<command-name>/plan</command-name>\n"
            "<command-args>@docs/plan.md</command-args>"
        )
        .user([text("# Plan\n\nYou are tasked with planning.")], isMeta=True)
        .user("<bash-input>git status</bash-input>")
        .user("<bash-stdout>clean</bash-stdout><bash-stderr></bash-stderr>")
        .write(tmp_path / "t.jsonl")
    )
    reader = ClaudeCodeReader()
    entries = list(reader.entries(transcript_lines(path)))
    found = [e.message for e in entries if isinstance(e, MessageEntry)]
    # The typed commands and the prompt one expanded to are one message, as the model got it.
    assert isinstance(found[0], UserMessage)
    assert (
        found[0].content
        == "/context\n\n/plan @docs/plan.md\n\n# Plan\n\nYou are tasked with planning."
    )
    shell = found[1]
    assert isinstance(shell, BashExecutionMessage)
    assert (shell.command, shell.output) == ("git status", "clean")
    assert len(found) == 2
    assert reader.stats.sidechain_records == 2


def test_a_compaction_keeps_the_models_summary_and_nothing_before_it(tmp_path: Path) -> None:
    summary = (
        "This session is being continued from a previous conversation that ran out of "
        "context. The summary below covers the earlier portion of the conversation.\n\n"
        "Analysis:\nThe user asked for X.\n\nSummary:\n1. Primary Request: X\n\n"
        "If you need specific details from before compaction (like exact code snippets), "
        "read the full transcript at: /home/me/.claude/x.jsonl\nPlease continue the "
        "conversation from where we left off without asking the user any further questions."
    )
    path = (
        Transcript()
        .user("Do X.")
        .assistant("m1", text("Working on X."))
        .compaction(summary, tokens=150000)
        .user("Carry on.")
        .write(tmp_path / "t.jsonl")
    )
    target = tmp_path / "s.jsonl"
    stats = import_claude_code(path, target)
    assert (stats.messages, stats.compactions) == (3, 1)
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert lines[0]["type"] == "session" and lines[0]["version"] == 3
    assert lines[0]["cwd"] == "/home/me/project"
    compaction = next(line for line in lines if line["type"] == "compaction")
    assert (
        compaction["summary"]
        == "Analysis:\nThe user asked for X.\n\nSummary:\n1. Primary Request: X"
    )
    assert compaction["tokensBefore"] == 150000 and compaction["fromHook"] is False
    assert compaction["firstKeptEntryId"] == compaction["id"]
    # Every entry hangs from the one before it.
    ids = [line["id"] for line in lines[1:]]
    assert [line["parentId"] for line in lines[1:]] == [None, *ids[:-1]]
    assert len(set(ids)) == len(ids)
    # The context at the leaf is the summary and what came after, as Claude Code had it.
    from sessiond.core.decode import decode_entry

    decoded = [decode_entry(line.encode()) for line in target.read_text().splitlines()[1:]]
    context = context_from_path(decoded).messages
    assert [type(m).__name__ for m in context] == ["CompactionSummaryMessage", "UserMessage"]


def test_summary_body_leaves_a_text_without_the_fixed_sentences_as_it_is() -> None:
    assert summary_body("  Analysis:\nplain  ") == "Analysis:\nplain"


# -- real transcripts


def test_a_real_long_single_turn_transcript(tmp_path: Path) -> None:
    target = tmp_path / "dual.jsonl"
    stats = import_claude_code(LONG_TURN, target)
    assert stats.compactions == 1 and stats.tool_calls > 90 and stats.unpaired_results == 0
    with SessionStore.open(target, readonly=True) as store:
        records = list(store.records())
        assert len(records) == stats.messages + stats.compactions
    lines = [json.loads(line) for line in target.read_text().splitlines()[1:]]
    roles = [line["message"]["role"] for line in lines if line["type"] == "message"]
    # Every tool result follows the assistant message holding its call.
    calls: set[str] = set()
    for line in lines:
        if line["type"] != "message":
            continue
        message = line["message"]
        if message["role"] == "assistant":
            calls = {b["id"] for b in message["content"] if b["type"] == "toolCall"}
        elif message["role"] == "toolResult":
            assert message["toolCallId"] in calls
    assert roles[0] == "user"
    # Every call has its result, but for the one the compaction interrupted.
    before_compaction = next(i for i, line in enumerate(lines) if line["type"] == "compaction")
    last_answer = lines[before_compaction - 1]["message"]
    assert last_answer["role"] == "assistant" and last_answer["stopReason"] == "toolUse"
    assert roles.count("toolResult") == stats.tool_calls - 1
    first = lines[0]["message"]["content"]
    assert first.startswith("/implement_plan @thoughts/shared/plans/")
    assert "# Implement Plan" in first  # the command and what it expanded to: one message
    thinking = [
        b
        for line in lines
        if line["type"] == "message"
        for b in line["message"]["content"]
        if isinstance(b, dict) and b.get("type") == "thinking"
    ]
    assert thinking and all(b["thinkingSignature"] for b in thinking)
    compaction = next(line for line in lines if line["type"] == "compaction")
    assert compaction["summary"].startswith("Analysis:")
    assert "ran out of context" not in compaction["summary"][:200]
    assert "Please continue the conversation" not in compaction["summary"]


def test_a_real_transcript_opens_in_pi_as_sessiond_reads_it(tmp_path: Path) -> None:
    """pi 0.73.1 loads the imported file without rewriting it and builds the same context."""
    from tests.parity.pi_reference import PiReferenceUnavailable, run_pi_reference

    target = tmp_path / "requests.jsonl"
    import_claude_code(REQUESTS, target)
    try:
        reference = run_pi_reference(target, include_messages=False)
    except PiReferenceUnavailable as exc:
        pytest.skip(str(exc))
    assert reference["file"]["rewritten"] is False
    with SessionStore.open(target, readonly=True) as store:
        ids = [record.id for record in store.records()]
        context = store.leaf_view.context()
        assert reference["entryCount"] == len(ids)
        assert reference["leafId"] == ids[-1]
        assert reference["contexts"][0]["messageCount"] == len(context.messages)
        assert [m["entryId"] for m in reference["contexts"][0]["messages"]] == context.entry_ids


def test_the_gzip_and_plain_forms_give_the_same_session(tmp_path: Path) -> None:
    transcript = Transcript().user("Hello there.").assistant("m1", text("Hi."))
    plain = transcript.write(tmp_path / "t.jsonl")
    packed = transcript.write(tmp_path / "t.jsonl.gz", compress=True)
    assert messages(plain) == messages(packed)


# -- hostile input


def test_a_line_that_is_not_json_is_named(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"type": "user", "message": {"role": "user", "content": "hi"}}\n{oops\n')
    with pytest.raises(InvalidSessionFileError, match="line 2 of the transcript: not JSON"):
        messages(path)


def test_a_message_of_the_wrong_shape_is_named(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"type": "assistant", "message": {"content": 5}}\n')
    with pytest.raises(InvalidSessionFileError, match="line 1 .*message is not readable"):
        messages(path)


def test_nesting_too_deep_is_refused_not_recursed(tmp_path: Path) -> None:
    deep: Any = "x"
    for _ in range(200):
        deep = {"a": deep}
    path = (
        Transcript()
        .user("Go.")
        .assistant("m1", call("t1", "Tool", arg=deep))
        .write(tmp_path / "t.jsonl")
    )
    with pytest.raises(InvalidSessionFileError, match="nested deeper than 64"):
        messages(path)
    path.write_text("[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(InvalidSessionFileError, match="line 1"):
        messages(path)


def test_long_lines_and_unpacked_size_are_bounded(tmp_path: Path) -> None:
    path = Transcript().user("x" * 5000).write(tmp_path / "t.jsonl")
    with pytest.raises(InvalidSessionFileError, match="line 1 is longer than 1 KiB"):
        list(transcript_lines(path, max_line_bytes=1024))
    # A small gzip file that unpacks to much more stops at the limit, not at the end.
    bomb = tmp_path / "bomb.jsonl.gz"
    bomb.write_bytes(gzip.compress(b"\n".join([b'{"type":"progress"}'] * 200_000)))
    assert bomb.stat().st_size < 20_000
    with pytest.raises(InvalidSessionFileError, match="longer than 1 MiB"):
        list(transcript_lines(bomb, max_total_bytes=2**20))


def test_a_damaged_gzip_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl.gz"
    packed = gzip.compress(b"".join(b'{"n": %d}\n' % i for i in range(5000)))
    path.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(InvalidSessionFileError, match="gzip data is damaged"):
        list(transcript_lines(path))


def test_files_that_are_not_regular_files_are_refused(tmp_path: Path) -> None:
    real = Transcript().user("Hello there.").write(tmp_path / "t.jsonl")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    with pytest.raises(InvalidSessionFileError, match="symbolic link"):
        list(transcript_lines(link))
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(InvalidSessionFileError, match="FIFO"):
        list(transcript_lines(fifo))
    with pytest.raises(InvalidSessionFileError, match="no such transcript"):
        list(transcript_lines(tmp_path / "missing.jsonl"))


def test_the_output_is_not_replaced_unless_asked_and_nothing_is_left_on_failure(
    tmp_path: Path,
) -> None:
    source = Transcript().user("Hello there.").write(tmp_path / "t.jsonl")
    target = tmp_path / "s.jsonl"
    target.write_text("mine\n")
    with pytest.raises(InvalidParamsError, match="exists"):
        import_claude_code(source, target)
    assert target.read_text() == "mine\n"
    import_claude_code(source, target, overwrite=True)
    assert target.read_text().startswith('{"type":"session"')
    assert oct(target.stat().st_mode & 0o777) == "0o600"
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"type":"user","message":{"role":"user","content":"hi"}}\nnot json\n')
    with pytest.raises(InvalidSessionFileError):
        import_claude_code(broken, tmp_path / "out.jsonl")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["t.jsonl", "s.jsonl", "broken.jsonl"]
    )


def test_a_transcript_without_a_conversation_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"type":"progress"}\n{"type":"file-history-snapshot"}\n')
    with pytest.raises(InvalidSessionFileError, match="no conversation found"):
        import_claude_code(path, tmp_path / "out.jsonl")
