"""What every subcommand shares: settings, opening sessions, printing, errors."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def run_command(handler: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a subcommand; sessiond's own errors become one line on stderr, never a traceback."""
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


def json_default(value: Any) -> Any:
    raise TypeError(f"cannot encode {type(value).__name__}")
