"""Pruning old tool outputs of a session: appended ``context_edit`` entries (pi 1.6).

Each pruned output is replaced in the context by a notice through an edit appended
under the leaf, in one write. The file is never rewritten and the original outputs
stay in it: pi 1.6 reads the edits; an older pi that does not know ``context_edit``
sees the full outputs again.
"""

from __future__ import annotations

from sessiond.core.projected_path import ProjectedPath
from sessiond.core.pruning import PrunePlan, plan_pruning, pruning_edit
from sessiond.core.tokens import Estimator
from sessiond.store.path_access import StorePath
from sessiond.store.session import SessionStore


def prune_tool_outputs(store: SessionStore, estimator: Estimator) -> PrunePlan:
    """Prune old tool outputs in the current context if that saves enough (``core.pruning``)."""
    path = StorePath(store, store.path_records(), estimator)
    plan = plan_pruning(ProjectedPath(path, estimator))
    if not plan.empty:
        edits = store.append_entries([pruning_edit(candidate) for candidate in plan.candidates])
        plan.edit_ids = [edit.id for edit in edits]
    return plan
