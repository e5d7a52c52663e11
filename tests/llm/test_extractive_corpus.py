"""The offline summary of real recorded sessions, compacted as ``sessiond compact`` does,
held to what the summary benchmark measures (bench/README.md, "The offline summary
against a model's"): no plain words in code font, no cut-off item, nobody speaking in
Goal, Key Decisions or Done, the work in Done, and most of the model's names at no more
than the model's length. The files are the benchmark's own corpus."""

from __future__ import annotations

import pytest

from bench.summary_bench import CORPUS, Case, corpus_cases, measure

CASES = corpus_cases(CORPUS, held_out=set())


def test_the_corpus_is_there() -> None:
    assert {case.folder for case in CASES} == {"claude-dual", "claude-napoli-matcha"}


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_a_real_span_summarized_offline(case: Case) -> None:
    result = measure(case)
    assert result.failure is None
    assert result.plain == [] and result.cut_off == [] and result.first_person == []
    assert result.carried_cut_off == []
    assert not result.done_empty
    # Measured at 77% and 80% of the model's names (the original rule; 81% and 83% under
    # the refined one) at 0.81 and 0.69 of its length; a drop below these floors is a
    # regression to look at, not noise (the summary is deterministic).
    assert result.original_recall >= 0.7
    assert result.recall >= 0.7
    assert 0.3 <= result.ratio <= 1.2
    assert "- [x] " in result.offline
