"""How long a provider asked us to wait (a retry-after), from headers or from error text.

The four sources in pi's priority order:

1. ``retry-after-ms`` — milliseconds;
2. ``retry-after`` — seconds, or an HTTP date;
3. ``x-ratelimit-reset-ms`` — an epoch in ms when above 1e12, else a duration in ms;
4. ``x-ratelimit-reset`` — epoch seconds when above 1e9, else a duration in seconds.

Every result is clamped at 0. ``now_ms`` is a parameter so tests control the clock.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime

_NUMBER = r"(\d+(?:\.\d+)?)"
# An IMF-fixdate such as "Wed, 21 Oct 2015 07:28:00 GMT" (it contains a comma).
_HTTP_DATE = r"([A-Za-z]{3},\s*\d{1,2}\s+[A-Za-z]{3}\s+\d{4}\s+\d{2}:\d{2}:\d{2}\s*GMT)"


def _now_ms() -> float:
    return time.time() * 1000


def _clamp(value: float) -> int:
    return max(0, math.ceil(value))


def _ms(raw: str, _now: float) -> int | None:
    return _clamp(float(raw))


def _seconds_or_date(raw: str, now: float) -> int | None:
    raw = raw.strip()
    try:
        return _clamp(float(raw) * 1000)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # an HTTP date is GMT even when it fails to say so
        return None
    return _clamp(when.timestamp() * 1000 - now)


def _reset_ms(raw: str, now: float) -> int | None:
    value = float(raw)
    return _clamp(value - now if value > 1e12 else value)


def _reset_seconds(raw: str, now: float) -> int | None:
    value = float(raw)
    return _clamp(value * 1000 - now if value > 1e9 else value * 1000)


_Parser = Callable[[str, float], int | None]

_SOURCES: tuple[tuple[str, str, _Parser], ...] = (
    ("retry-after-ms", _NUMBER, _ms),
    ("retry-after", f"(?:{_NUMBER}|{_HTTP_DATE})", _seconds_or_date),
    ("x-ratelimit-reset-ms", _NUMBER, _reset_ms),
    ("x-ratelimit-reset", _NUMBER, _reset_seconds),
)

# "name: value" or "name=value" in free text; the name must not run on into a
# longer one ("retry-after" is not "retry-after-ms").
_TEXT_PATTERNS = tuple(
    (re.compile(rf"(?<![\w-]){re.escape(name)}\s*[:=]\s*{value}", re.IGNORECASE), parse)
    for name, value, parse in _SOURCES
)


def retry_after_from_headers(headers: Mapping[str, str], now_ms: float | None = None) -> int | None:
    """The wait asked for by response headers (names are case-insensitive)."""
    now = _now_ms() if now_ms is None else now_ms
    lowered = {key.lower(): value for key, value in headers.items()}
    for name, _pattern, parse in _SOURCES:
        raw = lowered.get(name)
        if raw is None:
            continue
        try:
            result = parse(raw, now)
        except ValueError:
            continue
        if result is not None:
            return result
    return None


def retry_after_from_text(text: str, now_ms: float | None = None) -> int | None:
    """The wait named in an error message such as ``... retry-after: 5``."""
    now = _now_ms() if now_ms is None else now_ms
    for pattern, parse in _TEXT_PATTERNS:
        match = pattern.search(text)
        if match is None:
            continue
        raw = next(group for group in match.groups() if group is not None)
        try:
            result = parse(raw, now)
        except ValueError:
            continue
        if result is not None:
            return result
    return None
