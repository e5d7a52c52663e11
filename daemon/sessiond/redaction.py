"""Keeping secrets out of everything sessiond says: errors, logs, summaries, settings.

A secret is any string that gives access to something: the API keys read from the
variables summarizer candidates name, the values of the candidates' headers (except
the few headers whose values are public by nature), passwords and query values in
their URLs, and the TCP token. The daemon remembers every one it learns in
``KNOWN``; ``redact`` removes them, and the log formatter applies it to every line.

Removing exact copies is not enough: a provider can quote part of a key, and a
snippet cut from a body can cut a key in two. So any run of ``FRAGMENT`` (8) or more
characters of a secret is removed wherever it appears, and where sessiond cuts a text
itself (``clip``), a shorter piece of a secret left at the cut is removed too.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from urllib.parse import parse_qsl, urlsplit, urlunsplit

REDACTED = "[redacted]"
# Shorter "secrets" would blank out ordinary words; nobody's key is that short.
MIN_SECRET = 4
# Any run of this many characters of a secret counts as the secret.
FRAGMENT = 8
# Header values that are not credentials by nature: redacting them from summaries and
# errors would only remove dates and names ("anthropic-version: 2023-06-01").
PUBLIC_HEADERS = frozenset(
    {
        "accept",
        "anthropic-beta",
        "anthropic-version",
        "content-type",
        "http-referer",
        "openai-beta",
        "referer",
        "user-agent",
        "x-title",
    }
)


class SecretSet:
    """Secrets, with every ``FRAGMENT``-character run of each indexed for ``redact``."""

    def __init__(self, values: Iterable[str | None] = ()) -> None:
        self._values: set[str] = set()
        self._fragments: set[str] = set()
        self.add(*values)

    def add(self, *values: str | None) -> None:
        for value in values:
            if value is None or len(value) < MIN_SECRET or value in self._values:
                continue
            self._values.add(value)
            self._fragments.update(
                value[i : i + FRAGMENT] for i in range(len(value) - FRAGMENT + 1)
            )

    def __bool__(self) -> bool:
        return bool(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def values(self) -> frozenset[str]:
        return frozenset(self._values)

    def with_(self, extra: Iterable[str | None]) -> SecretSet:
        """These secrets and ``extra`` (self when ``extra`` adds nothing)."""
        new = [v for v in extra if v is not None and len(v) >= MIN_SECRET and v not in self._values]
        if not new:
            return self
        combined = SecretSet(self._values)
        combined.add(*new)
        return combined

    def redact(self, text: str) -> str:
        """``text`` with every secret, and every run of 8+ characters of one, replaced."""
        if not self._values or not text:
            return text
        # Secrets too short to have fragments are matched whole.
        for value in self._values:
            if len(value) < FRAGMENT and value in text:
                text = text.replace(value, REDACTED)
        if not self._fragments or len(text) < FRAGMENT:
            return text
        spans: list[list[int]] = []
        for start in range(len(text) - FRAGMENT + 1):
            if text[start : start + FRAGMENT] in self._fragments:
                end = start + FRAGMENT
                if spans and start <= spans[-1][1]:
                    spans[-1][1] = end
                else:
                    spans.append([start, end])
        if not spans:
            return text
        pieces: list[str] = []
        last = 0
        for start, end in spans:
            pieces += [text[last:start], REDACTED]
            last = end
        pieces.append(text[last:])
        return "".join(pieces)

    def fragment_at_edge(self, text: str, *, at_end: bool) -> int:
        """The length (4 to 7) of a piece of a secret that ``text`` starts or ends with, or 0."""
        for size in range(min(FRAGMENT - 1, len(text)), MIN_SECRET - 1, -1):
            piece = text[-size:] if at_end else text[:size]
            if any(piece in value for value in self._values):
                return size
        return 0


# Every secret this process has learned: configured keys and headers, the TCP token.
KNOWN = SecretSet()


def remember(*values: str | None) -> None:
    """Add secrets that must never be said again (logs, errors, summaries)."""
    KNOWN.add(*values)


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` without the known secrets and ``secrets``, whole or in 8+ character runs."""
    return KNOWN.with_(secrets).redact(text)


def clip(text: str, limit: int, secrets: Iterable[str | None] = ()) -> str:
    """At most ``limit`` characters of ``text``, redacted before it is cut (so that a
    secret the cut would halve is still recognised) and again at the cut (so that no
    shorter piece of a secret is left where it was cut)."""
    known = KNOWN.with_(secrets)
    # Only what can reach the cut is redacted: an 8 MB error body would otherwise hold
    # the event loop for seconds. A secret that starts before the cut ends before
    # ``limit`` plus the longest secret.
    longest = max((len(value) for value in known.values()), default=0)
    cleaned = known.redact(text[: limit + longest])
    if len(cleaned) <= limit:
        return cleaned
    cut = cleaned[:limit]
    # Do not leave half of a redaction marker: finish it.
    marker = cut.rfind("[", max(0, limit - len(REDACTED)))
    if marker >= 0 and cleaned.startswith(REDACTED, marker):
        return cleaned[: marker + len(REDACTED)]
    size = known.fragment_at_edge(cut, at_end=True)
    return cut[:-size] + REDACTED if size else cut


_CREDENTIAL_NAME = re.compile(r"key|token|secret|sig|auth|pass|credential", re.IGNORECASE)
# A query value this long is treated as a credential whatever its name.
_LONG_VALUE = 20


def url_secrets(url: str | None) -> list[str]:
    """What in a URL may be a credential: the password (or a user name that stands for a
    token, given without a password), and query values named or shaped like keys; at
    least ``FRAGMENT`` characters long, as for headers."""
    if not url:
        return []
    try:
        parts = urlsplit(url)
        found = [parts.password]
        if parts.password is None and parts.username and len(parts.username) >= _LONG_VALUE:
            found.append(parts.username)
        found += [
            value
            for name, value in parse_qsl(parts.query)
            if _CREDENTIAL_NAME.search(name) or len(value) >= _LONG_VALUE
        ]
    except ValueError:
        return []
    return [value for value in found if value and len(value) >= FRAGMENT]


def redact_url(url: str) -> str:
    """``url`` with its user information and query values replaced by ``[redacted]``."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return REDACTED
    if parts.username is None and parts.password is None and not parts.query:
        return url
    netloc = parts.netloc
    if parts.username is not None or parts.password is not None:
        port = f":{parts.port}" if parts.port is not None else ""
        shown_host = f"[{host}]" if ":" in host else host
        netloc = f"{REDACTED}@{shown_host}{port}"
    query = parts.query
    if query:
        query = "&".join(
            f"{name}={REDACTED}" for name, _ in parse_qsl(query, keep_blank_values=True)
        )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def header_secrets(headers: dict[str, str]) -> list[str]:
    """The values of ``headers`` that may be credentials: all but the public ones and
    those shorter than ``FRAGMENT`` (no credential is that short, and a value such as
    ``prod`` would be redacted out of every summary)."""
    return [
        value
        for name, value in headers.items()
        if name.lower() not in PUBLIC_HEADERS and len(value) >= FRAGMENT
    ]


class RedactingFormatter(logging.Formatter):
    """Formats a log record, then removes every known secret from the whole line
    (message, arguments and traceback alike)."""

    def format(self, record: logging.LogRecord) -> str:
        return KNOWN.redact(super().format(record))
