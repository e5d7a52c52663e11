"""The ``initialize`` handshake's wire types: what a client declares, what the daemon offers."""

from __future__ import annotations

import typing
from typing import Annotated, Any

import msgspec

from .types import WIRE_OPTIONS, HookName


class ClientInfo(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    name: str
    version: str | None = None


# The hooks a daemon of this version knows; a client may name others (a later daemon's):
# they are ignored with a warning.
KnownHooks = Annotated[
    list[str],
    msgspec.Meta(
        description="Hooks this client answers: "
        + ", ".join(typing.get_args(HookName))
        + ". A name the daemon does not know is ignored with a warning."
    ),
]


class WindowCapabilities(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    """Where LSP puts them: what the client's window can show."""

    # The client answers ``window/workDoneProgress/create``, so it can be sent
    # ``$/progress`` for work it did not request (a summary written in the background).
    work_done_progress: bool = False


class ClientCapabilities(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    # Hooks this client answers (server->client requests or notifications).
    hooks: KnownHooks = msgspec.field(default_factory=list)
    # The client can summarize with its own model access (``llm/complete``).
    llm: bool = False
    # Notification methods this client does not want.
    opt_out_notifications: list[str] = msgspec.field(default_factory=list)
    window: WindowCapabilities = msgspec.field(default_factory=WindowCapabilities)


class InitializeParams(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    client_info: ClientInfo | None = None
    # "1". Any other JSON value (1 as a number included) is served with a warning;
    # the schema says what to send.
    protocol_version: Annotated[
        Any,
        msgspec.Meta(
            extra_json_schema={
                "type": "string",
                "description": 'The protocol version the client speaks: the string "1". '
                "Another value (the number 1 included) is served with a warning.",
            }
        ),
    ] = None
    capabilities: ClientCapabilities = msgspec.field(default_factory=ClientCapabilities)
    # Setting overrides for this connection, {group: {key: value}}.
    settings: dict[str, Any] | None = None
    # Required on TCP: the token the daemon was started with.
    auth_token: str | None = None


class ServerInfo(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    name: str
    version: str


class ServerCapabilities(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    methods: list[str]
    notifications: list[str]
    hooks: list[str]
    summarizers: list[str]


class InitializeResult(msgspec.Struct, kw_only=True, **WIRE_OPTIONS):
    server_info: ServerInfo
    protocol_version: str
    capabilities: ServerCapabilities
    # Problems with the daemon's settings file or the client's settings.
    warnings: list[str] = msgspec.field(default_factory=list)
