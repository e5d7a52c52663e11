"""Run pi 0.73.1's own functions on a session file and return their results.

This wraps ``pi_reference.mjs`` (see ``README.md`` in this directory for the document it
returns). Tests call :func:`run_pi_reference` and skip only when it raises
:class:`PiReferenceUnavailable`, which means node or the npm install is missing; every other
failure is a real error and raises :class:`PiReferenceError`.

    from tests.parity.pi_reference import PiReferenceUnavailable, run_pi_reference

    try:
        ref = run_pi_reference(path, leaves=[some_id], replay_keep_recent_tokens=info.keep)
    except PiReferenceUnavailable as e:
        pytest.skip(str(e))
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

PARITY_DIR = Path(__file__).resolve().parent
SCRIPT = PARITY_DIR / "pi_reference.mjs"
PI_VERSION = "0.73.1"
PI_PACKAGE_JSON = PARITY_DIR / "node_modules" / "@mariozechner" / "pi-coding-agent" / "package.json"
MIN_NODE = (20, 6)  # pi 0.73.1's "engines" field


class PiReferenceUnavailable(RuntimeError):
    """node, or pi installed by ``npm ci`` in tests/parity, is missing: tests should skip."""


class PiReferenceError(RuntimeError):
    """The reference script ran and failed."""


def node_executable() -> str:
    node = os.environ.get("SESSIOND_NODE") or shutil.which("node")
    if not node:
        raise PiReferenceUnavailable("node is not installed (pi's parity reference needs node)")
    return node


def install_problem(package_json: Path, version: str, directory: Path) -> str | None:
    """Why a pinned pi install cannot run here (node missing or too old, the install
    missing or another version), or None when it can."""
    try:
        node = node_executable()
    except PiReferenceUnavailable as e:
        return str(e)
    try:
        out = subprocess.run(
            [node, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"node does not run: {e}"
    m = re.match(r"v(\d+)\.(\d+)", out.stdout.strip())
    if not m or (int(m[1]), int(m[2])) < MIN_NODE:
        return f"node {out.stdout.strip()} is too old for pi {version} (needs >= 20.6)"
    if not package_json.is_file():
        return f"pi {version} is not installed: run `npm ci` in {directory}"
    installed = json.loads(package_json.read_text()).get("version")
    if installed != version:
        return f"installed pi is {installed}, expected {version}: run `npm ci` in {directory}"
    return None


def unavailable_reason() -> str | None:
    """Why the reference cannot run here, or None when it can."""
    return install_problem(PI_PACKAGE_JSON, PI_VERSION, PARITY_DIR)


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def run_pi_reference(
    session_path: str | os.PathLike[str], *, timeout: float = 900, **options: Any
) -> dict[str, Any]:
    """Run the reference on ``session_path`` and return its JSON document as a dict.

    Keyword options are the script's options (README.md, "Options"); snake_case names are
    converted to the script's camelCase (``replay_keep_recent_tokens`` becomes
    ``replayKeepRecentTokens``), nested values are passed as they are.

    The document is parsed with the standard library on purpose: pi's output may contain
    escaped lone UTF-16 surrogates (pi cuts long tool results in the middle of a surrogate
    pair), which strict UTF-8 decoders such as msgspec reject.
    """
    reason = unavailable_reason()
    if reason is not None:
        raise PiReferenceUnavailable(reason)
    path = Path(session_path)
    if not path.is_file():
        raise FileNotFoundError(path)
    opts = {_camel(k): v for k, v in options.items()}
    with tempfile.TemporaryDirectory(prefix="pi-ref-") as tmp:
        opts_file = Path(tmp) / "options.json"
        out_file = Path(tmp) / "reference.json"
        opts_file.write_text(json.dumps(opts), encoding="utf-8")
        cmd = [
            node_executable(),
            str(SCRIPT),
            str(path),
            "--options",
            str(opts_file),
            "--out",
            str(out_file),
        ]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired as e:
            raise PiReferenceError(f"pi reference timed out after {timeout} s on {path}") from e
        if proc.returncode != 0:
            raise PiReferenceError(
                f"pi reference failed (exit {proc.returncode}) on {path}:\n{proc.stderr.strip()}"
            )
        with out_file.open(encoding="utf-8") as f:
            result: dict[str, Any] = json.load(f)
    return result


def install(*, clean: bool = True, timeout: float = 600) -> None:
    """Install the pinned pi into tests/parity/node_modules (``npm ci``; needs the registry)."""
    npm = shutil.which("npm")
    if not npm:
        raise PiReferenceUnavailable("npm is not installed")
    cmd = [npm, "ci" if clean else "install", "--no-audit", "--no-fund"]
    subprocess.run(cmd, cwd=PARITY_DIR, check=True, timeout=timeout)


if __name__ == "__main__":
    import sys

    doc = run_pi_reference(sys.argv[1])
    print(json.dumps({k: doc[k] for k in ("leafId", "entryCount", "sessionName", "timing")}))
