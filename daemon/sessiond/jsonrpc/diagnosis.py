"""What to answer a body that is not a valid JSON-RPC message (it failed the strict decode)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from sessiond.errors import InvalidRequestError, ParseError, SessiondError
from sessiond.jsonrpc.envelopes import JSONRPC_VERSION, RequestId
from sessiond.jsonrpc.header_framing import leading_request_id


@dataclass(slots=True)
class Diagnosis:
    """What to do about a body that did not decode as a JSON-RPC message.

    ``replies`` are the errors to send, each with the id to send it under; when
    ``as_batch`` they go out as one JSON array. ``bad_answer_id`` is set when the body
    looks like a malformed answer to one of our own requests: that request fails, and
    no reply is sent for it, because answering an answer could start an endless exchange
    of errors (``replies`` then holds what to send if it answered no request of ours).
    """

    replies: list[tuple[RequestId | None, SessiondError]] = field(default_factory=list)
    as_batch: bool = False
    bad_answer_id: RequestId | None = None
    problem: str = ""


def diagnose(body: bytes) -> Diagnosis:
    """Work out why ``body`` is not a valid message (it failed the strict decode)."""
    err: SessiondError
    try:
        value = msgspec.json.decode(body)
    except RecursionError:
        # Valid JSON nested deeper than the decoder goes: answer the request if its id can
        # be read from the start of the message.
        err = InvalidRequestError("Invalid Request: the message is nested too deeply")
        return Diagnosis([(leading_request_id(body), err)], problem=err.message)
    except msgspec.DecodeError as exc:
        err = ParseError(f"Parse error: {exc}")
        # Perhaps an answer to one of our requests that is not JSON (invalid UTF-8 in it,
        # say): the request it answers then fails at once rather than wait for its
        # timeout, and the parse error is sent only if it answered none.
        return Diagnosis(
            [(None, err)], bad_answer_id=_answer_id_of_broken(body), problem=err.message
        )
    if isinstance(value, list):
        return _diagnose_batch(value)
    if not isinstance(value, dict):
        err = InvalidRequestError("Invalid Request: a message must be a JSON object")
        return Diagnosis([(None, err)], problem=err.message)
    request_id = _valid_id(value)
    is_answer = "method" not in value and ("result" in value or "error" in value)
    problem = _envelope_problem(value, is_answer)
    if is_answer:
        answer_id = request_id if isinstance(request_id, int | str) else None
        return Diagnosis(bad_answer_id=answer_id, problem=f"Malformed response: {problem}")
    err = InvalidRequestError(f"Invalid Request: {problem}")
    return Diagnosis([(request_id, err)], problem=err.message)


def _answer_id_of_broken(body: bytes) -> int | None:
    """The id of ``body`` if it is recognisably an answer (a ``result`` or an ``error``, no
    ``method``) to a request of the daemon's (whose ids are integers), though not JSON as
    it stands: read with its invalid UTF-8 replaced, or, when it is not JSON even then,
    from an id at its start."""
    try:
        value = msgspec.json.decode(body.decode("utf-8", "replace").encode("utf-8"))
    except (msgspec.DecodeError, RecursionError):
        if b'"method"' in body:
            return None
        leading = leading_request_id(body)
        return leading if isinstance(leading, int) else None
    if not isinstance(value, dict) or "method" in value:
        return None
    answer_id = value.get("id")
    is_answer = "result" in value or "error" in value
    return answer_id if is_answer and type(answer_id) is int else None


def _diagnose_batch(items: list[Any]) -> Diagnosis:
    if not items:
        err = InvalidRequestError("Invalid Request: empty batch")
        return Diagnosis([(None, err)], problem=err.message)
    message = "Invalid Request: batch requests are not supported; send each message on its own"
    ids = [
        _valid_id(item)
        for item in items
        if isinstance(item, dict) and "method" in item and isinstance(_valid_id(item), int | str)
    ]
    if not ids:
        return Diagnosis([(None, InvalidRequestError(message))], problem=message)
    return Diagnosis(
        [(request_id, InvalidRequestError(message)) for request_id in ids],
        as_batch=True,
        problem=message,
    )


def _valid_id(message: dict[str, Any]) -> RequestId | None:
    """The message's id when it has a legal type, else None (answer with ``id: null``)."""
    value = message.get("id")
    if isinstance(value, bool):
        return None
    if isinstance(value, int | str):
        return value
    return None


def _envelope_problem(message: dict[str, Any], is_answer: bool) -> str:
    if message.get("jsonrpc") != JSONRPC_VERSION:
        return '"jsonrpc" must be "2.0"'
    if "id" in message:
        value = message["id"]
        if isinstance(value, bool) or not isinstance(value, int | str | None):
            return '"id" must be a string, an integer or null'
    if is_answer:
        return '"error" must be an object with an integer "code" and a string "message"'
    if "method" not in message:
        return 'a message needs "method" (a request) or "result"/"error" (a response)'
    if not isinstance(message["method"], str):
        return '"method" must be a string'
    return "not a JSON-RPC 2.0 message"
