"""protocol/schema.json types every entry and message, and says exactly what session/append takes.

Checked with a stock validator (``jsonschema``, draft 2020-12): real session lines
(the bundled sample, sessions written by pi 0.73.1 itself, generated ones) validate as
stored entries and, without ``id``/``parentId``/``timestamp``, as append items; wrong
entries do not; and for every case here the schema's verdict is the daemon's, over
``session/append`` on a real ``sessiond serve``.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from jsonschema import Draft202012Validator

from sessiond.api import entry_types
from sessiond.core.entries import KnownEntry, MessageEntry
from sessiond.core.messages import (
    AgentMessage,
    AssistantMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
)
from sessiond_testkit.generate_session import generate
from tests.parity.pi_reference import PARITY_DIR, node_executable, unavailable_reason

from .schema_validation import defined, problems, schema, without_assigned
from .wire import Channel, Daemon

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sample-session.jsonl"
PI_TYPES = {
    "message",
    "thinking_level_change",
    "model_change",
    "compaction",
    "branch_summary",
    "custom",
    "custom_message",
    "label",
    "session_info",
}


def _read(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return lines[0], lines[1:]


def _assert_lines_validate(path: Path) -> list[dict[str, Any]]:
    header, entries = _read(path)
    found = [f"header: {p}" for p in problems(header, defined("SessionHeader"))]
    for number, entry in enumerate(entries, start=2):
        what = f"line {number} ({entry.get('type')})"
        found += [f"{what}: {p}" for p in problems(entry, defined("Entry"))]
        found += [
            f"{what} as an append: {p}"
            for p in problems(without_assigned(entry), defined("EntryInput"))
        ]
    assert not found, f"{path.name}:\n" + "\n".join(found)
    return entries


def _kinds(entries: list[dict[str, Any]]) -> tuple[set[str], set[str], set[str]]:
    """Entry types, message roles and content block types present."""
    roles: set[str] = set()
    blocks: set[str] = set()
    for entry in entries:
        message = entry.get("message")
        if entry["type"] == "message" and isinstance(message, dict):
            roles.add(message["role"])
            if isinstance(message.get("content"), list):
                blocks |= {block["type"] for block in message["content"]}
    return {entry["type"] for entry in entries}, roles, blocks


# -- the schema as a document -----------------------------------------------------------------------


def _walk(node: Any, where: str) -> Iterator[tuple[str, Any]]:
    yield where, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _walk(value, f"{where}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _walk(value, f"{where}/{index}")


def test_schema_is_valid_json_schema_and_every_ref_resolves() -> None:
    Draft202012Validator.check_schema(schema())
    refs = {
        node["$ref"] for _, node in _walk(schema(), "") if isinstance(node, dict) and "$ref" in node
    }
    names = {ref.removeprefix("#/$defs/") for ref in refs}
    assert names <= set(schema()["$defs"]), f"unresolved: {sorted(names - set(schema()['$defs']))}"
    assert {"Entry", "AgentMessage", "LlmMessage", "EntryInput", "MessageInput"} <= names


# Fields that are free-form by design: extension data, provider payloads, tool arguments,
# settings objects (typed by the settings table of the README), opaque metadata.
FREE_FORM = {
    "AssistantMessage/providerPayload",
    "AssistantMessageInput/providerPayload",
    "BashExecutionMessage/meta",
    "BranchSummaryEntry/details",
    "BranchSummaryEntryInput/details",
    "CompactionEntry/details",
    "CompactionEntry/preserveData",
    "CompactionEntryInput/details",
    "CompactionEntryInput/preserveData",
    "CompactionResult/details",
    "CompactionResult/preserveData",
    "CompactingHookResult/preserveData",
    "CompactionSummaryMessage/providerPayload",
    "CustomEntry/data",
    "CustomEntryInput/data",
    "CustomMessage/details",
    "CustomMessageEntry/details",
    "CustomMessageEntryInput/details",
    "HookMessage/details",
    "InitializeParams/settings",
    "MentionedFile/image",
    "ModeChangeEntry/data",
    "ModeChangeEntryInput/data",
    "PrepareCompactionParams/settings",
    "PythonExecutionMessage/meta",
    "RunCompactionParams/settings",
    "SessionInitEntry/outputSchema",
    "SessionInitEntryInput/outputSchema",
    "SettingsResult/settings",
    "SuppliedBranchSummary/details",
    "TokenUsage/cttl",
    "TokenUsage/server",
    "ToolCall/arguments",
    "ToolResultMessage/details",
    "UpdateSettingsParams/settings",
    "UserMessage/providerPayload",
    "DeveloperMessage/providerPayload",
    "AssistantMessage/retryRecovery",
    "AssistantMessageInput/retryRecovery",
}


def _untyped(node: Any) -> bool:
    """Says nothing about its value beyond "an object" (or nothing at all)."""
    if not isinstance(node, dict):
        return False
    if "anyOf" in node:
        return any(_untyped(member) for member in node["anyOf"])
    if node.get("type") == "array":
        return _untyped(node.get("items", {}))
    shape_keys = {"$ref", "properties", "additionalProperties", "enum", "const", "anyOf", "oneOf"}
    return node.get("type") in (None, "object") and not shape_keys & node.keys()


def test_only_free_form_fields_are_untyped() -> None:
    """Entries and messages, wherever they travel, are typed; what stays a bare object is
    free-form by design (and listed above)."""
    untyped = {
        f"{name}/{field}"
        for name, definition in schema()["$defs"].items()
        for field, node in definition.get("properties", {}).items()
        if _untyped(node)
    }
    assert untyped - FREE_FORM == set(), "untyped fields that should have a type"
    assert FREE_FORM - untyped == set(), "fields listed as free-form that are typed now"


@pytest.mark.parametrize(
    ("method", "path", "target"),
    [
        ("session/append", "params/entries/items", "EntryInput"),
        ("session/entries", "result/entries/items", "Entry"),
        ("session/path", "result/entries/items", "Entry"),
        ("session/entry", "result/entry", "Entry"),
        ("compaction/run", "result/entry", "CompactionEntry"),
        ("context/build", "result/messages/items", "AgentMessage"),
        ("compaction/prepare", "result/messagesToSummarize/anyOf/0/items", "AgentMessage"),
        ("hooks/session.compacting", "params/messages/items", "AgentMessage"),
        ("hooks/session_before_compact", "params/preparation", "CompactionPreparationWire"),
        ("hooks/session_compact", "params/compactionEntry", "CompactionEntry"),
        ("hooks/session_tree", "params/summaryEntry/anyOf/0", "BranchSummaryEntry"),
        ("tree/navigate", "result/summaryEntry/anyOf/0", "BranchSummaryEntry"),
        ("compaction/ended", "params/result/anyOf/0", "CompactionResult"),
        ("$/progress", "params/value", "WorkDoneProgress"),
    ],
)
def test_entries_and_messages_are_typed_where_they_travel(
    method: str, path: str, target: str
) -> None:
    tables = schema()
    (row,) = [row for row in tables["messages"] if row["method"] == method]
    part, *steps = path.split("/")
    node: Any = defined(row[part])
    for step in steps:
        while "$ref" in node:
            node = tables["$defs"][node["$ref"].removeprefix("#/$defs/")]
        node = (
            node["properties"][step]
            if "properties" in node and step in node["properties"]
            else node
        )
        node = node[int(step)] if isinstance(node, list) else node.get(step, node)
    assert node.get("$ref") == f"#/$defs/{target}", f"{method} {path}: {node}"


# -- real session lines ----------------------------------------------------------------------------


def test_sample_session_validates_as_stored_entries_and_as_appends() -> None:
    entries = _assert_lines_validate(SAMPLE)
    types, roles, blocks = _kinds(entries)
    assert {"message", "compaction", "branch_summary", "label", "session_info"} <= types
    assert {"user", "assistant", "toolResult", "bashExecution"} <= roles
    assert {"text", "thinking", "toolCall"} <= blocks


def test_generated_sessions_validate(tmp_path: Path) -> None:
    for seed in (3, 8):
        path = tmp_path / f"generated-{seed}.jsonl"
        generate(path, 1_500, branchy=True, compactions=True, seed=seed)
        _assert_lines_validate(path)


def test_a_session_written_by_pi_itself_validates(tmp_path: Path) -> None:
    """pi 0.73.1's AgentSession (with pi-ai's scripted faux model) writes every entry type
    pi has; each line validates."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)  # as the parity tests do: node or `npm ci` in tests/parity missing
    path = tmp_path / "pi.jsonl"
    script = PARITY_DIR / "pi_write_session.mjs"
    done = subprocess.run(
        [node_executable(), str(script), str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    entries = _assert_lines_validate(path)
    types, roles, blocks = _kinds(entries)
    assert types == PI_TYPES
    assert roles == {"user", "assistant", "toolResult", "bashExecution"}
    assert blocks == {"text", "thinking", "toolCall", "image"}


def test_a_session_written_by_pi16_validates(tmp_path: Path) -> None:
    """pi 1.6.0's SessionManager writes context edits, usage entries, system messages,
    compaction checkpoints and the rest (tests/parity/pi16); each line validates, as a
    stored entry and as an append."""
    from tests.parity import pi16_reference

    reason = pi16_reference.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    path = tmp_path / "pi16.jsonl"
    pi16_reference.generate(path, seed=9)
    entries = _assert_lines_validate(path)
    types, roles, _ = _kinds(entries)
    assert {"context_edit", "usage", "compaction", "branch_summary"} <= types
    assert "system" in roles
    assert any("systemMessage" in e for e in entries if e["type"] == "compaction")


# -- what session/append takes ---------------------------------------------------------------------

_USAGE = {"input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15}


def _assistant(**changes: Any) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Reading it."},
            {"type": "toolCall", "id": "call-1", "name": "read", "arguments": {"path": "a.md"}},
        ],
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "usage": _USAGE,
        "stopReason": "toolUse",
        "timestamp": 1767225600000,
    }
    message.update(changes)
    return {"type": "message", "message": {k: v for k, v in message.items() if v is not None}}


def _message(**fields: Any) -> dict[str, Any]:
    return {"type": "message", "message": fields}


def _without(body: dict[str, Any], *path: str) -> dict[str, Any]:
    copy = json.loads(json.dumps(body))
    target = copy
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return copy


_TOOL_RESULT = _message(
    role="toolResult",
    toolCallId="call-1",
    toolName="read",
    content=[{"type": "text", "text": "# A"}],
    isError=False,
)
_IMAGE_USER = _message(
    role="user",
    content=[
        {"type": "text", "text": "look"},
        {"type": "image", "data": "iVBORw0=", "mimeType": "image/png"},
    ],
)

# Accepted by both. "<target>" is replaced by the id of an entry already in the session.
RIGHT: dict[str, dict[str, Any]] = {
    "user message without timestamp (sessiond stamps it)": _message(role="user", content="hi"),
    "user message with an image": _IMAGE_USER,
    "assistant message": _assistant(),
    "assistant message with fields sessiond does not know": _assistant(newProviderField={"x": 1}),
    "assistant message with cost and thinking": _assistant(
        content=[{"type": "thinking", "thinking": "hmm", "thinkingSignature": "sig"}],
        usage={
            **_USAGE,
            "cost": {"input": 0.1, "output": 0.2, "cacheRead": 0, "cacheWrite": 0, "total": 0.3},
        },
    ),
    "toolResult message": _TOOL_RESULT,
    "bashExecution without exitCode": _message(
        role="bashExecution", command="ls", output="", cancelled=True, truncated=False
    ),
    "custom message": _message(role="custom", customType="note", content="x", display=False),
    "entry with an unknown extra field": {"type": "custom", "customType": "ext", "futureField": 1},
    "custom_message entry": {
        "type": "custom_message",
        "customType": "n",
        "content": "x",
        "display": True,
    },
    "model_change entry": {"type": "model_change", "provider": "openai", "modelId": "gpt-5"},
    "thinking_level_change entry": {"type": "thinking_level_change", "thinkingLevel": "high"},
    "session_info entry": {"type": "session_info", "name": "a name"},
    "label entry": {"type": "label", "targetId": "<target>", "label": "here"},
    "label entry that clears": {"type": "label", "targetId": "<target>"},
    "compaction entry": {
        "type": "compaction",
        "summary": "## Goal",
        "firstKeptEntryId": "<target>",
        "tokensBefore": 1000,
    },
    "branch_summary entry": {"type": "branch_summary", "fromId": "root", "summary": "## Goal"},
}
# Refused by both.
WRONG: dict[str, dict[str, Any]] = {
    "assistant message without usage": _assistant(usage=None),
    "assistant message without api": _assistant(api=None),
    "assistant message without stopReason": _assistant(stopReason=None),
    "assistant usage without totalTokens": _assistant(
        usage={k: v for k, v in _USAGE.items() if k != "totalTokens"}
    ),
    "assistant usage with a string count": _assistant(usage={**_USAGE, "output": "5"}),
    "toolCall block without id": _assistant(
        content=[{"type": "toolCall", "name": "read", "arguments": {}}]
    ),
    "toolResult without toolCallId": _without(_TOOL_RESULT, "message", "toolCallId"),
    "toolResult without isError": _without(_TOOL_RESULT, "message", "isError"),
    "message of an unknown role": _message(role="wizard", content="hi"),
    "image block without data": _without(_IMAGE_USER, "message", "content", 1, "data"),  # type: ignore[arg-type]
    "image block in an assistant message": _assistant(
        content=[{"type": "image", "data": "iVBORw0=", "mimeType": "image/png"}]
    ),
    "user message without content": _message(role="user"),
    "compactionSummary message": _message(role="compactionSummary", summary="s", tokensBefore=1),
    "branchSummary message": _message(role="branchSummary", summary="s", fromId="root"),
    "message entry without message": {"type": "message"},
    "entry of an unknown type": {"type": "bogus"},
    "entry with an id": {"id": "abcd1234", **_message(role="user", content="hi")},
    "entry with a timestamp": {
        "timestamp": "2026-01-01T00:00:00.000Z",
        **_message(role="user", content="hi"),
    },
    "custom_message without display": {"type": "custom_message", "customType": "n", "content": "x"},
    "label without targetId": {"type": "label", "label": "x"},
    "thinking_level_change without thinkingLevel": {"type": "thinking_level_change"},
    "compaction without tokensBefore": {
        "type": "compaction",
        "summary": "s",
        "firstKeptEntryId": "x",
    },
}


@pytest.mark.parametrize("name", sorted(WRONG))
def test_wrong_entries_do_not_validate(name: str) -> None:
    assert problems(WRONG[name], defined("EntryInput")), f"the schema accepts: {name}"


@pytest.mark.parametrize("name", sorted(RIGHT))
def test_right_entries_validate(name: str) -> None:
    body = json.loads(json.dumps(RIGHT[name]).replace("<target>", "abcd1234"))
    assert problems(body, defined("EntryInput")) == []


class _Session:
    """One session on a real ``sessiond serve --stdio``, appended to one request at a time."""

    def __init__(self, channel: Channel, cwd: Path) -> None:
        self.channel = channel
        self.ids = itertools.count(1)
        self.call("initialize", {"clientInfo": {"name": "schema-test"}})
        self.channel.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        self.session_id = self.call("session/new", {"cwd": str(cwd)})["result"]["sessionId"]

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = next(self.ids)
        self.channel.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        while True:
            message = self.channel.receive(60)
            assert isinstance(message, dict), f"no answer to {method}: {message!r}"
            if message.get("id") == request_id and "method" not in message:
                return message

    def append(self, entry: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
        """(accepted, the answer); an error other than invalidEntry fails the test."""
        answer = self.call("session/append", {"sessionId": self.session_id, "entries": [entry]})
        if "result" in answer:
            return True, answer
        assert answer["error"]["data"]["kind"] == "invalidEntry", answer
        return False, answer


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Session]:
    home = tmp_path_factory.mktemp("schema-daemon")
    daemon = Daemon(home, ["--stdio"])
    try:
        yield _Session(daemon.stdio_channel(), home)
    finally:
        daemon.close()


def test_the_daemon_refuses_exactly_what_the_schema_refuses(session: _Session) -> None:
    accepted, first = session.append(_message(role="user", content="first"))
    assert accepted
    target = first["result"]["ids"][0]
    disagreements = []
    for name, body in sorted({**RIGHT, **WRONG}.items()):
        entry = json.loads(json.dumps(body).replace("<target>", target))
        by_schema = not problems(entry, defined("EntryInput"))
        by_daemon, answer = session.append(entry)
        if by_schema != by_daemon:
            disagreements.append(f"{name}: schema {by_schema}, daemon {by_daemon}: {answer}")
    assert not disagreements, "\n".join(disagreements)


def test_the_daemon_appends_every_line_of_the_sample_session(session: _Session) -> None:
    """The sample's entries, sent as append items, are all accepted (label targets moved
    to the ids the daemon gave the entries they point at)."""
    _, entries = _read(SAMPLE)
    new_ids: dict[str, str] = {}
    for entry in entries:
        body = without_assigned(entry)
        if "targetId" in body:
            body["targetId"] = new_ids[body["targetId"]]
        accepted, answer = session.append(body)
        assert accepted, f"{entry['id']} refused: {answer}"
        new_ids[entry["id"]] = answer["result"]["ids"][0]


# -- the input types follow the file format's --------------------------------------------------------


def _fields(struct: Any) -> dict[str, tuple[Any, Any, Any]]:
    return {f.name: (f.type, f.default, f.default_factory) for f in msgspec.structs.fields(struct)}


def test_each_entry_input_is_its_entry_without_the_assigned_fields() -> None:
    inputs = {t.__struct_config__.tag: t for t in typing.get_args(entry_types.EntryInput)}
    stored = {t.__struct_config__.tag: t for t in typing.get_args(KnownEntry)}
    assert inputs.keys() == stored.keys()
    for tag, entry_type in stored.items():
        expected = {
            k: v for k, v in _fields(entry_type).items() if k not in entry_types.ASSIGNED_FIELDS
        }
        if entry_type is MessageEntry:
            expected["message"] = (entry_types.MessageInput, *expected["message"][1:])
        assert _fields(inputs[tag]) == expected, tag


def test_message_input_is_every_role_but_the_summaries() -> None:
    appendable = set(typing.get_args(AgentMessage)) - {
        CompactionSummaryMessage,
        BranchSummaryMessage,
        AssistantMessage,
    }
    assert set(typing.get_args(entry_types.MessageInput)) == appendable | {
        entry_types.AssistantMessageInput
    }
    strict = _fields(entry_types.AssistantMessageInput)
    assert strict.pop("api")[1] is msgspec.NODEFAULT
    loose = _fields(AssistantMessage)
    loose.pop("api")
    assert strict == loose
