"""JavaScript's view of strings and JSON, for exact parity with pi's estimates.

pi measures text with ``String.length`` (UTF-16 code units) and tool-call
arguments with ``JSON.stringify`` (compact, non-ASCII unescaped, numbers as
JavaScript prints them). Python's ``len`` and ``json.dumps`` differ on emoji,
on ``1.0`` and on exponents, so these helpers reproduce the JavaScript results.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

_MAX_SAFE_INTEGER = 2**53
# JavaScript's WhiteSpace and LineTerminator characters: what String.prototype.trim removes.
JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def utf16_length(text: str) -> int:
    """``text.length`` in JavaScript: code points above U+FFFF count twice."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) >> 1


def js_trim(text: str) -> str:
    """``text.trim()`` in JavaScript (Python's ``strip`` keeps U+FEFF, for one)."""
    return text.strip(JS_WHITESPACE)


def js_number(value: int | float) -> str:
    """``String(value)`` for a JavaScript number (ECMAScript Number::toString)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if -_MAX_SAFE_INTEGER <= value <= _MAX_SAFE_INTEGER:
            return str(value)
        value = float(value)  # JavaScript would have parsed it as a double
    if math.isnan(value) or math.isinf(value):
        return "null"  # what JSON.stringify prints for them
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    digits, exponent = _shortest_digits(abs(value))
    k = len(digits)
    n = exponent  # value = 0.<digits> * 10**n
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = f"{digits[:n]}.{digits[n:]}"
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        mantissa = digits if k == 1 else f"{digits[0]}.{digits[1:]}"
        body = f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + body


def _shortest_digits(value: float) -> tuple[str, int]:
    """Shortest round-trip digits of a positive float and n with value = 0.d1d2... * 10**n."""
    text = repr(value)  # Python's repr is the shortest round-trip form, like JavaScript's
    mantissa, _, exp_text = text.partition("e")
    exponent = int(exp_text) if exp_text else 0
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + exponent
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    stripped = stripped.rstrip("0")
    return stripped or "0", point


def js_stringify(value: Any) -> str:
    """``JSON.stringify(value)`` for JSON-shaped data (dicts keep insertion order)."""
    parts: list[str] = []
    _write(value, parts)
    return "".join(parts)


def _write(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, (int, float)):
        out.append(js_number(value))
    elif isinstance(value, dict):
        out.append("{")
        first = True
        for key, item in value.items():
            if not first:
                out.append(",")
            first = False
            out.append(json.dumps(str(key), ensure_ascii=False))
            out.append(":")
            _write(item, out)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _write(item, out)
        out.append("]")
    else:
        out.append(json.dumps(str(value), ensure_ascii=False))


# A JSON escape: \uXXXX (group 1 holds the hex digits) or any other backslash escape,
# matched in order so that an escaped backslash is never taken for the start of \u.
_JSON_ESCAPE = re.compile(rb"\\(?:u([0-9a-fA-F]{4})|.)", re.DOTALL)
_REPLACEMENT_ESCAPE = b"\\ufffd"


def replace_lone_surrogates(data: bytes) -> bytes:
    """JSON text with every unpaired UTF-16 surrogate escape replaced by ``\\ufffd``.

    ``JSON.stringify`` writes a string cut inside an emoji as a lone ``\\ud83d``;
    JavaScript reads it back, strict decoders (msgspec) refuse the whole document.
    Returns ``data`` itself when there is nothing to replace."""
    if b"\\u" not in data and b"\\U" not in data:
        return data
    lone: list[tuple[int, int]] = []
    high: re.Match[bytes] | None = None
    for match in _JSON_ESCAPE.finditer(data):
        digits = match.group(1)
        unit = int(digits, 16) if digits is not None else -1
        if high is not None:
            if 0xDC00 <= unit <= 0xDFFF and match.start() == high.end():
                high = None
                continue
            lone.append(high.span())
            high = None
        if 0xD800 <= unit <= 0xDBFF:
            high = match
        elif 0xDC00 <= unit <= 0xDFFF:
            lone.append(match.span())
    if high is not None:
        lone.append(high.span())
    if not lone:
        return data
    parts: list[bytes] = []
    position = 0
    for start, end in lone:
        parts += [data[position:start], _REPLACEMENT_ESCAPE]
        position = end
    parts.append(data[position:])
    return b"".join(parts)
