"""Text from a session is inert wherever sessiond shows it.

A session file may hold terminal control sequences in any string: an OSC 52 sequence
(which writes the terminal's clipboard), ``ESC[2J`` (which clears the screen), a C1 CSI,
a bell, line breaks, bidirectional overrides. The CLI prints entries' text, names,
labels, a header's ``cwd`` and ``parentSession``, model names; the daemon builds tree
previews that editors show as rows. In all of them every such character arrives as a
visible escape, never as the byte itself. (The editors' own display is proved in
``clients/vscode/test/text.test.ts`` and ``clients/nvim/tests/test_10_units.lua``.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sessiond.store.session import SessionStore
from tests.proof.support import FAST, isolated_env, stdio_daemon, timeout_for
from tests.store.helpers import assistant, user

pytestmark = pytest.mark.timeout(timeout_for(120, 300))

OSC52 = "\x1b]52;c;cm0gLXJmIH4K\x07"
CLEAR = "\x1b[2J\x1b[H"
C1_CSI = "\x9b31m"
BIDI = "\u202egnp.exe"
HOSTILE = f"look{OSC52} here{CLEAR}{C1_CSI}{BIDI}\rfake prompt $ "
# What may never reach the terminal: ESC, BEL, CR, C1 controls, bidirectional overrides.
FORBIDDEN = ["\x1b", "\x07", "\r", "\x9b", "\u202e"]


def hostile_session(path: Path) -> Path:
    with SessionStore.create(f"/p{CLEAR}", path=path, parent_session=f"/q{OSC52}") as store:
        first = store.append(user(HOSTILE)).id
        store.append(assistant(f"answer {HOSTILE}"))
        store.append({"type": "model_change", "provider": f"prov{CLEAR}", "modelId": f"m{OSC52}"})
        store.append({"type": "custom", "customType": f"ext{OSC52}", "data": {}})
        store.append_label(first, f"label{OSC52}")
        store.set_name(f"name {HOSTILE}")
        store.append(user(f"second {HOSTILE}"))
        store.append(assistant("done"))
    return path


def run(*args: str, env: dict[str, str]) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "sessiond", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout + result.stderr


def test_the_cli_prints_a_files_text_inert(tmp_path: Path) -> None:
    path = hostile_session(tmp_path / "s.jsonl")
    env = isolated_env(tmp_path / "env", FAST)
    outputs = {
        "tree": run("tree", str(path), env=env),
        "info": run("info", str(path), env=env),
        "context": run("context", str(path), env=env),
        "compact --dry-run": run(
            "compact", str(path), "--dry-run", "--set", "compaction.keepRecentTokens=10", env=env
        ),
    }
    for name, output in outputs.items():
        shown = [c for c in FORBIDDEN if c in output]
        assert shown == [], f"sessiond {name} printed {shown!r}:\n{output!r}"
    # ...and the text is still there, escaped, for a reader to see.
    assert "\\x1b]52;c;" in outputs["tree"] and "\\x1b[2J" in outputs["info"]
    assert "\\u202egnp.exe" in outputs["tree"]


def test_tree_previews_the_daemon_sends_are_inert(tmp_path: Path) -> None:
    path = hostile_session(tmp_path / "s.jsonl")
    daemon, peer = stdio_daemon(tmp_path / "d", FAST)
    try:
        peer.initialize()
        session_id = peer.call("session/open", {"path": str(path)})["sessionId"]
        nodes = peer.call("session/tree", {"sessionId": session_id})["nodes"]
    finally:
        daemon.stop()
    previews = [node["preview"] for node in nodes]
    assert len(previews) == 8
    for preview in previews:
        assert [c for c in FORBIDDEN if c in preview] == [], json.dumps(preview)
