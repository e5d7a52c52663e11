"""The session tree as text for the terminal."""

from __future__ import annotations

from sessiond.core.describe import describe_entry
from sessiond.store.session import SessionStore, TreeNode


def tree_lines(store: SessionStore, width: int = 72) -> list[str]:
    """The tree as text: linear runs stay in one column, branches get connectors.

    ``*`` marks the active path (root to leaf), ``o`` the other branches.
    """
    active = {record.id for record in store.path_records()}
    leaf = store.leaf_id
    lines: list[str] = []
    stack: list[tuple[TreeNode, str, str]] = []

    def push(children: list[TreeNode], prefix: str) -> None:
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

    push(store.get_tree(), "")
    while stack:
        node, first, rest = stack.pop()
        record = node.record
        marker = "*" if record.id in active else "o"
        text = describe_entry(store.entry_of(record), width)
        suffix = f"  [{node.label}]" if node.label else ""
        if record.id == leaf:
            suffix += "  <- leaf"
        lines.append(f"{first}{marker} {record.id} {text}{suffix}")
        push(node.children, rest)
    return lines
