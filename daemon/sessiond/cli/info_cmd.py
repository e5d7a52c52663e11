"""``sessiond info FILE``: what the file holds and how healthy it is."""

from __future__ import annotations

import argparse
from collections import Counter

import msgspec

from sessiond.core.tokens import resolve_threshold_tokens, should_compact
from sessiond.store.session import SessionStore
from sessiond.tiktoken_offline import estimator
from sessiond.wire.recovery import RecoveryReport

from .common import add_settings_arguments, effective_settings, plural


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = "Summarize a session file without changing it."
    parser.add_argument("file", help="a session .jsonl file")
    parser.add_argument(
        "--context-window",
        type=int,
        default=None,
        help="the model's window, for the compaction threshold (default: the setting)",
    )
    add_settings_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    settings = effective_settings(args)
    window = args.context_window or settings.context.default_context_window
    with SessionStore.open(args.file, readonly=True, storage=settings.storage) as store:
        header = store.header
        counts = Counter(r.type for r in store.records())
        roles = Counter(r.role for r in store.records() if r.role)
        leaves = sum(1 for r in store.records() if not store.children_records(r.id))
        print(f"Session   {header.id}")
        print(f"File      {store.path}")
        print(f"Created   {header.timestamp}   cwd {header.cwd or '(none)'}")
        print(f"Agent     {store.dialect.name} (whose rules read this file)")
        if store.name:
            print(f"Name      {store.name}")
        if header.parent_session:
            print(f"Parent    {header.parent_session}")
        kinds = ", ".join(f"{kind} {n}" for kind, n in counts.most_common())
        print(f"Entries   {store.entry_count}  ({kinds or 'none'})")
        if roles:
            print("Messages  " + ", ".join(f"{role} {n}" for role, n in roles.most_common()))
        print(f"Branches  {leaves} {'leaf' if leaves == 1 else 'leaves'}")
        leaf = store.leaf_id
        print(f"Leaf      {leaf} ({store.record(leaf).type})" if leaf else "Leaf      (none)")
        context = store.build_context()
        name = settings.compaction.token_estimator
        estimate = store.leaf_view.estimate_context(estimator(name))
        threshold = resolve_threshold_tokens(window, settings.compaction)
        due = should_compact(estimate.tokens, window, settings.compaction)
        measured = (
            f"last usage {estimate.usage_tokens:,} + {estimate.trailing_tokens:,} estimated"
            if estimate.last_usage_index is not None
            else "all estimated"
        )
        print(
            f"Context   {plural(len(context.messages), 'message')}, {estimate.tokens:,} tokens "
            f"({measured}; {name})"
        )
        percent = 100 * estimate.tokens / window
        print(
            f"Window    {percent:.1f}% of {window:,}; compaction threshold {threshold:,}"
            f" -> {'compaction due' if due else 'no compaction needed'}"
        )
        print(f"Recovery  {describe_recovery(store.recovery)}")
    return 0


def describe_recovery(report: RecoveryReport) -> str:
    if report.clean:
        return "clean"
    parts: list[str] = []
    if report.torn_tail is not None:
        saved = report.torn_tail.saved_to or "not repaired (read-only)"
        parts.append(f"torn last line ({report.torn_tail.length} bytes; saved to {saved})")
    for damaged in report.damaged_lines:
        parts.append(f"line {damaged.line} damaged: {damaged.reason}")
    if report.invalid_utf8_lines:
        parts.append(f"invalid UTF-8 on lines {report.invalid_utf8_lines}")
    if report.duplicate_ids:
        parts.append(f"duplicate ids {report.duplicate_ids}")
    if report.unreadable_entries:
        parts.append(f"entries kept but not understood: {report.unreadable_entries}")
    if report.blank_lines:
        parts.append(plural(report.blank_lines, "blank line"))
    if report.missing_final_newline:
        parts.append("no newline after the last line")
    if report.migrated_from_version is not None:
        parts.append(f"format version {report.migrated_from_version} (migrates to 3 when opened)")
    if report.byte_order_mark:
        parts.append("starts with a byte-order mark")
    return "; ".join(parts) + "\n          " + msgspec.json.encode(report).decode()
