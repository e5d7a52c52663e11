"""The client's types come from protocol/schema.json, and the client stands without the daemon.

``sessiond_client/protocol.py`` is generated (``clients/python/generate_types.py``), as the
TypeScript client's ``src/generated/protocol.ts`` is; these tests fail while it is stale, and
prove that importing and using the client loads nothing of the daemon (``sessiond``).
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import msgspec

from sessiond_client import entries, protocol
from sessiond_client import types as t

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "clients" / "python"
sys.path.insert(0, str(CLIENT))
import generate_types  # noqa: E402


def test_the_generated_module_is_current() -> None:
    current = (CLIENT / "sessiond_client" / "protocol.py").read_text(encoding="utf-8")
    assert current == generate_types.generate(), (
        "sessiond_client/protocol.py is stale: run `python clients/python/generate_types.py`"
    )
    assert generate_types.main(["--check"]) == 0


def test_the_check_fails_once_the_schema_changes(tmp_path: Path) -> None:
    schema = msgspec.json.decode((ROOT / "protocol" / "schema.json").read_bytes())
    schema["$defs"]["AbortResult"]["properties"]["why"] = {"type": "string"}
    changed = tmp_path / "schema.json"
    changed.write_bytes(msgspec.json.encode(schema))
    out = CLIENT / "sessiond_client" / "protocol.py"
    assert generate_types.main(["--check", "--schema", str(changed), "--out", str(out)]) == 1
    written = tmp_path / "protocol.py"
    assert generate_types.main(["--schema", str(changed), "--out", str(written)]) == 0
    assert "    why: str | None = None" in written.read_text(encoding="utf-8")


def test_every_message_of_the_schema_has_its_types() -> None:
    schema = msgspec.json.decode((ROOT / "protocol" / "schema.json").read_bytes())
    for row in schema["messages"]:
        method, direction = row["method"], row["direction"]
        if row["kind"] == "request":
            table = protocol.METHODS if direction == "clientToServer" else protocol.SERVER_REQUESTS
            params, result = table[method]
            assert params.__name__ == row["params"]
            if row["result"] == "NullResult":
                assert result is type(None)
            else:
                assert result.__name__ == row["result"]
        elif direction != "clientToServer":
            assert protocol.NOTIFICATIONS[method].__name__ == row["params"]
    assert schema["protocolVersion"] == protocol.PROTOCOL_VERSION


def test_optional_fields_read_null_and_absent_alike() -> None:
    absent = msgspec.json.decode(b'{"cancelled":false,"leafId":null}', type=t.NavigateResult)
    null = msgspec.json.decode(
        b'{"cancelled":false,"leafId":null,"editorText":null,"summaryEntry":null}',
        type=t.NavigateResult,
    )
    assert absent == null and absent.editor_text is None and absent.aborted is False
    # Fields at their default are not sent.
    assert msgspec.json.encode(t.NewSessionParams(cwd="/p")) == b'{"cwd":"/p"}'


def test_entries_arrive_as_json_and_parse_into_their_types() -> None:
    raw = b'{"entries":[{"type":"label","id":"a","parentId":null,"timestamp":"t","targetId":"b","x":1},{"type":"from_a_newer_pi","id":"c","parentId":"a","timestamp":"t"}],"total":2}'
    result = msgspec.json.decode(raw, type=t.EntriesResult)
    assert result.entries[0]["x"] == 1  # a field the types do not list is kept
    label, newer = (entries.parse_entry(e) for e in result.entries)
    assert isinstance(label, entries.LabelEntry) and label.target_id == "b"
    assert isinstance(newer, entries.UnknownEntry) and newer.parent_id == "a"


_WITHOUT_THE_DAEMON = """
import importlib.abc, sys

class NoDaemon(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "sessiond" or name.startswith("sessiond."):
            raise ImportError(f"the client imported the daemon's {name}")
        return None

sys.meta_path.insert(0, NoDaemon())
import asyncio, msgspec
import sessiond_client
from sessiond_client import SessiondClient, entries, types
from sessiond_client.notifications import decode_notification

note = decode_notification("session/changed", msgspec.Raw(
    b'{"sessionId":"s","reason":"append","leafId":"a","entryCount":1,"appendedIds":["a"]}'))
assert isinstance(note.params, types.SessionChanged), note
message = entries.parse_message({"role": "user", "content": "hi"})
assert isinstance(message, entries.UserMessage), message
print(sorted(m for m in sys.modules if m == "sessiond" or m.startswith("sessiond.")))
"""


def test_the_client_imports_and_works_without_the_daemon() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_THE_DAEMON],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_client_distribution_needs_only_its_own_dependencies() -> None:
    project = tomllib.loads((CLIENT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = {dep.split(">")[0].split("=")[0].strip() for dep in project["dependencies"]}
    assert names == {"msgspec", "platformdirs"}
    imported: set[str] = set()
    for path in (CLIENT / "sessiond_client").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    third_party = imported - set(sys.stdlib_module_names) - {"sessiond_client", "__future__"}
    assert third_party <= names, third_party
