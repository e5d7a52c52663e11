"""JSON-RPC 2.0 envelopes: the message types on the wire, and reading one from untrusted bytes.

An incoming message is decoded in one pass with ``params`` and ``result`` kept as
``msgspec.Raw``; a handler's params are decoded from those bytes later, straight into
the handler's own type. A body that fails this strict decode is diagnosed
(``diagnosis``) to find the most useful error to answer with.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec import UNSET, Raw, UnsetType

from sessiond.core.jsjson import replace_lone_surrogates
from sessiond.errors import SessiondError

RequestId = int | str
JSONRPC_VERSION = "2.0"


class IncomingError(msgspec.Struct):
    code: int
    message: str
    data: Raw = Raw()


class IncomingMessage(msgspec.Struct):
    """Any message a peer sends: request, notification or response, told apart by its fields."""

    jsonrpc: Literal["2.0"]
    id: int | str | UnsetType | None = UNSET
    method: str | UnsetType = UNSET
    params: Raw = Raw()  # empty when absent
    result: Raw = Raw()  # empty when absent; ``null`` is a present result
    error: IncomingError | UnsetType = UNSET


class ErrorObject(msgspec.Struct):
    code: int
    message: str
    data: Any | UnsetType = UNSET


class ResultResponse(msgspec.Struct, kw_only=True):
    jsonrpc: str = JSONRPC_VERSION
    id: RequestId | None
    result: Any


class ErrorResponse(msgspec.Struct, kw_only=True):
    jsonrpc: str = JSONRPC_VERSION
    id: RequestId | None
    error: ErrorObject


class OutgoingRequest(msgspec.Struct, kw_only=True):
    jsonrpc: str = JSONRPC_VERSION
    id: RequestId
    method: str
    params: Any | UnsetType = UNSET


class OutgoingNotification(msgspec.Struct, kw_only=True):
    jsonrpc: str = JSONRPC_VERSION
    method: str
    params: Any | UnsetType = UNSET


def error_object(err: SessiondError) -> ErrorObject:
    return ErrorObject(code=err.code, message=err.message, data=err.to_data())


# What a decode of untrusted bytes raises: msgspec gives up on very deep nesting with a
# RecursionError, not a DecodeError.
UNDECODABLE = (msgspec.DecodeError, RecursionError)
_envelope_decoder = msgspec.json.Decoder(IncomingMessage)


def decode_envelope(body: bytes) -> IncomingMessage | None:
    """The JSON-RPC envelope of ``body``, or None when it is not one (``diagnose`` says why)."""
    try:
        return _envelope_decoder.decode(body)
    except UNDECODABLE:
        pass
    # JavaScript clients send a string cut inside an emoji as a lone surrogate escape,
    # which JSON.parse accepts: read it as U+FFFD rather than refuse.
    readable = replace_lone_surrogates(body)
    if readable is body:
        return None
    try:
        return _envelope_decoder.decode(readable)
    except UNDECODABLE:
        return None
