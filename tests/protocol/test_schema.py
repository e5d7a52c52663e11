"""protocol/schema.json and protocol/README.md cannot drift from the code.

The schema is generated (``sessiond schema --output protocol/schema.json``); the
README is written by hand, so these tests check that every method the router
serves, every notification and every server-to-client request is documented in
it, and that every error code and ``data.kind`` of ``sessiond.errors`` is in its
error table.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import msgspec

from sessiond.api.app import build_daemon
from sessiond.api.daemon import Daemon
from sessiond.api.lifecycle_methods import HOOK_NAMES, NOTIFICATIONS
from sessiond.api.schema import schema_json
from sessiond.api.types import PROTOCOL_VERSION
from sessiond.errors import SessiondError
from sessiond.settings import Settings, settings_to_builtins

PROTOCOL = Path(__file__).resolve().parents[2] / "protocol"
README = PROTOCOL / "README.md"


def _router_methods() -> set[str]:
    return set(build_daemon(Daemon(Settings(), [])).router.requests)


def _readme() -> str:
    return README.read_text(encoding="utf-8")


def _section(title: str) -> str:
    """The text of the README section whose heading is ``title`` (up to the next one)."""
    text = _readme()
    match = re.search(rf"^(#+) {re.escape(title)}\s*$", text, re.MULTILINE)
    assert match is not None, f"README.md has no section {title!r}"
    level = len(match.group(1))
    rest = text[match.end() :]
    end = re.search(rf"^#{{1,{level}}} ", rest, re.MULTILINE)
    return rest[: end.start()] if end else rest


def _table_names(section: str) -> set[str]:
    """The backquoted names in the first column of the Markdown tables of ``section``."""
    return set(re.findall(r"^\|\s*`([^`]+)`", section, re.MULTILINE))


def test_schema_file_is_current() -> None:
    committed = (PROTOCOL / "schema.json").read_bytes()
    assert committed == schema_json(), (
        "protocol/schema.json is stale: run `.venv/bin/sessiond schema --output "
        "protocol/schema.json`"
    )


def _rows(schema: dict[str, object], kind: str, *directions: str) -> set[str]:
    return {
        row["method"]
        for row in schema["messages"]  # type: ignore[attr-defined]
        if row["kind"] == kind and row["direction"] in directions
    }


def test_schema_lists_every_method_of_the_router() -> None:
    schema = json.loads(schema_json())
    assert _rows(schema, "request", "clientToServer") == _router_methods()
    assert schema["protocolVersion"] == PROTOCOL_VERSION


def test_the_message_table_names_a_type_for_every_params_and_result() -> None:
    """Every message has a named params type (only `exit` has no params) and every request
    a named result type; each names a definition, and the root lists every definition."""
    schema = json.loads(schema_json())
    defs = schema["$defs"]
    for row in schema["messages"]:
        assert row["kind"] in ("request", "notification"), row
        assert row["direction"] in ("clientToServer", "serverToClient", "both"), row
        if row["method"] != "exit":
            assert row["params"] in defs, row
        if row["kind"] == "request":
            assert row["result"] in defs, row
        else:
            assert "result" not in row, row
    assert set(schema["properties"]) == set(defs)
    both = {row["method"] for row in schema["messages"] if row["direction"] == "both"}
    assert both == {"$/cancelRequest"}
    assert {"initialized", "exit"} <= _rows(schema, "notification", "clientToServer")


def test_readme_method_list_matches_the_router() -> None:
    documented = _table_names(_section("Method list"))
    methods = _router_methods()
    assert not methods - documented, f"methods missing from README: {sorted(methods - documented)}"
    assert not documented - methods, f"README lists unknown methods: {sorted(documented - methods)}"


def test_every_method_has_its_own_section() -> None:
    text = _readme()
    for method in _router_methods():
        assert re.search(rf"^#+ `{re.escape(method)}`", text, re.MULTILINE), (
            f"README.md has no section for {method}"
        )


def test_readme_documents_every_notification_and_server_request() -> None:
    text = _readme()
    schema = json.loads(schema_json())
    names = set(NOTIFICATIONS) | {
        row["method"] for row in schema["messages"] if row["direction"] != "clientToServer"
    }
    names |= {f"hooks/{hook}" for hook in HOOK_NAMES}
    for name in names:
        assert re.search(rf"^#+ `{re.escape(name)}`", text, re.MULTILINE), (
            f"README.md has no section for {name}"
        )


def _error_classes() -> list[type[SessiondError]]:
    found: list[type[SessiondError]] = [SessiondError]
    stack = [SessiondError]
    while stack:
        for sub in stack.pop().__subclasses__():
            found.append(sub)
            stack.append(sub)
    return found


def test_readme_error_table_has_every_code_and_kind() -> None:
    table = _section("Error codes")
    rows = re.findall(r"^\|\s*(-?\d+)\s*\|\s*`([^`]+)`", table, re.MULTILINE)
    documented = {(int(code), kind) for code, kind in rows}
    for cls in _error_classes():
        assert (cls.code, cls.kind) in documented, f"{cls.code} {cls.kind} is not in the table"


def test_readme_settings_table_has_every_setting_with_its_default() -> None:
    table = _section("Every setting")
    rows = dict(re.findall(r"^\|\s*`([^`]+)`\s*\|\s*`([^`]*)`", table, re.MULTILINE))
    defaults = settings_to_builtins(Settings())
    for group, values in defaults.items():
        for key, value in values.items():
            name = f"{group}.{key}"
            assert name in rows, f"setting {name} is not documented"
            assert json.loads(rows[name]) == value, (
                f"{name}: README says {rows[name]}, the default is {json.dumps(value)}"
            )


# -- what the daemon sends, found in its code --------------------------------------------------------

DAEMON_SOURCE = Path(__file__).resolve().parents[2] / "daemon" / "sessiond"


def _string_constants(tree: ast.Module) -> dict[str, str]:
    """Module-level ``NAME = "text"`` assignments (``CANCEL_REQUEST = "$/cancelRequest"``)."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name) and isinstance(node.value.value, str):
                    found[target.id] = node.value.value
    return found


def _registers(receiver: str) -> bool:
    """A ``request`` call that registers a method (a router's, a module's method table)."""
    return receiver.endswith("router") or receiver == "METHODS"


def _sent_by_the_daemon() -> tuple[set[str], set[str]]:
    """Notification and server-request methods the daemon's code sends: the literal method
    of every ``notify``/``publish``/``request`` call (not the method registrations),
    and ``hooks/<hook>`` for every hook it asks (``_ask(client, "<hook>", ...)``)."""
    notifications: set[str] = set()
    requests: set[str] = set()
    trees = [ast.parse(p.read_text(encoding="utf-8")) for p in DAEMON_SOURCE.rglob("*.py")]
    # Constants by name across the daemon (CANCEL_REQUEST is imported where it is sent).
    constants = {name: text for tree in trees for name, text in _string_constants(tree).items()}
    for tree in trees:
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            receiver = ast.unparse(node.func.value)
            literals = [
                arg.value if isinstance(arg, ast.Constant) else constants.get(arg.id)
                for arg in node.args
                if isinstance(arg, ast.Constant | ast.Name)
            ]
            literals = [text for text in literals if isinstance(text, str)]
            if node.func.attr in ("notify", "publish") and literals:
                notifications.add(literals[0])
            elif node.func.attr == "request" and literals and not _registers(receiver):
                requests.add(literals[0])
            elif node.func.attr == "_ask" and literals:
                requests.add(f"hooks/{literals[0]}")
    return notifications, requests


def test_schema_lists_exactly_what_the_daemon_sends() -> None:
    schema = json.loads(schema_json())
    notifications, requests = _sent_by_the_daemon()
    assert notifications == _rows(schema, "notification", "serverToClient", "both")
    assert requests == _rows(schema, "request", "serverToClient")
    # The scan sees the sends it must (a broken scan would find nothing to compare).
    assert {"session/changed", "$/progress", "hooks/session_tree"} <= notifications
    assert {"llm/complete", "hooks/session.compacting"} <= requests
    assert _rows(schema, "notification", "serverToClient") >= set(NOTIFICATIONS)


def test_the_progress_params_of_the_schema_are_the_servers() -> None:
    """The schema types ``$/progress`` with its own struct (the JSON-RPC layer leaves the
    value untyped); the fields are the ones the layer sends."""
    from sessiond.api import schema as protocol
    from sessiond.jsonrpc import lsp_notifications

    def names(struct: type[msgspec.Struct]) -> list[str]:
        return [field.encode_name for field in msgspec.structs.fields(struct)]

    assert names(protocol.ProgressParams) == names(lsp_notifications.ProgressNotificationParams)
