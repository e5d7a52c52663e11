"""The README's main command: ``sessiond demo`` runs the whole job offline."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from sessiond.store.session import SessionStore

ROOT = Path(__file__).resolve().parents[2]


def test_demo_runs_the_main_job_on_a_copy(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        # a summarizer that would need the network: the demo must not use it
        "OPENAI_API_KEY": "sk-demo-must-not-use",
    }
    (home / ".config" / "sessiond").mkdir(parents=True)
    (home / ".config" / "sessiond" / "settings.json").write_text(
        '{"summarizer": {"candidates": [{"kind": "openai", "model": "gpt", "baseUrl": "http://192.0.2.1/v1"}]}}'
    )
    sample = ROOT / "examples" / "sample-session.jsonl"
    before = sample.read_bytes()
    session = tmp_path / "mine.jsonl"
    shutil.copyfile(sample, session)
    result = subprocess.run(
        [sys.executable, "-m", "sessiond", "demo", "--session", str(session), "--keep"],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for heading in (
        "== The session: mdtoc: code fences, anchors",
        "== The agent appends a turn",
        "== Compacting with the offline summarizer",
        "== Navigating back to an earlier question, with a branch summary",
        "== The tree now",
    ):
        assert heading in out
    assert "agent/turnEnded -> none" in out and "<- leaf" in out
    assert "Offline extractive summary" in out and "[demo: back here]" in out
    assert sample.read_bytes() == before  # the bundled sample is never touched
    kept = Path(out.rsplit("kept at ", 1)[1].strip())
    with SessionStore.open(kept, readonly=True) as store:
        types = [r.type for r in store.records()]
        assert types.count("compaction") == 2 and types.count("branch_summary") == 2
        assert store.recovery.clean
