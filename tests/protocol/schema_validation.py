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
# JSON-RPC's own: cancelling a request is part of the base protocol, not of sessiond's schema.
BASE_PROTOCOL_NOTIFICATIONS = frozenset({"$/cancelRequest"})
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


def transcript_problems(transcript: list[tuple[str, str, Any]], name: str) -> tuple[list[str], int]:
    """Problems of an exchange against the schema, and how many messages were checked.

    ``transcript`` is ``(peer, "send" | "receive", message)`` in wire order. Params of a
    request are checked only when the daemon answered it with a result: the examples
    also send wrong requests on purpose, to show the errors.
    """
    tables = schema()
    found: list[str] = []
    checked = 0
    asked_by_client: dict[tuple[str, str], tuple[str, Any]] = {}
    asked_by_daemon: dict[tuple[str, str], str] = {}

    def check(value: Any, node: dict[str, Any] | None, what: str) -> None:
        nonlocal checked
        if node is None:
            found.append(f"{name}: {what}: not in the schema")
            return
        checked += 1
        found.extend(f"{name}: {what}: {problem}" for problem in problems(value, node))

    for peer, direction, raw in transcript:
        for message in _flat(raw):
            method = message.get("method")
            key = (peer, json.dumps(message.get("id")))
            if direction == "send":
                if isinstance(method, str) and "id" in message:
                    asked_by_client[key] = (method, message.get("params"))
                elif method is None and "result" in message and key in asked_by_daemon:
                    asked = asked_by_daemon.pop(key)
                    spec = tables["serverRequests"].get(asked)
                    check(message["result"], spec and spec["result"], f"answer to {asked}")
            elif isinstance(method, str) and "id" in message:
                asked_by_daemon[key] = method
                spec = tables["serverRequests"].get(method)
                check(message.get("params"), spec and spec["params"], f"server request {method}")
            elif isinstance(method, str):
                if method not in BASE_PROTOCOL_NOTIFICATIONS:
                    spec = tables["notifications"].get(method)
                    check(message.get("params"), spec and spec["params"], f"notification {method}")
            elif key in asked_by_client:
                asked, params = asked_by_client.pop(key)
                if "result" not in message:
                    continue  # an error answer
                spec = tables["methods"].get(asked)
                check(message["result"], spec and spec["result"], f"result of {asked}")
                if params is not None:
                    check(params, spec and spec["params"], f"params of {asked}")
    return found, checked
