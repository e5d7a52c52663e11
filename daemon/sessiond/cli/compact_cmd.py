"""``sessiond compact FILE``: compact a session offline, or show what would be compacted."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

import msgspec

from sessiond.core.describe import shorten
from sessiond.core.inert import inert
from sessiond.core.preparation import CompactionPreparation, NotCompactable
from sessiond.store.session import SessionStore

from .common import (
    add_settings_arguments,
    effective_settings,
    plural,
    write_control,
    write_json,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Compact the session at its leaf (the last line), as pi's /compact does: pick the "
        "cut, summarize what is before it, append a compaction entry. Uses the summarizers "
        "of your settings; with none configured, the offline extractive summarizer."
    )
    parser.add_argument("file", help="a session .jsonl file")
    parser.add_argument("--instructions", help="what the summary should focus on")
    parser.add_argument(
        "--dry-run", action="store_true", help="show the preparation; call no model, write nothing"
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    add_settings_arguments(parser)
    parser.set_defaults(handler=run)


def preparation_json(preparation: CompactionPreparation) -> dict[str, Any]:
    read_files, modified_files = preparation.file_ops.lists()
    return {
        "firstKeptEntryId": preparation.first_kept_entry_id,
        "isSplitTurn": preparation.is_split_turn,
        "tokensBefore": preparation.tokens_before,
        "previousSummary": preparation.previous_summary,
        "summarizeEntryIds": preparation.summarize_entry_ids,
        "turnPrefixEntryIds": preparation.turn_prefix_entry_ids,
        "readFiles": read_files,
        "modifiedFiles": modified_files,
    }


def run(args: argparse.Namespace) -> int:
    from sessiond.service.compactor import Compactor, raise_not_compactable
    from sessiond.tiktoken_offline import estimator

    settings = effective_settings(args)
    with SessionStore.open(args.file, readonly=args.dry_run, storage=settings.storage) as store:
        compactor = Compactor(
            store, settings.compaction, estimator(settings.compaction.token_estimator)
        )
        preparation = compactor.prepare()
        if isinstance(preparation, NotCompactable):
            raise_not_compactable(preparation)
        assert isinstance(preparation, CompactionPreparation)
        if args.dry_run:
            if args.json:
                write_json(msgspec.json.encode(preparation_json(preparation)))
            else:
                print_plan(preparation)
            return 0
        outcome = asyncio.run(_compact(store, settings, args.instructions))
        entry = outcome.entry
        if args.json:
            write_json(store.raw_line(store.record(entry.id)))
            return 0
        print(
            f"Compacted: entry {entry.id}, kept from {entry.first_kept_entry_id}, "
            f"{entry.tokens_before:,} -> {outcome.tokens_after:,} tokens"
        )
        print()
        print(entry.summary)
    return 0


async def _compact(store: SessionStore, settings: Any, instructions: str | None) -> Any:
    """The daemon's ``compaction/run``, on a session this process holds alone."""
    from sessiond.llm.base import Progress
    from sessiond.service.compaction_requests import (
        CompactionRequest,
        OfflineSession,
        compact_on_request,
    )
    from sessiond.service.hooks import NoHooks
    from sessiond.service.summarizer_setup import summary_context

    interactive = sys.stderr.isatty()

    def progress(update: Progress) -> None:
        if interactive:
            line = f"summarizing with {update.model}: {update.chars:,} characters"
            write_control("\r" + inert(line), sys.stderr)

    request = CompactionRequest(
        session=OfflineSession(store),
        settings=settings,
        hooks=NoHooks(),
        summaries=lambda: summary_context(settings, mode="manual", progress=progress),
        emit=lambda event: None,
        end_progress=lambda: None,
    )
    if interactive:
        print("compacting...", end="", file=sys.stderr, flush=True)
    try:
        return await compact_on_request(
            request,
            custom_instructions=instructions,
            supplied_summary=None,
            expected_first_kept_id=None,
        )
    finally:
        if interactive:
            write_control("\r\x1b[K", sys.stderr)


def print_plan(preparation: CompactionPreparation) -> None:
    read_files, modified_files = preparation.file_ops.lists()
    split = (
        " (a split turn: its start is summarized separately)" if preparation.is_split_turn else ""
    )
    print(f"Cut at {preparation.first_kept_entry_id}{split}")
    print(f"Context now: {preparation.tokens_before:,} tokens")
    print(
        f"Summarize {plural(len(preparation.messages_to_summarize), 'message')}"
        + (
            f" and a turn prefix of {plural(len(preparation.turn_prefix_messages), 'message')}"
            if preparation.is_split_turn
            else ""
        )
        + f"; keep {plural(len(preparation.recent_messages), 'message')}"
        f" (keep budget {preparation.keep_recent_tokens:,} tokens)"
    )
    if preparation.previous_summary:
        print(f"Previous summary: {shorten(preparation.previous_summary, 70)}")
    if read_files:
        print("Read files: " + ", ".join(read_files))
    if modified_files:
        print("Modified files: " + ", ".join(modified_files))
