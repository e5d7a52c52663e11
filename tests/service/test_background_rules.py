"""The arithmetic of background compaction's cut and of the no-loop pause."""

from __future__ import annotations

from sessiond.service.background import background_keep
from sessiond.service.loop_rule import CompactionsLeft


def test_the_background_cut_keeps_what_the_threshold_will_have_kept() -> None:
    # 13,000 tokens still to grow before the threshold: they will be kept too.
    assert background_keep(20_000, 30_000, 43_000) == 7_000
    # At the threshold already, nothing is expected to grow.
    assert background_keep(20_000, 43_000, 43_000) == 20_000
    # Far below it, a quarter of keepRecentTokens is kept at least.
    assert background_keep(20_000, 10_000, 43_000) == 5_000


def test_a_compaction_that_left_too_much_pauses_until_something_changes() -> None:
    left = CompactionsLeft()
    left.record("c1", tokens_after=1_500, keep_recent_tokens=2_000)
    pause = left.pause("c1", threshold=1_000, keep_recent_tokens=2_000)
    assert pause is not None and pause.first and "1500 tokens" in pause.message
    left.announced("c1")
    again = left.pause("c1", threshold=1_000, keep_recent_tokens=2_000)
    assert again is not None and not again.first
    # A larger window (a higher threshold), a lower keepRecentTokens, another compaction.
    assert left.pause("c1", threshold=2_000, keep_recent_tokens=2_000) is None
    assert left.pause("c1", threshold=1_000, keep_recent_tokens=500) is None
    assert left.pause("c2", threshold=1_000, keep_recent_tokens=2_000) is None
    assert left.pause(None, threshold=1_000, keep_recent_tokens=2_000) is None


def test_only_the_newest_compactions_are_remembered() -> None:
    left = CompactionsLeft()
    for number in range(20):
        left.record(f"c{number}", tokens_after=5_000, keep_recent_tokens=100)
    assert left.pause("c0", threshold=1_000, keep_recent_tokens=100) is None
    assert left.pause("c19", threshold=1_000, keep_recent_tokens=100) is not None
