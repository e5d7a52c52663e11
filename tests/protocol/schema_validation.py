"""JSON against ``protocol/schema.json``, with a stock JSON Schema validator (draft 2020-12).

``problems(value, node)`` lists why ``value`` does not fit a schema node of the file
(``defined("Entry")`` for one of its ``$defs``); ``transcript_problems`` checks a
recorded exchange (what ``replay`` saw on the wire) method by method.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "protocol" / "schema.json"
# The tag fields of the schema's unions, as error paths.
TAGS = [["type"], ["role"], ["kind"]]


@cache
def schema() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return data


def defined(name: str) -> dict[str, Any]:
    """The schema node of ``$defs/name``."""
    assert name in schema()["$defs"], f"protocol/schema.json has no $defs/{name}"
    return {"$ref": f"#/$defs/{name}"}


def _validator(node: dict[str, Any]) -> Draft202012Validator:
    return Draft202012Validator({**node, "$defs": schema()["$defs"]})


def problems(value: Any, node: dict[str, Any]) -> list[str]:
    """Why ``value`` does not validate against ``node`` (empty when it does)."""
    found = []
    for error in _validator(node).iter_errors(value):
        cause = _in_tagged_member(error)
        where = "/".join(str(part) for part in cause.absolute_path) or "(top)"
        found.append(f"{where}: {cause.message}")
    return found


def _in_tagged_member(error: ValidationError) -> ValidationError:
    """For a failed tagged union, the error inside the member whose tag matched."""
    while error.context:
        members: dict[Any, list[ValidationError]] = {}
        for sub in error.context:
            members.setdefault(sub.relative_schema_path[0], []).append(sub)
        tagged = [
            errors
            for errors in members.values()
            if not any(e.validator == "enum" and list(e.relative_path) in TAGS for e in errors)
        ]
        if len(tagged) != 1:
            break
        error = tagged[0][0]
    return error


def without_assigned(entry: dict[str, Any]) -> dict[str, Any]:
    """A stored entry as ``session/append`` takes it: no id, parentId or timestamp."""
    return {
        key: value for key, value in entry.items() if key not in ("id", "parentId", "timestamp")
    }


def _flat(message: Any) -> Iterable[dict[str, Any]]:
    if isinstance(message, list):  # a batch
        yield from (item for item in message if isinstance(item, dict))
    elif isinstance(message, dict):
        yield message


def message_table() -> dict[tuple[str, str], dict[str, Any]]:
    """The schema's ``messages`` table by (method, who sends it: "client" or "daemon")."""
    table: dict[tuple[str, str], dict[str, Any]] = {}
    for row in schema()["messages"]:
        senders = {"clientToServer": ["client"], "serverToClient": ["daemon"]}
        for sender in senders.get(row["direction"], ["client", "daemon"]):
            table[(row["method"], sender)] = row
    return table


def _node(row: dict[str, Any] | None, part: str) -> dict[str, Any] | None:
    """The schema node of a row's params or result: its named type."""
    if row is None:
        return None
    name = row.get(part)
    if name is None:
        return {"type": "null"} if part == "params" else None
    node = defined(name)
    if part == "result" and row.get("resultMayBeNull"):
        return {"anyOf": [node, {"type": "null"}]}
    return node


def _params(message: dict[str, Any], method: str, table: dict[Any, Any]) -> Any:
    """A client message's params; absent ones are ``{}`` where the method takes an object."""
    if "params" in message:
        return message["params"]
    row = table.get((method, "client"))
    return {} if row is not None and row.get("params") is not None else None


class Checked:
    """What a transcript check validated: (method, "params" | "result") pairs."""

    def __init__(self) -> None:
        self.parts: set[tuple[str, str]] = set()
        self.count = 0


def transcript_problems(
    transcript: list[tuple[str, str, Any]], name: str, checked: Checked | None = None
) -> tuple[list[str], int]:
    """Problems of an exchange against the schema, and how many messages were checked.

    ``transcript`` is ``(peer, "send" | "receive", message)`` in wire order. Every message
    is looked up in the schema's ``messages`` table by its method and its sender, and its
    params (or, for an answer, its result) validated against the named type. Params of a
    request are checked only when the daemon answered it with a result: the examples
    also send wrong requests on purpose, to show the errors. Params left out are checked
    as ``{}``, which is how the daemon reads them.
    """
    table = message_table()
    checked = checked or Checked()
    found: list[str] = []
    start = checked.count
    asked_by_client: dict[tuple[str, str], tuple[str, Any, bool]] = {}
    asked_by_daemon: dict[tuple[str, str], str] = {}

    def check(value: Any, method: str, sender: str, part: str, what: str) -> None:
        node = _node(table.get((method, sender)), part)
        if node is None:
            found.append(f"{name}: {what}: not in the schema")
            return
        checked.count += 1
        checked.parts.add((method, part))
        found.extend(f"{name}: {what}: {problem}" for problem in problems(value, node))

    for peer, direction, raw in transcript:
        for message in _flat(raw):
            method = message.get("method")
            key = (peer, json.dumps(message.get("id")))
            sender = "client" if direction == "send" else "daemon"
            if isinstance(method, str) and "id" in message:
                if sender == "client":
                    asked_by_client[key] = (method, _params(message, method, table))
                else:
                    asked_by_daemon[key] = method
                    check(message.get("params"), method, "daemon", "params", f"request {method}")
            elif isinstance(method, str):
                if (method, sender) in table or sender == "daemon":
                    params = _params(message, method, table)
                    check(params, method, sender, "params", f"{sender} notification {method}")
            elif sender == "client" and key in asked_by_daemon:
                asked = asked_by_daemon.pop(key)
                if "result" in message:
                    check(message["result"], asked, "daemon", "result", f"answer to {asked}")
            elif sender == "daemon" and key in asked_by_client:
                asked, params = asked_by_client.pop(key)
                if "result" not in message:
                    continue  # an error answer
                check(message["result"], asked, "client", "result", f"result of {asked}")
                check(params, asked, "client", "params", f"params of {asked}")
    return found, checked.count - start
