"""How the offline summary of a real session compares with the summary a model wrote.

The corpus is a directory of Claude Code transcripts (``*.jsonl`` or ``*.jsonl.gz``) in
one folder per source, optionally with a ``manifest.json`` of one row per compaction
(``folder``, ``file``, ``compaction``, ``status``; only rows with status ``ok`` are
measured, the others' spans are not whole in their file). Each transcript is read with
sessiond's importer (``sessiond import claude-code``). For each compaction the span it
summarized becomes a pi session of its own: the previous compaction (when there is one)
at its head, then the span's messages. That session is compacted exactly as
``sessiond compact --set compaction.keepRecentTokens=2000`` does (so that nearly the
whole span is summarized, as the model did), with the offline summarizer, and the
summary it writes (without the ``<read-files>``/``<modified-files>`` tags) is compared
with the model's (without Claude Code's fixed sentences around it):

- recall: the share of the model summary's entities (backticked names and file paths)
  that appear in the offline summary, under two rules: the original one (every
  backticked span and every path-shaped word with a slash or a common extension, found
  as written; the primary figure) and a refined one (plain words and word pairs such as
  "pause/resume" are not entities, ``f()`` is named by ``f``);
- length: offline characters over the model's;
- plain words: the share of the offline summary's backticked spans that are not names;
- cut-off items and first-person lines (Goal, Key Decisions, Done), counted;
- whether Done says "(none)".

These checks read the lines the offline summarizer wrote. Where the span has no history
before a split turn, the daemon carries the previous summary over unchanged, whoever
wrote it; that text is not the offline summarizer's, and its cut-off items are counted
in a column of their own.

A compaction that cannot be made (pi's "Nothing to compact") is reported, not skipped.
Folders named with ``--held-out`` are reported apart: rules were developed without them.

    python -m bench.summary_bench [CORPUS_DIR] [--held-out FOLDER ...] [--write]
    python -m bench.summary_bench CORPUS_DIR --show FOLDER/FILE#N   # both summaries
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from bench.readme import write_section
from bench.summary_metrics import (
    backticked,
    cut_off_items,
    done_is_empty,
    entities,
    first_person_lines,
    found,
    original_entities,
    original_found,
    plain_words,
)
from sessiond.core.convert import convert_to_llm
from sessiond.core.decode import NotAnEntry, decode_entry
from sessiond.core.encoding import to_json
from sessiond.core.entries import CompactionEntry, Entry
from sessiond.core.fileops import strip_file_tags
from sessiond.core.preparation import NotCompactable
from sessiond.core.projection import message_of_entry
from sessiond.core.serialize import serialize_conversation
from sessiond.core.summary_prompts import history_max_tokens, history_prompt
from sessiond.errors import SessiondError
from sessiond.llm import CompletionRequest, extractive_summary
from sessiond.llm.extractive import clear_caches
from sessiond.service.compactor import Compactor, raise_not_compactable
from sessiond.service.summarizer_setup import summary_context
from sessiond.settings import CompactionSettings, Settings, StorageSettings
from sessiond.store.claude_code import ClaudeCodeReader, ImportStats
from sessiond.store.session import SessionStore
from sessiond.store.transcripts import session_header, transcript_lines
from sessiond.tiktoken_offline import estimator
from sessiond_testkit.generate_session import generate

CORPUS = Path(__file__).resolve().parent / "summaries" / "corpus"
KEEP_RECENT_TOKENS = 2000
_MAX_TOKENS = history_max_tokens(16384)


@dataclass
class Case:
    folder: str
    file: str
    number: int
    entries: list[Entry]
    reference: str
    held_out: bool

    @property
    def name(self) -> str:
        return f"{self.folder}/{self.file} #{self.number}"


@dataclass
class Result:
    case: Case
    offline: str = ""
    failure: str | None = None
    seconds: float = 0.0
    # The text carried over unchanged from the previous summary, if any (not written).
    carried: str = ""
    wanted: list[str] = field(default_factory=list)
    found: list[str] = field(default_factory=list)
    original_wanted: list[str] = field(default_factory=list)
    original_found: list[str] = field(default_factory=list)
    spans: int = 0
    plain: list[str] = field(default_factory=list)
    cut_off: list[str] = field(default_factory=list)
    carried_cut_off: list[str] = field(default_factory=list)
    first_person: list[str] = field(default_factory=list)
    done_empty: bool = False

    @property
    def recall(self) -> float:
        """Under the refined rule."""
        return len(self.found) / len(self.wanted) if self.wanted else 1.0

    @property
    def original_recall(self) -> float:
        """Under the original rule (the primary figure)."""
        if not self.original_wanted:
            return 1.0
        return len(self.original_found) / len(self.original_wanted)

    @property
    def ratio(self) -> float:
        return len(self.offline) / max(1, len(self.case.reference))


def transcripts(corpus: Path) -> Iterator[tuple[str, Path]]:
    for folder in sorted(p for p in corpus.iterdir() if p.is_dir()):
        for path in sorted(folder.iterdir()):
            if path.name.endswith((".jsonl", ".jsonl.gz")):
                yield folder.name, path


def _measured_rows(corpus: Path) -> set[tuple[str, str, int]] | None:
    manifest = corpus / "manifest.json"
    if not manifest.exists():
        return None
    rows = json.loads(manifest.read_text())
    return {
        (row["folder"], row["file"], int(row["compaction"]))
        for row in rows
        if row.get("status", "ok") == "ok"
    }


def corpus_cases(corpus: Path, held_out: set[str]) -> list[Case]:
    wanted = _measured_rows(corpus)
    cases: list[Case] = []
    for folder, path in transcripts(corpus):
        entries = list(ClaudeCodeReader().entries(transcript_lines(path)))
        start = 0
        number = 0
        for index, entry in enumerate(entries):
            if not isinstance(entry, CompactionEntry):
                continue
            number += 1
            span = entries[start:index]
            start = index
            if wanted is not None and (folder, path.name, number) not in wanted:
                continue
            if span and isinstance(span[0], CompactionEntry):
                span[0] = msgspec.structs.replace(span[0], parent_id=None)
            cases.append(Case(folder, path.name, number, span, entry.summary, folder in held_out))
    return cases


def compact_offline(entries: list[Entry], directory: Path) -> tuple[str, str]:
    """The summary ``sessiond compact`` writes for this session with the offline summarizer
    (default settings, nothing read from the user's; no persistent index is left behind),
    and the part of it carried over unchanged from the previous summary ("" if none)."""
    path = directory / "span.jsonl"
    stats = ImportStats(first_timestamp=entries[0].timestamp if entries else None)
    lines = [to_json(session_header(stats)), *(to_json(entry) for entry in entries)]
    path.write_bytes(b"\n".join(lines) + b"\n")
    settings = Settings(
        compaction=CompactionSettings(keep_recent_tokens=KEEP_RECENT_TOKENS),
        storage=StorageSettings(persistent_index=False),
    )
    with SessionStore.open(path, storage=settings.storage) as store:
        compactor = Compactor(
            store, settings.compaction, estimator(settings.compaction.token_estimator)
        )
        preparation = compactor.prepare()
        if isinstance(preparation, NotCompactable):
            raise_not_compactable(preparation)
        outcome = asyncio.run(compactor.run(summary_context(settings, mode="manual")))
        summary = strip_file_tags(outcome.entry.summary).strip()
        previous = preparation.previous_summary
        carried = ""
        if previous and not preparation.messages_to_summarize:
            # No history before the cut: the daemon keeps the previous summary as it is.
            carried = strip_file_tags(previous).strip()
        return summary, carried if summary.startswith(carried) else ""


def measure(case: Case) -> Result:
    result = Result(case)
    with tempfile.TemporaryDirectory() as directory:
        started = time.perf_counter()
        try:
            result.offline, result.carried = compact_offline(case.entries, Path(directory))
        except SessiondError as exc:
            result.failure = exc.message
            return result
        result.seconds = time.perf_counter() - started
    result.wanted = entities(case.reference)
    result.found = [name for name in result.wanted if found(name, result.offline)]
    result.original_wanted = original_entities(case.reference)
    result.original_found = [
        name for name in result.original_wanted if original_found(name, result.offline)
    ]
    written = result.offline[len(result.carried) :]
    result.spans = len(set(backticked(written)))
    result.plain = sorted(set(plain_words(written)))
    result.cut_off = cut_off_items(written)
    result.carried_cut_off = cut_off_items(result.carried)
    result.first_person = first_person_lines(written)
    result.done_empty = done_is_empty(written)
    return result


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def table(results: list[Result]) -> str:
    rows = [
        "| compaction | entities named | recall | recall (refined) | model chars "
        "| offline chars | length | plain words | cut-off items | carried cut-off "
        "| first person | Done empty | time |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in results:
        if r.failure is not None:
            rows.append(f"| {r.case.name} | failed: {r.failure} |" + " |" * 11)
            continue
        rows.append(
            f"| {r.case.name} | {len(r.original_found)} / {len(r.original_wanted)} "
            f"| {r.original_recall:.0%} | {r.recall:.0%} "
            f"| {len(r.case.reference):,} | {len(r.offline):,} | {r.ratio:.2f}x "
            f"| {len(r.plain)} / {r.spans} | {len(r.cut_off)} | {len(r.carried_cut_off)} "
            f"| {len(r.first_person)} | {'yes' if r.done_empty else 'no'} "
            f"| {r.seconds * 1000:.0f} ms |"
        )
    return "\n".join(rows)


def per_source(results: list[Result]) -> str:
    rows = [
        "| source | compactions | failed | recall (median) | recall (mean) "
        "| recall, refined (median) | length (median) | plain words | cut-off items "
        "| carried cut-off | first-person lines | Done empty |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    groups: dict[str, list[Result]] = {}
    for r in results:
        label = r.case.folder + (" (held out)" if r.case.held_out else "")
        groups.setdefault(label, []).append(r)
    development = [r for r in results if not r.case.held_out]
    held = [r for r in results if r.case.held_out]
    totals = [("**all**", results)]
    if held:
        totals = [("**developed on**", development), ("**held out**", held), *totals]
    for label, group in [*groups.items(), *totals]:
        rows.append(_summary_row(label, group))
    return "\n".join(rows)


def _summary_row(label: str, group: list[Result]) -> str:
    made = [r for r in group if r.failure is None]
    failed = len(group) - len(made)
    if not made:
        return f"| {label} | {len(group)} | {failed} |" + " |" * 9
    plain = sum(len(r.plain) for r in made)
    spans = sum(r.spans for r in made)
    return (
        f"| {label} | {len(group)} | {failed} "
        f"| {_median([r.original_recall for r in made]):.0%} "
        f"| {statistics.fmean(r.original_recall for r in made):.0%} "
        f"| {_median([r.recall for r in made]):.0%} "
        f"| {_median([r.ratio for r in made]):.2f}x "
        f"| {plain} / {spans} ({plain / max(1, spans):.0%}) "
        f"| {sum(len(r.cut_off) for r in made)} "
        f"| {sum(len(r.carried_cut_off) for r in made)} "
        f"| {sum(len(r.first_person) for r in made)} "
        f"| {sum(r.done_empty for r in made)} |"
    )


def speed(tokens: int = 100_000, runs: int = 5) -> tuple[int, float, float]:
    """The extractive summary of a generated span of about ``tokens`` tokens (4 characters
    a token, as the daemon estimates): its size in characters and the best and median time
    of ``runs`` runs, each in a fresh process state (the caches are cleared)."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "speed.jsonl"
        generate(path, entries=2_000, seed=7)
        conversation = session_span(path)[: tokens * 4]
    cut = conversation.rfind("\n\n[")
    prompt = history_prompt(conversation[:cut], None)
    request = CompletionRequest(
        system_prompt="", prompt=prompt, max_tokens=_MAX_TOKENS, purpose="history"
    )
    times: list[float] = []
    for _ in range(runs):
        clear_caches()
        started = time.perf_counter()
        extractive_summary(request)
        times.append(time.perf_counter() - started)
    times.sort()
    return len(conversation[:cut]), times[0], times[len(times) // 2]


def session_span(path: Path) -> str:
    """The serialized conversation of a whole session file's messages, in file order."""
    messages = []
    for line in path.read_bytes().splitlines():
        try:
            entry = decode_entry(line)
        except NotAnEntry:
            continue
        message = message_of_entry(entry)
        if message is not None:
            messages.append(message)
    return serialize_conversation(convert_to_llm(messages))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", nargs="?", type=Path, default=CORPUS, help="corpus directory")
    parser.add_argument(
        "--held-out",
        action="append",
        default=[],
        metavar="FOLDER",
        help="a source folder reported apart (not used to develop the rules)",
    )
    parser.add_argument("--show", metavar="FOLDER/FILE#N", help="print both summaries of one")
    parser.add_argument("--write", action="store_true", help="update bench/README.md")
    args = parser.parse_args()
    cases = corpus_cases(args.corpus, set(args.held_out))
    if args.show:
        case = next(c for c in cases if c.name.replace(" ", "") == args.show.replace(" ", ""))
        result = measure(case)
        print(result.failure or result.offline)
        print("\n======== the model's summary ========\n")
        print(case.reference)
        missed = [n for n in result.original_wanted if n not in result.original_found]
        print(f"\nmissed (original rule): {missed}")
        print(f"missed (refined rule): {[n for n in result.wanted if n not in result.found]}")
        return
    results = [measure(case) for case in cases]
    chars, best, median = speed()
    body = (
        per_source(results)
        + "\n\n"
        + table(results)
        + f"\n\nSpeed: a generated span of {chars:,} characters (about {chars // 4:,} tokens)"
        f" is summarized in {best * 1000:.0f} ms (median of 5: {median * 1000:.0f} ms)."
    )
    print(body)
    if args.write:
        held = "".join(f" --held-out {name}" for name in args.held_out)
        where = "" if args.corpus == CORPUS else " CORPUS_DIR"
        write_section("summary-bench", f"python -m bench.summary_bench{where}{held} --write", body)


if __name__ == "__main__":
    main()
