"""Redaction as a unit: whole secrets, any 8-character run of one, pieces left at a cut,
URLs, headers, and the log formatter."""

from __future__ import annotations

import logging
import secrets

import pytest

from sessiond.redaction import (
    KNOWN,
    REDACTED,
    RedactingFormatter,
    SecretSet,
    clip,
    header_secrets,
    redact,
    redact_url,
    remember,
    url_secrets,
)

KEY = "k" + secrets.token_hex(20)  # 41 characters, no recognisable shape


def test_whole_secrets_and_every_run_of_eight_characters_are_removed() -> None:
    found = SecretSet([KEY])
    assert found.redact(f"key={KEY}.") == f"key={REDACTED}."
    assert found.redact(f"part {KEY[10:18]} of it") == f"part {REDACTED} of it"
    assert found.redact(f"{KEY[:20]}|{KEY[25:]}") == f"{REDACTED}|{REDACTED}"
    # Seven characters are not enough to be recognised in the middle of a text.
    assert found.redact(f"a {KEY[3:10]} b") == f"a {KEY[3:10]} b"
    # Overlapping and adjacent runs become one marker.
    assert found.redact(KEY[:30] + KEY[22:]) == REDACTED


def test_short_secrets_are_matched_whole_and_tiny_ones_ignored() -> None:
    found = SecretSet(["abc1234", "xy", None, ""])
    assert found.redact("token abc1234 and xy") == f"token {REDACTED} and xy"
    assert len(found) == 1


def test_clip_redacts_before_cutting_a_secret_in_two() -> None:
    text = "." * 170 + KEY + "x" * 100
    clipped = clip(text, 200, [KEY])
    assert clipped == "." * 170 + REDACTED + "x" * 20
    # Only six characters of the key fall before the cut: the marker is not cut in half.
    clipped = clip("." * 194 + KEY, 200, [KEY])
    assert clipped == "." * 194 + REDACTED


@pytest.mark.parametrize("size", [4, 5, 6, 7])
def test_clip_removes_a_piece_of_a_secret_left_at_the_cut(size: int) -> None:
    # The text itself holds only the key's start (a body cut short by its sender), and
    # the cut falls right after it: too short for the 8-character rule.
    text = "." * (200 - size) + KEY[:size] + "!" * 50
    clipped = clip(text, 200, [KEY])
    assert clipped == "." * (200 - size) + REDACTED


def test_clip_leaves_ordinary_text_alone() -> None:
    text = "plain words " * 40
    assert clip(text, 100, [KEY]) == text[:100]
    assert clip("short", 100, [KEY]) == "short"


def test_known_secrets_are_always_redacted_and_logs_never_show_them() -> None:
    token = "tok" + secrets.token_hex(16)
    remember(token)
    assert token in KNOWN.values()
    assert redact(f"the token is {token[5:20]}") == f"the token is {REDACTED}"
    record = logging.LogRecord(
        "sessiond.test", logging.WARNING, __file__, 1, "saw %s", (token,), None
    )
    try:
        raise ValueError(f"boom {token}")
    except ValueError:
        import sys

        record.exc_info = sys.exc_info()
    line = RedactingFormatter("%(message)s").format(record)
    assert token[:8] not in line and token[-8:] not in line
    assert line.startswith(f"saw {REDACTED}") and "ValueError: boom" in line


def test_url_credentials() -> None:
    assert url_secrets("http://user:pw123456@host/v1") == ["pw123456"]
    long_user = "u" + secrets.token_hex(12)
    assert url_secrets(f"https://{long_user}@git.example/x") == [long_user]
    assert url_secrets("https://admin@host/x") == []  # a short user name is a name
    assert url_secrets("https://h/v1?api-version=2024-02-01&key=abcd1234") == ["abcd1234"]
    assert url_secrets("https://h/v1?x=" + "z" * 24) == ["z" * 24]
    assert url_secrets(None) == [] and url_secrets("http://[::1/v1") == []
    assert redact_url("http://user:pw@127.0.0.1:8080/v1") == f"http://{REDACTED}@127.0.0.1:8080/v1"
    assert redact_url("https://h/v1?api-version=1&key=s") == (
        f"https://h/v1?api-version={REDACTED}&key={REDACTED}"
    )
    assert redact_url("https://api.openai.com/v1") == "https://api.openai.com/v1"


def test_public_and_short_header_values_are_not_secrets() -> None:
    headers = {
        "x-api-key": "secret-value",
        "anthropic-version": "2023-06-01",
        "X-Title": "my-app-name",
        "x-env": "prod",  # would otherwise be cut out of every summary that says "prod"
    }
    assert header_secrets(headers) == ["secret-value"]
