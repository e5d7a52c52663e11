"""How close the offline summary comes to a model's summary of the same span (issue 16).

For every compaction in the corpus (``bench/summaries/corpus/``) the span it summarized
is rebuilt (from the previous compaction's first kept entry, or the start of the path,
up to its own first kept entry), serialized and put in the very prompt a model got, and
the extractive summarizer answers it. Compared with the model's summary stored in the
compaction entry:

- entities: the share of the model summary's named entities (backticked names and
  file paths) that the offline summary also names, anywhere in its text;
- length: the offline summary's characters over the model summary's.

Both are measured without the ``<read-files>``/``<modified-files>`` tags, which the
daemon appends to either summary alike. A corpus file is a pi session (``*.jsonl``) or a
prepared case (``*.json``: ``source``, the serialized conversation, and ``reference``,
the model's summary).

    python -m bench.summary_bench [--write]
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.generate_session import generate
from bench.readme import write_section
from sessiond.core.convert import convert_to_llm
from sessiond.core.decode import NotAnEntry, decode_entry
from sessiond.core.entries import CompactionEntry, Entry
from sessiond.core.projection import message_of_entry
from sessiond.core.serialize import serialize_conversation
from sessiond.core.summary_prompts import history_max_tokens, history_prompt
from sessiond.llm import CompletionRequest, extractive_summary
from sessiond.llm.extractive import clear_caches

CORPUS = Path(__file__).resolve().parent / "summaries" / "corpus"
# The project's own sample session: hand-written, so reported apart from the corpus.
SAMPLE = Path(__file__).resolve().parent.parent / "examples" / "sample-session.jsonl"
_FILE_TAGS = re.compile(r"\s*<(read-files|modified-files)>.*?</\1>", re.DOTALL)
_BACKTICKED = re.compile(r"`([^`\n]+)`")
_PATH = re.compile(r"(?<![\w/.@-])(?:~|\.{1,2})?/?(?:[\w@.-]+/)+[\w@.-]*\w|\b[\w-]+\.[a-z]{1,5}\b")
_EXTENSIONS = re.compile(r"\.(py|ts|tsx|js|mjs|json|jsonl|md|toml|yaml|yml|rs|go|sh|txt|css|html)$")
_MAX_TOKENS = history_max_tokens(16384)


@dataclass
class Case:
    name: str
    prompt: str
    reference: str
    purpose: str


@dataclass
class Result:
    name: str
    entities: int
    found: int
    reference_chars: int
    offline_chars: int
    seconds: float

    @property
    def share(self) -> float:
        return self.found / self.entities if self.entities else 1.0

    @property
    def ratio(self) -> float:
        return self.offline_chars / self.reference_chars


def entities(summary: str) -> list[str]:
    """The named entities of a summary: backticked names and file paths, each once."""
    found: dict[str, None] = {}
    for name in _BACKTICKED.findall(summary):
        found.setdefault(name.strip(), None)
    for match in _PATH.finditer(_BACKTICKED.sub(" ", summary)):
        text = match.group(0).rstrip(".")
        if "/" in text or _EXTENSIONS.search(text):
            found.setdefault(text, None)
    return [name for name in found if len(name) > 1]


def session_cases(path: Path) -> list[Case]:
    entries: dict[str, Entry] = {}
    order: list[Entry] = []
    for line in path.read_bytes().splitlines():
        if not line.strip():
            continue
        try:
            entry = decode_entry(line)
        except NotAnEntry:
            continue
        entries[entry.id] = entry
        order.append(entry)
    cases: list[Case] = []
    for entry in order:
        if isinstance(entry, CompactionEntry) and not entry.made_by_extension:
            cases.append(_compaction_case(path.stem, entries, entry, len(cases) + 1))
    return cases


def _compaction_case(
    stem: str, entries: dict[str, Entry], compaction: CompactionEntry, number: int
) -> Case:
    branch: list[Entry] = []
    current: str | None = compaction.parent_id
    while current is not None and current in entries:
        branch.append(entries[current])
        current = entries[current].parent_id
    branch.reverse()
    ids = [entry.id for entry in branch]
    previous = next((e for e in reversed(branch) if isinstance(e, CompactionEntry)), None)
    start = 0
    if previous is not None:
        start = ids.index(previous.first_kept_entry_id)
    end = ids.index(compaction.first_kept_entry_id)
    messages = [m for e in branch[start:end] if (m := message_of_entry(e)) is not None]
    conversation = serialize_conversation(convert_to_llm(messages))
    previous_summary = previous.summary if previous is not None else None
    return Case(
        name=f"{stem} #{number}",
        prompt=history_prompt(conversation, previous_summary),
        reference=compaction.summary,
        purpose="update" if previous_summary else "history",
    )


def prepared_case(path: Path) -> Case:
    data = json.loads(path.read_text())
    return Case(
        name=path.stem,
        prompt=history_prompt(data["source"], None),
        reference=data["reference"],
        purpose="history",
    )


def measure(case: Case) -> Result:
    request = CompletionRequest(
        system_prompt="", prompt=case.prompt, max_tokens=_MAX_TOKENS, purpose=case.purpose
    )
    started = time.perf_counter()
    offline = extractive_summary(request)
    seconds = time.perf_counter() - started
    reference = _FILE_TAGS.sub("", case.reference).strip()
    wanted = entities(reference)
    return Result(
        name=case.name,
        entities=len(wanted),
        found=sum(1 for name in wanted if name in offline),
        reference_chars=len(reference),
        offline_chars=len(offline),
        seconds=seconds,
    )


def corpus_cases() -> list[Case]:
    cases: list[Case] = []
    for path in sorted(CORPUS.iterdir()):
        if path.suffix == ".jsonl":
            cases += session_cases(path)
        elif path.suffix == ".json":
            cases.append(prepared_case(path))
    return cases


def table(results: list[Result]) -> str:
    rows = [
        "| span | entities named | share | model chars | offline chars | length ratio | time |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        rows.append(
            f"| {r.name} | {r.found} / {r.entities} | {r.share:.0%} | {r.reference_chars:,} "
            f"| {r.offline_chars:,} | {r.ratio:.2f}x | {r.seconds * 1000:.1f} ms |"
        )
    share = sum(r.share for r in results) / len(results)
    ratio = sum(r.ratio for r in results) / len(results)
    rows.append(f"| **mean** | | **{share:.0%}** | | | **{ratio:.2f}x** | |")
    return "\n".join(rows)


def speed(tokens: int = 100_000, runs: int = 5) -> tuple[int, float, float]:
    """The extractive summary of a generated span of about ``tokens`` tokens (4 characters
    a token, as the daemon estimates): its size in characters and the best and median time
    of ``runs`` runs, each in a fresh process state (the caches are cleared)."""
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "speed.jsonl"
        generate(path, entries=2_000, seed=7)
        case = session_span(path)
    conversation = case[: tokens * 4]
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
    parser.add_argument("--write", action="store_true", help="update bench/README.md")
    args = parser.parse_args()
    results = [measure(case) for case in [*session_cases(SAMPLE), *corpus_cases()]]
    chars, best, median = speed()
    body = (
        table(results)
        + f"\n\nSpeed: a generated span of {chars:,} characters (about {chars // 4:,} tokens)"
        f" is summarized in {best * 1000:.0f} ms (median of 5: {median * 1000:.0f} ms)."
    )
    print(body)
    if args.write:
        write_section("summary-bench", "python -m bench.summary_bench --write", body)


if __name__ == "__main__":
    main()
