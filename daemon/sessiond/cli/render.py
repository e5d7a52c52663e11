"""The session tree as text for the terminal.

Linear runs stay in one column; a node with several children gets connectors.
``*`` marks the active path (root to leaf), ``o`` the other branches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sessiond.core.describe import describe_entry
from sessiond.store.session import SessionStore


@dataclass(frozen=True)
class PictureNode:
    id: str
    text: str
    children: Sequence[str]
    active: bool
    label: str | None = None


def picture(
    nodes: Mapping[str, PictureNode], root_ids: Sequence[str], leaf_id: str | None
) -> list[str]:
    lines: list[str] = []
    stack: list[tuple[str, str, str]] = []

    def push(children: Sequence[str], prefix: str) -> None:
        if len(children) == 1:
            stack.append((children[0], prefix, prefix))
            return
        for index in range(len(children) - 1, -1, -1):
            last = index == len(children) - 1
            stack.append(
                (
                    children[index],
                    prefix + ("\u2514\u2500 " if last else "\u251c\u2500 "),
                    prefix + ("   " if last else "\u2502  "),
                )
            )

    push(root_ids, "")
    while stack:
        node_id, first, rest = stack.pop()
        node = nodes[node_id]
        suffix = f"  [{node.label}]" if node.label else ""
        if node.id == leaf_id:
            suffix += "  <- leaf"
        lines.append(f"{first}{'*' if node.active else 'o'} {node.id} {node.text}{suffix}")
        push(node.children, rest)
    return lines


def tree_lines(store: SessionStore, width: int = 72) -> list[str]:
    active = {record.id for record in store.leaf_view.path}
    nodes: dict[str, PictureNode] = {}
    roots = store.get_tree()
    stack = list(roots)
    while stack:
        node = stack.pop()
        record = node.record
        nodes[record.id] = PictureNode(
            id=record.id,
            text=describe_entry(store.entry_of(record), width),
            children=[child.record.id for child in node.children],
            active=record.id in active,
            label=node.label,
        )
        stack.extend(node.children)
    return picture(nodes, [root.record.id for root in roots], store.leaf_id)
