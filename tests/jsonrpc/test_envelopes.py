"""``diagnose``: the error chosen for a body that is not a valid JSON-RPC message."""

from __future__ import annotations

import msgspec
import pytest

from sessiond.errors import INVALID_REQUEST, PARSE_ERROR
from sessiond.jsonrpc.diagnosis import diagnose
from sessiond.jsonrpc.envelopes import IncomingMessage


@pytest.mark.parametrize(
    ("body", "reply_id", "code", "fragment"),
    [
        (b'{"jsonrpc":"2.0",', None, PARSE_ERROR, "truncated"),
        (b"\xff\xfe", None, PARSE_ERROR, "malformed"),
        (b"", None, PARSE_ERROR, "Parse error"),
        (b'"just a string"', None, INVALID_REQUEST, "JSON object"),
        (b'{"id":1,"method":"m"}', 1, INVALID_REQUEST, '"jsonrpc" must be "2.0"'),
        (b'{"jsonrpc":"1.0","id":"a","method":"m"}', "a", INVALID_REQUEST, '"2.0"'),
        (b'{"jsonrpc":"2.0","id":1.5,"method":"m"}', None, INVALID_REQUEST, '"id" must be'),
        (b'{"jsonrpc":"2.0","id":true,"method":"m"}', None, INVALID_REQUEST, '"id" must be'),
        (b'{"jsonrpc":"2.0","id":{},"method":"m"}', None, INVALID_REQUEST, '"id" must be'),
        (b'{"jsonrpc":"2.0","id":3,"method":5}', 3, INVALID_REQUEST, '"method" must be'),
        (b'{"jsonrpc":"2.0","id":4}', 4, INVALID_REQUEST, 'needs "method"'),
        (b'{"jsonrpc":"2.0","method":null}', None, INVALID_REQUEST, '"method" must be'),
        (b"[]", None, INVALID_REQUEST, "empty batch"),
    ],
)
def test_diagnosis_names_the_problem(
    body: bytes, reply_id: object, code: int, fragment: str
) -> None:
    diagnosis = diagnose(body)
    assert not diagnosis.as_batch and diagnosis.bad_answer_id is None
    [(answer_id, error)] = diagnosis.replies
    assert answer_id == reply_id
    assert error.code == code
    assert fragment in error.message


def test_a_batch_gets_one_error_per_request_in_an_array() -> None:
    diagnosis = diagnose(
        b'[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"n"},'
        b'{"jsonrpc":"2.0","id":"x","method":"b"}]'
    )
    assert diagnosis.as_batch
    assert [answer_id for answer_id, _ in diagnosis.replies] == [1, "x"]
    assert all("batch requests are not supported" in e.message for _, e in diagnosis.replies)


def test_a_batch_of_notifications_gets_a_single_error() -> None:
    diagnosis = diagnose(b'[{"jsonrpc":"2.0","method":"n"}]')
    assert not diagnosis.as_batch
    assert [answer_id for answer_id, _ in diagnosis.replies] == [None]


def test_a_malformed_answer_is_not_answered() -> None:
    diagnosis = diagnose(b'{"jsonrpc":"2.0","id":9,"error":{"code":"x"}}')
    assert diagnosis.replies == []
    assert diagnosis.bad_answer_id == 9
    assert "Malformed response" in diagnosis.problem


def test_valid_messages_decode_strictly() -> None:
    decoder = msgspec.json.Decoder(IncomingMessage)
    request = decoder.decode(b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":[1]}}')
    assert request.method == "m" and bytes(request.params) == b'{"a":[1]}'
    answer = decoder.decode(b'{"jsonrpc":"2.0","id":1,"result":null}')
    assert bytes(answer.result) == b"null"
    with pytest.raises(msgspec.ValidationError):
        decoder.decode(b'{"jsonrpc":"2.0","id":[1],"method":"m"}')
