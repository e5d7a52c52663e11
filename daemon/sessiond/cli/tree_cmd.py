"""``sessiond tree FILE``: the session's tree of entries."""

from __future__ import annotations

import argparse

import msgspec

from sessiond.store.session import SessionStore

from .common import write_json
from .render import tree_lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = "Print the tree of entries; '*' marks the active path."
    parser.add_argument("file", help="a session .jsonl file")
    parser.add_argument(
        "--json", action="store_true", help="print nodes, rootIds and leafId (as session/tree)"
    )
    parser.add_argument("--width", type=int, default=72, help="preview width (default 72)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    with SessionStore.open(args.file, readonly=True) as store:
        if args.json:
            from sessiond.api.tree_view import tree_result

            write_json(msgspec.json.encode(tree_result(store, previews=False)))
            return 0
        for line in tree_lines(store, args.width):
            print(line)
    return 0
