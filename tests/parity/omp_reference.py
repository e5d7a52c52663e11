"""Run oh-my-pi 18.3.4's own session code (under Bun) on session files, from Python.

``omp18/install.sh`` puts Bun, the native addon and oh-my-pi's published bundle in
``tests/parity/omp18`` (``./dev.sh test`` runs it; see ``omp18/README.md``). Tests call
:func:`write_omp_sessions` (sessions written by oh-my-pi's ``SessionManager``) and
:func:`omp_reference` (what oh-my-pi makes of files: context at any leaf, tree, labels,
name), and skip when :class:`OmpUnavailable` says the runtime is not installed here.

Every run gets a fresh home directory (oh-my-pi writes breadcrumbs, a history database
and an image blob store under it). So a session's images that oh-my-pi moved to its blob
store are, for the reference, references it cannot resolve: it keeps them as they are,
which is what sessiond does.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

OMP_DIR = Path(__file__).resolve().parent / "omp18"
OMP_VERSION = "18.3.4"
BUN = OMP_DIR / "node_modules" / "@oven" / "bun-linux-x64" / "bin" / "bun"
BUNDLE = OMP_DIR / ".cache" / f"omp-{OMP_VERSION}.mjs"


class OmpUnavailable(RuntimeError):
    """oh-my-pi's runtime is not installed here: tests should skip."""


class OmpError(RuntimeError):
    """A script ran under Bun and failed."""


def unavailable_reason() -> str | None:
    """Why oh-my-pi cannot run here, or None when it can."""
    if not BUN.is_file():
        return f"Bun is not installed for the oh-my-pi parity tests: run {OMP_DIR / 'install.sh'}"
    if not BUNDLE.is_file():
        return f"oh-my-pi {OMP_VERSION} is not installed: run {OMP_DIR / 'install.sh'}"
    return None


def _run(script: str, args: list[str], stdin: Any, timeout: float) -> Any:
    reason = unavailable_reason()
    if reason is not None:
        raise OmpUnavailable(reason)
    with tempfile.TemporaryDirectory(prefix="omp-home-") as home:
        env = {key: value for key, value in os.environ.items() if not key.startswith("XDG_")}
        env.update(
            HOME=os.path.join(home, "home"),
            PI_CODING_AGENT_DIR=os.path.join(home, "agent"),
            OMP_PARITY_ISOLATED="1",
            TMPDIR=home,
        )
        for name in ("CONFIG", "CACHE", "DATA", "STATE"):
            env[f"XDG_{name}_HOME"] = os.path.join(home, name.lower())
        for directory in ("home", "agent", "config", "cache", "data", "state"):
            os.makedirs(os.path.join(home, directory))
        done = subprocess.run(
            [str(BUN), "--no-install", str(OMP_DIR / script), *args],
            input=json.dumps(stdin) if stdin is not None else "",
            capture_output=True,
            text=True,
            env=env,
            cwd=OMP_DIR,
            timeout=timeout,
            check=False,
        )
    if done.returncode != 0:
        raise OmpError(f"{script} exited with {done.returncode}:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout)


def write_omp_sessions(
    out_dir: str | os.PathLike[str],
    generated: dict[str, list[list[Any]]] | None = None,
    *,
    timeout: float = 300,
) -> dict[str, Path]:
    """Session files written by oh-my-pi's SessionManager (``omp_write_sessions.ts``),
    by scenario name; ``generated`` adds sessions made of operations (see ``replay`` in
    that script)."""
    args = [str(out_dir)]
    if generated:
        ops = Path(out_dir) / "generated-operations.json"
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        ops.write_text(json.dumps(generated))
        args.append(str(ops))
    written = _run("omp_write_sessions.ts", args, None, timeout)
    return {item["name"]: Path(item["path"]) for item in written}


def omp_reference(
    jobs: list[tuple[str | os.PathLike[str], list[str | None] | None]], *, timeout: float = 600
) -> list[dict[str, Any]]:
    """oh-my-pi's reading of each ``(file, leaves)``: leaves None means every entry and
    null. See ``omp18/omp_reference.ts`` for the answer's fields."""
    payload = [
        {"file": str(file), "leaves": "all" if leaves is None else leaves} for file, leaves in jobs
    ]
    answers: list[dict[str, Any]] = _run("omp_reference.ts", [], payload, timeout)
    for answer in answers:
        if not answer.get("ok"):
            raise OmpError(f"oh-my-pi could not read {answer['file']}: {answer.get('error')}")
    return answers


def omp_title_lines(names: list[tuple[str, str | None, str]], *, timeout: float = 120) -> list[str]:
    """The title line oh-my-pi writes for each ``(title, source, updatedAt)``."""
    payload = [
        {
            "titleSlot": {
                "title": title,
                "updatedAt": updated_at,
                **({"source": source} if source else {}),
            }
        }
        for title, source, updated_at in names
    ]
    return [answer["line"] for answer in _run("omp_reference.ts", [], payload, timeout)]
