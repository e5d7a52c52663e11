"""``sessiond schema``: write or check protocol/schema.json."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = "Generate the JSON Schema of the protocol from the Python wire types."
    parser.add_argument("--output", type=Path, help="write it to this file instead of stdout")
    parser.add_argument(
        "--check",
        type=Path,
        metavar="FILE",
        help="exit 1 if FILE differs from the generated schema (for CI)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from sessiond.api.schema import schema_json

    data = schema_json()
    if args.check is not None:
        current = args.check.read_bytes() if args.check.exists() else b""
        if current != data:
            print(
                f"sessiond: {args.check} is stale; regenerate it with "
                f"`sessiond schema --output {args.check}`",
                file=sys.stderr,
            )
            return 1
        return 0
    if args.output is not None:
        args.output.write_bytes(data)
        return 0
    sys.stdout.buffer.write(data)
    return 0
