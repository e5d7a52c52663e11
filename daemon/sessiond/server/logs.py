"""Logging for the daemon: stderr or a file, never stdout (stdout is the protocol in stdio mode).

Messages that repeat are rate-limited: of each kind (the same logger, level and message
template) the first ``REPEAT_BURST`` per ``REPEAT_WINDOW_SECONDS`` are written, the rest
counted and reported with the next one written. A peer sending junk, or a crowd of
strangers knocking, costs the log a few lines a minute, not megabytes an hour. DEBUG
records, asked for explicitly, are never held back.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sessiond.server.startup import OptionError

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
REPEAT_BURST = 20
REPEAT_WINDOW_SECONDS = 60.0
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
    handler.setFormatter(logging.Formatter(_FORMAT))
    handler.addFilter(RepeatFilter())
    logger = logging.getLogger("sessiond")
    for old in list(logger.handlers):
        logger.removeHandler(old)
    logger.addHandler(handler)
    logger.setLevel(level.upper() if isinstance(level, str) else level)
    logger.propagate = False


@dataclass(slots=True)
class _Window:
    start: float
    written: int = 0
    held_back: int = 0


class RepeatFilter(logging.Filter):
    """Writes at most ``burst`` records of a kind per ``window`` seconds."""

    def __init__(
        self,
        burst: int = REPEAT_BURST,
        window: float = REPEAT_WINDOW_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self._burst = burst
        self._window = window
        self._clock = clock
        self._kinds: dict[tuple[str, int, str], _Window] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.INFO:
            return True
        template = record.msg if isinstance(record.msg, str) else repr(type(record.msg))
        kind = (record.name, record.levelno, template)
        now = self._clock()
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

    def _forget_old(self, now: float) -> None:
        stale = [kind for kind, w in self._kinds.items() if now - w.start >= self._window]
        for kind in stale or list(self._kinds)[: _MAX_KINDS // 2]:
            del self._kinds[kind]


def _append(record: logging.LogRecord, note: str) -> None:
    # Added to the message after formatting, so a note cannot disturb the %-arguments.
    record.msg = record.getMessage() + note
    record.args = None
