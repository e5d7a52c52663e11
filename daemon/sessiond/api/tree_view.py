"""The session tree as the protocol's nodes (``session/tree``, ``sessiond tree --json``)."""

from __future__ import annotations

from sessiond.core.describe import describe_entry
from sessiond.store.session import SessionStore

from .types import TreeNode, TreeResult


def tree_result(store: SessionStore, *, previews: bool) -> TreeResult:
    """Every entry once, depth first; children in pi's order (by timestamp)."""
    active = {record.id for record in store.leaf_view.path}
    nodes: list[TreeNode] = []
    roots = store.get_tree()
    stack = list(reversed(roots))
    while stack:
        node = stack.pop()
        record = node.record
        nodes.append(
            TreeNode(
                id=record.id,
                parent_id=record.parent_id,
                type=record.type,
                timestamp=record.timestamp,
                children=[child.record.id for child in node.children],
                role=record.role,
                label=node.label,
                label_timestamp=store.label_timestamp(record.id) if node.label else None,
                preview=describe_entry(store.entry_of(record), 100) if previews else None,
                active=record.id in active,
            )
        )
        stack.extend(reversed(node.children))
    return TreeResult(
        nodes=nodes, root_ids=[node.record.id for node in roots], leaf_id=store.leaf_id
    )
