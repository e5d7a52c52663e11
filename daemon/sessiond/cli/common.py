"""What every subcommand shares: settings, opening sessions, printing, errors."""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from sessiond.core.inert import inert
from sessiond.errors import SessiondError
from sessiond.settings import Settings, load_settings, merge_settings, parse_assignments


def add_settings_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--set",
        dest="assignments",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting for this run, e.g. --set compaction.keepRecentTokens=8000",
    )
    parser.add_argument(
        "--settings", type=Path, default=None, help="settings file (default: the user's)"
    )


def effective_settings(args: argparse.Namespace) -> Settings:
    settings, warnings = load_settings(args.settings)
    for warning in warnings:
        print(f"sessiond: warning: {warning}", file=sys.stderr)
    overrides = parse_assignments(args.assignments)
    settings, _ = merge_settings(settings, overrides, strict=True, source="--set")
    return settings


def write_json(data: bytes) -> None:
    sys.stdout.buffer.write(data + b"\n")
    sys.stdout.flush()


class InertStream(io.TextIOBase):
    """A text stream through which whatever is printed arrives inert (``core.inert``).

    The commands print what session files hold (entries' text, names, a header's cwd,
    labels), and a file may hold terminal control sequences: an OSC 52 sequence writes
    the clipboard, ``ESC[2J`` clears the screen. Every subcommand but ``serve`` prints
    through one of these, so no text from a file reaches the terminal as control. The
    command line's own control (a bold heading, a progress line it clears) goes to
    ``raw`` through ``write_control``; JSON output goes to ``buffer``, escaped by JSON.
    """

    def __init__(self, raw: TextIO) -> None:
        super().__init__()
        self.raw = raw

    def write(self, text: str) -> int:
        self.raw.write(inert(text, keep_lines=True))
        return len(text)

    def flush(self) -> None:
        self.raw.flush()

    def isatty(self) -> bool:
        return self.raw.isatty()

    def fileno(self) -> int:
        return self.raw.fileno()

    @property
    def buffer(self) -> Any:
        return self.raw.buffer


def write_control(text: str, stream: TextIO) -> None:
    """The command line's own terminal control, written as it is (see ``InertStream``)."""
    target = stream.raw if isinstance(stream, InertStream) else stream
    target.write(text)
    target.flush()


def run_command(handler: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a subcommand; sessiond's own errors become one line on stderr, never a traceback.
    What it prints arrives inert (``InertStream``), except for ``serve``, whose output is
    the protocol and its own log."""
    if getattr(args, "raw_output", False):
        return _run(handler, args)
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = InertStream(out), InertStream(err)
    try:
        return _run(handler, args)
    finally:
        sys.stdout, sys.stderr = out, err


def _run(handler: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    try:
        return handler(args)
    except SessiondError as exc:
        print(f"sessiond: error: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("sessiond: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:
        # A file the command was pointed at cannot be read or written (--output, ...).
        where = f"{exc.filename}: " if exc.filename is not None else ""
        print(f"sessiond: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 1


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"
