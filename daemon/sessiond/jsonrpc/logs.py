"""Logging for the daemon: stderr or a file, never stdout (stdout is the protocol in stdio mode).

Each record is one inert line with known secrets removed (``DaemonLogFormatter``), so
that words a client or a file put in a message cannot forge a line or drive a terminal;
repeated and high-volume records are held back and counted (``RepeatFilter``), so that
junk costs the log a few lines a minute.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sessiond.core.inert import inert
from sessiond.jsonrpc.startup_errors import OptionError
from sessiond.redaction import RedactingFormatter, clip

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
REPEAT_BURST = 20
REPEAT_WINDOW_SECONDS = 60.0
# The longest message a line carries; the rest is cut (and said to be).
MAX_MESSAGE_CHARS = 2000
# INFO and WARNING messages written per window, all kinds together.
WINDOW_BYTES = 256 * 1024
# Kinds remembered at most (messages built without a template are each their own kind).
_MAX_KINDS = 1000


def configure_logging(level: str | int = "INFO", log_file: Path | None = None) -> None:
    """Send the ``sessiond`` loggers to ``log_file`` (appended) or to stderr.

    Raises ``OptionError`` when the log file cannot be opened.
    """
    handler: logging.Handler
    if log_file is not None:
        try:
            # Created private whatever the umask (it names the user's sessions); an
            # existing file, or a FIFO or device the user chose, is used as it is.
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
            os.close(os.open(log_file, flags, 0o600))
            handler = logging.FileHandler(log_file, encoding="utf-8")
        except OSError as exc:
            raise OptionError(f"cannot open log file {log_file}: {exc.strerror}") from exc
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(DaemonLogFormatter(_FORMAT))
    handler.addFilter(RepeatFilter())
    logger = logging.getLogger("sessiond")
    for old in list(logger.handlers):
        logger.removeHandler(old)
    logger.addHandler(handler)
    logger.setLevel(level.upper() if isinstance(level, str) else level)
    logger.propagate = False


class DaemonLogFormatter(RedactingFormatter):
    """One line per record, whatever the message holds (see the module's docstring)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = one_line(record.message)
        return super().formatMessage(record)

    def formatException(self, ei: Any) -> str:
        return _indented(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return _indented(super().formatStack(stack_info))


def one_line(message: str) -> str:
    """A log message as one inert line of at most ``MAX_MESSAGE_CHARS`` (secrets removed
    before the cut, so that none is left half-cut)."""
    extra = len(message) - MAX_MESSAGE_CHARS
    shown = inert(clip(message, MAX_MESSAGE_CHARS) if extra > 0 else message)
    return shown + (f" [{extra} more characters]" if extra > 0 else "")


def _indented(text: str) -> str:
    """A traceback under its record: every line indented, so none reads as a record."""
    return "\n".join("    " + inert(line) for line in text.splitlines())


@dataclass(slots=True)
class _Window:
    start: float
    written: int = 0
    held_back: int = 0


class RepeatFilter(logging.Filter):
    """Writes at most ``burst`` records of a kind per ``window`` seconds, and at most
    ``window_bytes`` of INFO and WARNING messages per window in all."""

    def __init__(
        self,
        burst: int = REPEAT_BURST,
        window: float = REPEAT_WINDOW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        window_bytes: int = WINDOW_BYTES,
    ) -> None:
        super().__init__()
        self._burst = burst
        self._window = window
        self._clock = clock
        self._kinds: dict[tuple[str, int, str], _Window] = {}
        self._bytes = _Window(clock())
        self._window_bytes = window_bytes

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.INFO:
            return True
        now = self._clock()
        if record.levelno < logging.ERROR and not self._within_bytes(record, now):
            return False
        template = record.msg if isinstance(record.msg, str) else repr(type(record.msg))
        # The kind is the template, at most as long as a written message: a template
        # built from a client's words must not make a key of megabytes.
        kind = (record.name, record.levelno, template[:MAX_MESSAGE_CHARS])
        window = self._kinds.get(kind)
        if window is None or now - window.start >= self._window:
            held_back = window.held_back if window is not None else 0
            if window is None and len(self._kinds) >= _MAX_KINDS:
                self._forget_old(now)
            window = self._kinds[kind] = _Window(now)
            if held_back:
                _append(record, f" [{held_back} similar messages suppressed before this one]")
        if window.written >= self._burst:
            window.held_back += 1
            return False
        window.written += 1
        if window.written == self._burst:
            _append(
                record,
                f" [repeated {self._burst} times; similar messages are suppressed for up to"
                f" {self._window:g} s]",
            )
        return True

    def _within_bytes(self, record: logging.LogRecord, now: float) -> bool:
        budget = self._bytes
        if now - budget.start >= self._window:
            held_back = budget.held_back
            budget = self._bytes = _Window(now)
            if held_back:
                _append(record, f" [{held_back} messages suppressed before this one: log volume]")
        size = min(len(record.getMessage()), MAX_MESSAGE_CHARS)
        if budget.written + size > self._window_bytes:
            budget.held_back += 1
            return False
        budget.written += size
        return True

    def _forget_old(self, now: float) -> None:
        stale = [kind for kind, w in self._kinds.items() if now - w.start >= self._window]
        for kind in stale or list(self._kinds)[: _MAX_KINDS // 2]:
            del self._kinds[kind]


def _append(record: logging.LogRecord, note: str) -> None:
    # Added to the message after formatting, so a note cannot disturb the %-arguments.
    record.msg = record.getMessage() + note
    record.args = None
