"""Reading untrusted message bodies: the envelope, and params errors that name the field."""

from __future__ import annotations

import msgspec

from sessiond.core.jsjson import replace_lone_surrogates
from sessiond.errors import InvalidParamsError
from sessiond.jsonrpc.messages import IncomingMessage

# What a decode of untrusted bytes raises: msgspec gives up on very deep nesting with a
# RecursionError, not a DecodeError.
UNDECODABLE = (msgspec.DecodeError, RecursionError)
_message_decoder = msgspec.json.Decoder(IncomingMessage)


def decode_message(body: bytes) -> IncomingMessage | None:
    """The JSON-RPC envelope of ``body``, or None when it is not one (``diagnose`` says why)."""
    try:
        return _message_decoder.decode(body)
    except UNDECODABLE:
        pass
    # JavaScript clients send a string cut inside an emoji as a lone surrogate escape,
    # which JSON.parse accepts: read it as U+FFFD rather than refuse.
    readable = replace_lone_surrogates(body)
    if readable is body:
        return None
    try:
        return _message_decoder.decode(readable)
    except UNDECODABLE:
        return None


def invalid_params(exc: Exception) -> InvalidParamsError:
    """-32602 naming the offending field: msgspec's message with ``$`` spelled ``params``."""
    text = str(exc)
    message, _, where = text.partition(" - at `")
    if where:
        path = "params" + where.rstrip("`")[1:]
        return InvalidParamsError(f"Invalid params: {message} - at `{path}`", path=path)
    return InvalidParamsError(f"Invalid params: {message}")
