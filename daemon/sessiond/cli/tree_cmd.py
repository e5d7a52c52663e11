"""``sessiond tree FILE``: the session's tree of entries."""

from __future__ import annotations

import argparse
from typing import Any

import msgspec

from sessiond.store.session import SessionStore

from .common import write_json
from .render import tree_lines


class TreeNodeJson(msgspec.Struct, rename="camel", omit_defaults=True):
    id: str
    parent_id: str | None
    type: str
    timestamp: str
    children: list[str]
    role: str | None = None
    label: str | None = None
    label_timestamp: str | None = None


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "tree",
        help="print the session tree (branches, labels, compactions, active path)",
        description="Print the tree of entries; '*' marks the active path.",
    )
    parser.add_argument("file", help="a session .jsonl file")
    parser.add_argument("--json", action="store_true", help="print nodes, rootIds and leafId")
    parser.add_argument("--width", type=int, default=72, help="preview width (default 72)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    with SessionStore.open(args.file, readonly=True) as store:
        if args.json:
            write_json(msgspec.json.encode(tree_json(store)))
            return 0
        for line in tree_lines(store, args.width):
            print(line)
    return 0


def tree_json(store: SessionStore) -> dict[str, Any]:
    nodes: list[TreeNodeJson] = []
    stack = list(reversed(store.get_tree()))
    roots = [node.record.id for node in reversed(stack)]
    while stack:
        node = stack.pop()
        record = node.record
        nodes.append(
            TreeNodeJson(
                id=record.id,
                parent_id=record.parent_id,
                type=record.type,
                timestamp=record.timestamp,
                children=[child.record.id for child in node.children],
                role=record.role,
                label=node.label,
                label_timestamp=store.label_timestamp(record.id) if node.label else None,
            )
        )
        stack.extend(reversed(node.children))
    return {"nodes": nodes, "rootIds": roots, "leafId": store.leaf_id}
