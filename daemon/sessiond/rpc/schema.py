"""``protocol/schema.json``: the protocol's JSON Schema, generated from the wire types.

Methods come from the router itself (params type as registered, result type
from the handler's return annotation), so the schema cannot drift from the
code; ``sessiond schema --check`` (and a test) fail when the committed file is
stale. Entries and messages are typed by the session file's own types (see
``entry_types``): tagged unions on ``type`` and ``role``, with ``$defs`` named
``Entry``, ``AgentMessage``, ``LlmMessage``, ``EntryInput`` and ``MessageInput``.
"""

from __future__ import annotations

import typing
from typing import Any

import msgspec

from sessiond.llm.base import CompletionRequest
from sessiond.server.messages import LogMessageParams, WorkDoneBegin, WorkDoneEnd, WorkDoneReport

from . import types as t
from .entry_types import SCHEMA_UNIONS


class ProgressParams(msgspec.Struct):
    """$/progress: LSP work-done progress of a request that carried a workDoneToken."""

    # The JSON-RPC layer sends its own ProgressParams, whose value it does not type.
    token: t.ProgressToken
    value: WorkDoneBegin | WorkDoneReport | WorkDoneEnd


# Daemon to client. The hooks/ ones go only to clients that declared the hook.
NOTIFICATIONS: dict[str, Any] = {
    "session/changed": t.SessionChanged,
    "session/recovered": t.SessionRecovered,
    "compaction/started": t.CompactionStartedNotification,
    "compaction/ended": t.CompactionEndedNotification,
    "$/progress": ProgressParams,
    "window/logMessage": LogMessageParams,
    "hooks/session_compact": t.CompactHookParams,
    "hooks/session_tree": t.TreeHookParams,
}
# Daemon to client requests: the hooks a client declared, and llm/complete.
SERVER_REQUESTS: dict[str, tuple[Any, Any]] = {
    "hooks/session_before_compact": (t.BeforeCompactHookParams, t.BeforeCompactHookResult),
    "hooks/session.compacting": (t.CompactingHookParams, t.CompactingHookResult),
    "hooks/session_before_tree": (t.BeforeTreeHookParams, t.BeforeTreeHookResult),
    "llm/complete": (CompletionRequest, t.LlmCompleteResult),
}
_HOOK_PREFIX = "hooks/"
# msgspec names a component by its class, qualified when two classes share a name;
# the schema's names must be plain identifiers (clients generate types from them).
SCHEMA_NAMES: dict[str, str] = {
    "sessiond.core.messages.Usage": "TokenUsage",
    "sessiond.rpc.types.Usage": "Usage",
}


def _renamed(node: Any, names: dict[str, str]) -> Any:
    """``node`` with every ``$ref`` to a renamed component pointing at its new name."""
    if isinstance(node, dict):
        out = {key: _renamed(value, names) for key, value in node.items()}
        ref = out.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.removeprefix("#/$defs/")
            out["$ref"] = f"#/$defs/{names.get(name, name)}"
        if "discriminator" in out:
            mapping = out["discriminator"].get("mapping", {})
            for tag, target in mapping.items():
                name = target.removeprefix("#/$defs/")
                mapping[tag] = f"#/$defs/{names.get(name, name)}"
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


def _plain_names(components: dict[str, Any]) -> dict[str, Any]:
    qualified = [name for name in components if "." in name and name not in SCHEMA_NAMES]
    if qualified:
        raise RuntimeError(f"give these schema components a name in SCHEMA_NAMES: {qualified}")
    renamed = {SCHEMA_NAMES.get(name, name): schema for name, schema in components.items()}
    pointing: dict[str, Any] = _renamed(renamed, SCHEMA_NAMES)
    return pointing


def _hooked(name: str, entry: dict[str, Any]) -> dict[str, Any]:
    """A table entry; a hook's also says which hook (as clients declare it) it belongs to."""
    if name.startswith(_HOOK_PREFIX):
        entry["hook"] = name.removeprefix(_HOOK_PREFIX)
    return entry


def build_schema() -> dict[str, Any]:
    from sessiond.settings import Settings

    from .app import build_daemon
    from .daemon import Daemon

    daemon = build_daemon(Daemon(Settings(), []))
    methods: list[tuple[str, Any, Any]] = []
    for name, spec in sorted(daemon.router.requests.items()):
        hints = typing.get_type_hints(spec.handler)
        result = hints.get("return", Any)
        methods.append((name, spec.params_type, None if result is type(None) else result))
    wanted: list[Any] = []
    for _, params, result in methods:
        wanted += [params, result if result is not None else type(None)]
    for payload in NOTIFICATIONS.values():
        wanted.append(payload)
    for params, result in SERVER_REQUESTS.values():
        wanted += [params, result]
    wanted += [union for union, _, _ in SCHEMA_UNIONS.values()]
    schemas, components = msgspec.json.schema_components(wanted, ref_template="#/$defs/{name}")
    unions = dict(zip(SCHEMA_UNIONS, schemas[-len(SCHEMA_UNIONS) :], strict=True))
    taken = unions.keys() & components.keys()
    if taken:
        raise RuntimeError(f"union names taken by types: {sorted(taken)}")
    components = _named(components, unions)
    for name, (_, description, more) in SCHEMA_UNIONS.items():
        components[name] = {"title": name, "description": description, **unions[name], **more}
    components = _plain_names(components)
    schemas = _renamed(_named(list(schemas), unions), SCHEMA_NAMES)
    found = iter(schemas)

    def pair() -> tuple[Any, Any]:
        return next(found), next(found)

    method_table = {}
    for name, _, _ in methods:
        params, result = pair()
        method_table[name] = {"params": params, "result": result}
    notification_table = {name: _hooked(name, {"params": next(found)}) for name in NOTIFICATIONS}
    request_table = {}
    for name in SERVER_REQUESTS:
        params, result = pair()
        if name.startswith(_HOOK_PREFIX):
            # A hook may answer null: "no opinion", the same as not declaring the hook.
            result = {"anyOf": [result, {"type": "null"}]}
        request_table[name] = _hooked(name, {"params": params, "result": result})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "sessiond protocol",
        "protocolVersion": t.PROTOCOL_VERSION,
        "description": (
            "JSON-RPC 2.0 methods (client to daemon), notifications (daemon to client) and "
            "server requests (hooks and llm/complete, daemon to client). Entries and messages "
            "are typed ($defs Entry, AgentMessage, LlmMessage, EntryInput, MessageInput); "
            "objects may carry fields not listed. Generated by `sessiond schema`; see "
            "protocol/README.md for the meaning of each."
        ),
        "methods": method_table,
        "notifications": notification_table,
        "serverRequests": request_table,
        "$defs": components,
    }


def schema_json() -> bytes:
    encoded = msgspec.json.format(msgspec.json.encode(build_schema()), indent=2)
    return encoded + b"\n"
