"""pi 0.73.1 itself reads the generated and sample sessions the way the generator intends.

Skipped (with the reason) when node or the pinned pi install (``npm ci`` in tests/parity) is
missing; see tests/parity/README.md.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from sessiond_testkit import pi_format as pf
from sessiond_testkit.generate_session import generate
from tests.parity.pi_reference import (
    PARITY_DIR,
    PiReferenceError,
    PiReferenceUnavailable,
    run_pi_reference,
    unavailable_reason,
)

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sample-session.jsonl"


def _reference(path: Path, **options: Any) -> dict[str, Any]:
    try:
        return run_pi_reference(path, **options)
    except PiReferenceUnavailable as e:
        pytest.skip(str(e))


def test_sample_session_as_pi_reads_it() -> None:
    from examples.make_sample import build

    _, ids = build()
    keep = int(ids["keep_recent_tokens"])
    ref = _reference(SAMPLE, replay_keep_recent_tokens=keep)
    assert ref["pi"]["version"] == "0.73.1"
    assert ref["file"]["rewritten"] is False
    assert ref["entryCount"] == 75
    assert ref["sessionName"] == "mdtoc: code fences, anchors"
    assert ref["labels"] == {
        ids["fence_done"]: "fence fix ✅",
        ids["branch_summary"]: "slugify attempt (dropped)",
    }
    (replay,) = ref["compactionReplays"]
    assert (
        replay["prepared"]["firstKeptEntryId"]
        == replay["stored"]["firstKeptEntryId"]
        == ids["dupes"]
    )
    assert replay["prepared"]["tokensBefore"] == replay["stored"]["tokensBefore"]
    forks = {k for k, n in ref["tree"]["nodes"].items() if len(n["children"]) > 1}
    assert forks == {ids["thinking"], ids["unicode_done"]}
    ctx = ref["contexts"][0]
    assert ctx["messages"][0]["role"] == "compactionSummary"
    assert ctx["messages"][0]["entryId"] == ids["compaction"]


def test_generated_session_as_pi_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    info = generate(path, 2_500, branchy=True, compactions=True, seed=21)
    other = info.leaf_ids[0]
    ref = _reference(
        path,
        leaves=[other, None, "no-such-id"],
        replay_keep_recent_tokens=info.keep_recent_tokens,
        include_messages=False,
    )
    assert ref["entryCount"] == info.entries
    assert ref["leafId"] == info.leaf_id
    assert ref["sessionName"] == info.session_name
    assert ref["labels"] == info.labels
    forks = [e["id"] for e in ref["entries"] if len(ref["tree"]["nodes"][e["id"]]["children"]) > 1]
    assert forks == info.branch_point_ids
    assert len(ref["compactionReplays"]) == len(info.compaction_ids) >= 1
    for r in ref["compactionReplays"]:
        assert r["prepared"] == {**r["prepared"], **r["stored"]}, r
    assert ref["contexts"][1]["resolvedLeafId"] == other
    assert ref["contexts"][2]["messageCount"] == 0
    assert ref["contexts"][3]["resolvedLeafId"] == info.leaf_id


def test_generator_writes_keys_in_pis_order() -> None:
    if unavailable_reason() is not None:
        pytest.skip(unavailable_reason() or "")
    out = subprocess.run(
        ["node", str(PARITY_DIR / "pi_experiments.mjs")],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    pi_lines = next(r for r in json.loads(out.stdout) if r["name"] == "writtenKeyOrder")["lines"]
    pi_orders = {(x["type"], tuple(x["keys"])) for x in pi_lines}
    m = pf.MODELS["claude-sonnet-4-5"]
    ts = "2026-01-01T00:00:00.000Z"
    ours = [
        pf.header("s", ts, "/p"),
        pf.message_entry("a", None, ts, {}),
        pf.thinking_level_entry("a", None, ts, "high"),
        pf.model_change_entry("a", None, ts, m),
        pf.custom_entry("a", None, ts, "t", {"a": 1}),
        pf.custom_entry("a", None, ts, "t", None),
        pf.custom_message_entry("a", None, ts, "t", "x", False),
        pf.custom_message_entry("a", None, ts, "t", "x", True, {"k": 1}),
        pf.label_entry("a", None, ts, "b", "L"),
        pf.label_entry("a", None, ts, "b", None),
        pf.session_info_entry("a", None, ts, "n"),
        pf.compaction_entry("a", None, ts, "s", "b", 1, {"readFiles": [], "modifiedFiles": []}),
        pf.compaction_entry("a", None, ts, "s", "b", 1, None, None),
        pf.branch_summary_entry("a", "b", ts, "s", {"readFiles": [], "modifiedFiles": []}),
        pf.branch_summary_entry("a", None, ts, "s", None, None),
    ]
    assert {(e["type"], tuple(e)) for e in ours} == pi_orders


def test_missing_session_and_failures_are_errors(tmp_path: Path) -> None:
    if unavailable_reason() is not None:
        pytest.skip(unavailable_reason() or "")
    with pytest.raises(FileNotFoundError):
        run_pi_reference(tmp_path / "nope.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{}\n")
    with pytest.raises(PiReferenceError):
        run_pi_reference(bad, compaction_settings="not a list")
