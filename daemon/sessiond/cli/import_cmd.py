"""``sessiond import claude-code TRANSCRIPT -o SESSION``: another agent's transcript as a
pi session."""

from __future__ import annotations

import argparse
from pathlib import Path

from sessiond.store.transcripts import import_claude_code

from .common import plural


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = "Convert another agent's transcript into a new pi session file (v3)."
    formats = parser.add_subparsers(title="formats", metavar="FORMAT", required=True)
    claude = formats.add_parser(
        "claude-code",
        help="a Claude Code transcript (~/.claude/projects/.../SESSION.jsonl, or .jsonl.gz)",
        description=(
            "Convert a Claude Code transcript: the main conversation in file order (sub-agent "
            "records are skipped), one assistant message per model answer with its tool "
            "results paired by id (by order where ids were redacted), thinking kept, and each "
            "compaction as a compaction entry holding the model's summary."
        ),
    )
    claude.add_argument("transcript", type=Path, help="the transcript (.jsonl or .jsonl.gz)")
    claude.add_argument(
        "-o", "--output", type=Path, required=True, help="the session file to write (.jsonl)"
    )
    claude.add_argument("--force", action="store_true", help="replace the output file if it exists")
    claude.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    stats = import_claude_code(args.transcript, args.output, overwrite=args.force)
    details = [plural(stats.tool_calls, "tool call"), plural(stats.compactions, "compaction")]
    print(f"Wrote {args.output}: {plural(stats.messages, 'message')} ({', '.join(details)})")
    skipped: list[str] = []
    if stats.sidechain_records:
        skipped.append(f"{plural(stats.sidechain_records, 'sub-agent record')} skipped")
    if stats.unpaired_results:
        skipped.append(f"{plural(stats.unpaired_results, 'tool result')} without a call left out")
    if stats.paired_by_order:
        skipped.append(f"{plural(stats.paired_by_order, 'tool result')} paired by order")
    if skipped:
        print("; ".join(skipped))
    return 0
