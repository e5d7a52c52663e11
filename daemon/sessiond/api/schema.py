"""``protocol/schema.json``: the protocol's JSON Schema, generated from the wire types.

Methods come from the router itself (params type as registered, result type
from the handler's return annotation), so the schema cannot drift from the
code; ``sessiond schema --check`` (and a test) fail when the committed file is
stale. Entries and messages are typed by the session file's own types (see
``entry_types``). The file is written for code generators as much as for
validators:

- every tagged union is standard JSON Schema: ``oneOf`` of named types, each with
  its tag as a ``const`` (msgspec writes OpenAPI's ``discriminator``, which JSON
  Schema does not have and generators misread; it is rewritten here);
- the root is a catalogue (one property per named type), so a generator run on the
  file as it is emits every type;
- ``messages`` is the table of every message of the protocol, both directions:
  method, request or notification, direction, and the names of its params and
  result types in ``$defs``.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from sessiond.jsonrpc import (
    CancelParams,
    LogMessageParams,
    WorkDoneProgress,
    WorkDoneProgressCreateParams,
)

from . import hook_types as h
from . import notification_types as n
from . import types as t
from .entry_types import SCHEMA_UNIONS


class ProgressParams(msgspec.Struct):
    """$/progress: LSP work-done progress, of a request that carried a workDoneToken or
    of a background summary (on a token made by window/workDoneProgress/create)."""

    # The JSON-RPC layer sends its own ProgressNotificationParams, whose value it does not type.
    token: t.ProgressToken
    value: WorkDoneProgress


class InitializedParams(msgspec.Struct):
    """``initialized``: LSP's notification after the ``initialize`` answer (an empty object)."""


Direction = Literal["clientToServer", "serverToClient", "both"]


@dataclass(frozen=True)
class Message:
    """One row of the schema's ``messages`` table."""

    method: str
    kind: Literal["request", "notification"]
    direction: Direction
    # The params type (None: the message has no params) and, for a request, the result's.
    params: Any
    result: Any = None
    hook: str | None = None


# Daemon to client. The hooks/ ones go only to clients that declared the hook.
NOTIFICATIONS: dict[str, Any] = {
    "session/changed": n.SessionChanged,
    "session/recovered": n.SessionRecovered,
    "compaction/started": n.CompactionStartedNotification,
    "compaction/ended": n.CompactionEndedNotification,
    "$/progress": ProgressParams,
    "window/logMessage": LogMessageParams,
    "hooks/session_compact": h.CompactHookParams,
    "hooks/session_tree": h.TreeHookParams,
}
# The result of a request answered with JSON null (shutdown).
NULL_RESULT = "NullResult"
# Daemon to client requests: the hooks a client declared, llm/complete, and LSP's request
# for a progress token (to clients that declared ``window.workDoneProgress``).
SERVER_REQUESTS: dict[str, tuple[Any, Any]] = {
    "hooks/session_before_compact": (h.BeforeCompactHookParams, h.BeforeCompactHookResult),
    "hooks/session.compacting": (h.CompactingHookParams, h.CompactingHookResult),
    "hooks/session_before_tree": (h.BeforeTreeHookParams, h.BeforeTreeHookResult),
    "llm/complete": (h.LlmCompleteParams, h.LlmCompleteResult),
    "window/workDoneProgress/create": (WorkDoneProgressCreateParams, NULL_RESULT),
}
# LSP's own notifications, both ways: the connection handles them (exit, $/cancelRequest)
# or the daemon accepts and ignores them (initialized).
CANCEL_REQUEST = "$/cancelRequest"
# Named unions of the schema: the session file's, and LSP's work-done progress values.
UNIONS: dict[str, tuple[Any, str, dict[str, Any]]] = {
    **SCHEMA_UNIONS,
    "WorkDoneProgress": (
        WorkDoneProgress,
        "A `$/progress` value, LSP's work-done progress: begin, report or end, tagged by `kind`.",
        {},
    ),
}
_HOOK_PREFIX = "hooks/"
# msgspec names a component by its class, qualified when two classes share a name;
# the schema's names must be plain identifiers (clients generate types from them).
SCHEMA_NAMES: dict[str, str] = {}
ROOT_TITLE = "SessiondProtocol"


def protocol_messages() -> list[Message]:
    """Every message of the protocol, client requests first, each group sorted by method."""
    from sessiond.settings import Settings

    from .app import build_daemon
    from .daemon import Daemon

    router = build_daemon(Daemon(Settings(), [])).router
    found: list[Message] = []
    for name, spec in sorted(router.requests.items()):
        result = typing.get_type_hints(spec.handler).get("return", Any)
        found.append(Message(name, "request", "clientToServer", spec.params_type, _or_null(result)))
    client_notifications = {name: spec.params_type for name, spec in router.notifications.items()}
    client_notifications["initialized"] = InitializedParams
    client_notifications["exit"] = None
    for name, params in sorted(client_notifications.items()):
        found.append(Message(name, "notification", "clientToServer", params))
    found.append(Message(CANCEL_REQUEST, "notification", "both", CancelParams))
    for name, params in sorted(NOTIFICATIONS.items()):
        found.append(Message(name, "notification", "serverToClient", params, hook=_hook(name)))
    for name, (params, result) in sorted(SERVER_REQUESTS.items()):
        found.append(Message(name, "request", "serverToClient", params, result, _hook(name)))
    return found


def _or_null(result: Any) -> Any:
    return NULL_RESULT if result is type(None) else result


def _hook(method: str) -> str | None:
    return method.removeprefix(_HOOK_PREFIX) if method.startswith(_HOOK_PREFIX) else None


# -- rewriting msgspec's schema for generators ----------------------------------------------------


def _renamed(node: Any, names: dict[str, str]) -> Any:
    """``node`` with every ``$ref`` to a renamed component pointing at its new name."""
    if isinstance(node, dict):
        out = {key: _renamed(value, names) for key, value in node.items()}
        ref = out.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.removeprefix("#/$defs/")
            out["$ref"] = f"#/$defs/{names.get(name, name)}"
        return out
    if isinstance(node, list):
        return [_renamed(item, names) for item in node]
    return node


def _named(node: Any, unions: dict[str, Any]) -> Any:
    """``node`` with each inlined copy of a named union replaced by a ``$ref`` to it."""
    for name, union in unions.items():
        if node == union:
            return {"$ref": f"#/$defs/{name}"}
    if isinstance(node, dict):
        return {key: _named(value, unions) for key, value in node.items()}
    if isinstance(node, list):
        return [_named(item, unions) for item in node]
    return node


def _standard_unions(node: Any, tags: dict[str, str]) -> Any:
    """``anyOf`` + ``discriminator`` rewritten as ``oneOf``; ``tags`` collects, for each
    member, the name of its tag property (its one-value ``enum`` becomes a ``const``)."""
    if isinstance(node, list):
        return [_standard_unions(item, tags) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _standard_unions(value, tags) for key, value in node.items()}
    if "$ref" in out:
        # A raw field typed by extra_json_schema also carries the type msgspec gave it.
        out.pop("type", None)
    discriminator = out.pop("discriminator", None)
    if discriminator is not None:
        out["oneOf"] = out.pop("anyOf")
        for target in discriminator["mapping"].values():
            tags[target.removeprefix("#/$defs/")] = discriminator["propertyName"]
    return out


def _const_tags(components: dict[str, Any], tags: dict[str, str]) -> None:
    for name, tag in tags.items():
        tag_schema = components[name]["properties"][tag]
        (value,) = tag_schema.pop("enum")
        tag_schema["const"] = value


def _plain_names(components: dict[str, Any]) -> dict[str, Any]:
    qualified = [name for name in components if "." in name and name not in SCHEMA_NAMES]
    if qualified:
        raise RuntimeError(f"give these schema components a name in SCHEMA_NAMES: {qualified}")
    renamed = {SCHEMA_NAMES.get(name, name): schema for name, schema in components.items()}
    for name in SCHEMA_NAMES.values():
        if name in renamed and "title" in renamed[name]:
            renamed[name] = {**renamed[name], "title": name}
    pointing: dict[str, Any] = _renamed(renamed, SCHEMA_NAMES)
    return pointing


def _type_name(node: Any, what: str) -> str:
    ref = node.get("$ref") if isinstance(node, dict) else None
    if not isinstance(ref, str):
        raise RuntimeError(f"{what} must be a named type (a msgspec Struct), not {node}")
    return ref.removeprefix("#/$defs/")


def build_schema() -> dict[str, Any]:
    messages = protocol_messages()
    wanted: list[Any] = []
    for message in messages:
        if message.params is not None:
            wanted.append(message.params)
        if message.result is not None and message.result != NULL_RESULT:
            wanted.append(message.result)
    wanted += [union for union, _, _ in UNIONS.values()]
    schemas, components = msgspec.json.schema_components(wanted, ref_template="#/$defs/{name}")
    unions = dict(zip(UNIONS, schemas[-len(UNIONS) :], strict=True))
    taken = unions.keys() & components.keys()
    if taken:
        raise RuntimeError(f"union names taken by types: {sorted(taken)}")
    components = _named(components, unions)
    for name, (_, description, more) in UNIONS.items():
        components[name] = {"title": name, "description": description, **unions[name], **more}
    components[NULL_RESULT] = {
        "title": NULL_RESULT,
        "description": "JSON null: the result of a request that answers nothing (shutdown, "
        "window/workDoneProgress/create).",
        "type": "null",
    }
    tags: dict[str, str] = {}
    components = _plain_names(_standard_unions(components, tags))
    _const_tags(components, {SCHEMA_NAMES.get(name, name): tag for name, tag in tags.items()})
    found = iter(_renamed(_named(list(schemas), unions), SCHEMA_NAMES))
    table: list[dict[str, Any]] = []
    for message in messages:
        row: dict[str, Any] = {
            "method": message.method,
            "kind": message.kind,
            "direction": message.direction,
            "params": None
            if message.params is None
            else _type_name(next(found), f"params of {message.method}"),
        }
        if message.kind == "request":
            row["result"] = (
                NULL_RESULT
                if message.result == NULL_RESULT
                else _type_name(next(found), f"result of {message.method}")
            )
        if message.hook is not None:
            row["hook"] = message.hook
            if message.kind == "request":
                # A hook may answer null: "no opinion", the same as not declaring the hook.
                row["resultMayBeNull"] = True
        table.append(row)
    names = sorted(components)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": ROOT_TITLE,
        "protocolVersion": t.PROTOCOL_VERSION,
        "description": (
            "The sessiond protocol: JSON-RPC 2.0 with LSP framing. `messages` lists every "
            "message, both directions: `method`, `kind` (request or notification), "
            "`direction` (clientToServer, serverToClient or both), and `params` / `result`, "
            "the names of their types in `$defs` (`params` null: the message has none; "
            "`resultMayBeNull`: a hook may also answer null, meaning no opinion). Entries and "
            "messages are typed ($defs Entry, AgentMessage, LlmMessage, EntryInput, "
            "MessageInput): tagged unions as `oneOf` with a `const` tag. Objects may carry "
            "fields not listed; an optional field sent as null is read as absent. The root "
            "object is a catalogue with one property per type, so that a code generator run on "
            "this file emits every type; no message has its shape. Generated by "
            "`sessiond schema`; protocol/README.md gives the meaning of each."
        ),
        "type": "object",
        "properties": {name: {"$ref": f"#/$defs/{name}"} for name in names},
        "messages": table,
        "$defs": {name: components[name] for name in names},
    }


def schema_json() -> bytes:
    encoded = msgspec.json.format(msgspec.json.encode(build_schema()), indent=2)
    return encoded + b"\n"
