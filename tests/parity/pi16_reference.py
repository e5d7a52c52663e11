"""Run pi 1.6.0's own code on session files: write generated sessions, and report what its
functions return (``pi16/pi_generate.mjs``, ``pi16/pi_reference.mjs``; README.md).

Tests skip only when :func:`unavailable_reason` says node or the pinned install
(``npm ci`` in tests/parity/pi16) is missing; any other failure is an error.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tests.parity.pi_reference import install_problem, node_executable

PI16_DIR = Path(__file__).resolve().parent / "pi16"
PI16_VERSION = "1.6.0"
PI16_PACKAGE_JSON = (
    PI16_DIR / "node_modules" / "@earendil-works" / "pi-coding-agent" / "package.json"
)


class Pi16Error(RuntimeError):
    """A pi 1.6 script ran and failed."""


def unavailable_reason() -> str | None:
    """Why pi 1.6 cannot run here, or None when it can (its modules the scripts import
    load on Node 20.6 and later, though pi 1.6's package index asks for Node 22)."""
    return install_problem(PI16_PACKAGE_JSON, PI16_VERSION, PI16_DIR)


def _run(script: str, *args: str, timeout: float) -> str:
    proc = subprocess.run(
        [node_executable(), str(PI16_DIR / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise Pi16Error(f"{script} failed (exit {proc.returncode}):\n{proc.stderr.strip()}")
    return proc.stdout


def generate(out: Path, *, seed: int, steps: int = 220, keep: int = 300, nulls: float = 0.0) -> Any:
    """A session written by pi 1.6's SessionManager (every entry type, many leaves)."""
    stdout = _run(
        "pi_generate.mjs",
        str(out),
        "--seed",
        str(seed),
        "--steps",
        str(steps),
        "--keep",
        str(keep),
        "--nulls",
        str(nulls),
        timeout=300,
    )
    return json.loads(stdout)


def reference(session: Path, **options: Any) -> dict[str, Any]:
    """pi 1.6's contexts, estimates, compaction preparations and branch summaries for a file.

    Parsed with the standard library: pi's output may hold escaped lone surrogates."""
    with tempfile.TemporaryDirectory(prefix="pi16-ref-") as tmp:
        out = Path(tmp) / "reference.json"
        _run(
            "pi_reference.mjs",
            str(session),
            "--options-json",
            json.dumps(options),
            "--out",
            str(out),
            timeout=600,
        )
        with out.open(encoding="utf-8") as f:
            document: dict[str, Any] = json.load(f)
    return document


def build_context(session: Path, leaf_id: str | None = None) -> dict[str, Any]:
    """pi 1.6's context of a file (at its leaf, or at ``leaf_id``), as pi opens it."""
    options: dict[str, Any] = {"compactionLeaves": [], "branchPairs": []}
    options["leaves"] = [leaf_id] if leaf_id is not None else []
    document = reference(session, **options)
    if leaf_id is None:
        document = reference(
            session, leaves=[document["leafId"]], compactionLeaves=[], branchPairs=[]
        )
    context: dict[str, Any] = document["contexts"][0]
    return context
