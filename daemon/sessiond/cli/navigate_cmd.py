"""``sessiond navigate`` and ``sessiond branch-plan``: moving around the session tree."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import msgspec

from sessiond.core.branch import collect_entries_for_branch_summary
from sessiond.errors import NotFoundError
from sessiond.store.session import SessionStore

from .common import add_settings_arguments, effective_settings, write_json


def add_navigate_arguments(navigate: argparse.ArgumentParser) -> None:
    navigate.description = (
        "Navigate from the leaf (the last line) to TARGET as pi's /tree does. With "
        "--summarize a branch summary of the abandoned entries is written at the new "
        "position. Without a summary or a label nothing is written, and since pi does not "
        "persist the leaf, the move only shows what would happen."
    )
    navigate.add_argument("file", help="a session .jsonl file")
    navigate.add_argument("target", help="the entry id to move to")
    navigate.add_argument("--summarize", action="store_true", help="summarize the branch left")
    navigate.add_argument("--instructions", help="extra focus for the summary")
    navigate.add_argument(
        "--replace-instructions",
        action="store_true",
        help="use --instructions instead of the default summary prompt",
    )
    navigate.add_argument("--label", help="label the summary (or the target)")
    navigate.add_argument(
        "--context-window", type=int, help="the model's window (the summary's budget)"
    )
    navigate.add_argument("--json", action="store_true", help="print JSON")
    add_settings_arguments(navigate)
    navigate.set_defaults(handler=run_navigate)


def add_plan_arguments(plan: argparse.ArgumentParser) -> None:
    plan.description = "Print {commonAncestorId, entryIds, newLeafId, editorText} for a navigation."
    plan.add_argument("file", help="a session .jsonl file")
    plan.add_argument("target", help="the entry id to move to")
    plan.add_argument("--json", action="store_true", help="print JSON (the default shape)")
    plan.set_defaults(handler=run_plan)


def branch_plan(store: SessionStore, target_id: str) -> dict[str, Any]:
    from sessiond.service.navigator import editor_text_for

    target = store.get_entry(target_id)
    if target is None:
        raise NotFoundError(f"Entry {target_id} not found", entryId=target_id)
    collection = collect_entries_for_branch_summary(store.path_records, store.leaf_id, target_id)
    editor_text = editor_text_for(target)
    return {
        "commonAncestorId": collection.common_ancestor_id,
        "entryIds": [record.id for record in collection.entries],
        "newLeafId": target.parent_id if editor_text is not None else target_id,
        "editorText": editor_text,
    }


def run_plan(args: argparse.Namespace) -> int:
    with SessionStore.open(args.file, readonly=True) as store:
        # JSON either way: the plan is for tools; --json is accepted for symmetry.
        write_json(msgspec.json.encode(branch_plan(store, args.target)))
    return 0


def run_navigate(args: argparse.Namespace) -> int:
    from sessiond.service.navigator import navigate_tree
    from sessiond.service.summarizer_setup import summary_context
    from sessiond.tiktoken_offline import estimator

    settings = effective_settings(args)
    writes = args.summarize or args.label
    with SessionStore.open(args.file, readonly=not writes, storage=settings.storage) as store:
        result = asyncio.run(
            navigate_tree(
                store,
                settings,
                estimator(settings.compaction.token_estimator),
                target_id=args.target,
                summaries=summary_context(settings, mode="manual") if args.summarize else None,
                summarize=args.summarize,
                custom_instructions=args.instructions,
                replace_instructions=args.replace_instructions,
                label=args.label,
                context_window=args.context_window,
            )
        )
        entry = result.summary_entry
        if args.json:
            write_json(
                msgspec.json.encode(
                    {
                        "cancelled": result.cancelled,
                        "leafId": result.leaf_id,
                        "editorText": result.editor_text,
                        "summaryEntry": msgspec.json.decode(store.raw_line(store.record(entry.id)))
                        if entry is not None
                        else None,
                    }
                )
            )
            return 0
        print(f"Leaf: {result.leaf_id or '(before the first entry)'}")
        if result.editor_text is not None:
            print(f"Text of the selected message, for editing:\n  {result.editor_text}")
        if entry is not None:
            print(f"Branch summary {entry.id} written at {entry.parent_id or 'the root'}:\n")
            print(entry.summary)
        elif not writes:
            print("(nothing written: without --summarize or --label the move is not persisted)")
    return 0
