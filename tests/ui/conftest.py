"""Fixtures of the real-editor tests: the packaged extension and code-server."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .support import OUT, REPO, TOOLS, private_env, venv, wait_for


@pytest.fixture(scope="session")
def out_dir() -> Path:
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    return OUT


def _npm(directory: Path, *args: str) -> None:
    subprocess.run(
        ["npm", *args, "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=directory,
        check=True,
        stdout=subprocess.DEVNULL,
    )


@pytest.fixture(scope="session")
def vsix() -> Iterator[Path]:
    """The extension as users install it: `npm run package` (README, Packaging with vsce)."""
    clients = REPO / "clients"
    _npm(clients / "typescript", "ci")
    _npm(clients / "typescript", "run", "build")
    _npm(clients / "vscode", "ci")
    for old in (clients / "vscode").glob("*.vsix"):
        old.unlink()
    _npm(clients / "vscode", "run", "package")
    packages = list((clients / "vscode").glob("sessiond-vscode-*.vsix"))
    assert len(packages) == 1, packages
    yield packages[0]
    # The package step leaves a bundle in out/; the unbundled build is what the node tests use.
    _npm(clients / "vscode", "run", "build")
    packages[0].unlink()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class CodeServer:
    def __init__(
        self, root: Path, url: str, workspace: Path, logs: Path, process: subprocess.Popen[bytes]
    ):
        self.root = root
        self.url = url
        self.workspace = workspace
        self.logs = logs
        self.process = process


WORKBENCH_SETTINGS = {
    "workbench.startupEditor": "none",
    "workbench.tips.enabled": False,
    "workbench.colorTheme": "Default Dark Modern",
    "workbench.secondarySideBar.defaultVisibility": "hidden",
    "security.workspace.trust.enabled": False,
    "telemetry.telemetryLevel": "off",
    "update.mode": "none",
    "extensions.autoCheckUpdates": False,
    "extensions.ignoreRecommendations": True,
    "chat.disableAIFeatures": True,
    "window.zoomLevel": 0,
}


@pytest.fixture
def code_server(tmp_path: Path, vsix: Path) -> Iterator[CodeServer]:
    binary = TOOLS / "node_modules" / ".bin" / "code-server"
    assert binary.exists(), "run tests/ui/setup.sh (./dev.sh test-ui does) to install code-server"
    env = private_env(tmp_path / "env")
    data = tmp_path / "code-data"
    extensions = tmp_path / "code-extensions"
    python = venv() / "bin" / "python"
    # sessiond.command is machine-scoped (a workspace cannot name the program to run): it
    # goes in the user's settings, and code-server's machine settings for good measure.
    user = {
        **WORKBENCH_SETTINGS,
        "sessiond.command": [str(python), "-m", "sessiond", "serve", "--stdio"],
    }
    for scope in ("User", "Machine"):
        (data / scope).mkdir(parents=True)
        (data / scope / "settings.json").write_text(json.dumps(user, indent=2))
    common = ["--user-data-dir", str(data), "--extensions-dir", str(extensions)]
    installed = subprocess.run(
        [str(binary), *common, "--install-extension", str(vsix)],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert "sessiond.sessiond-vscode" in "\n".join(p.name for p in extensions.iterdir())

    workspace = tmp_path / "project"
    (workspace / ".vscode").mkdir(parents=True)
    (workspace / ".vscode" / "settings.json").write_text(
        json.dumps(
            {
                "sessiond.settings": {"compaction": {"keepRecentTokens": 1500}},
                # The daemon's lock sidecar is no file to edit (README: the Explorer).
                "files.exclude": {"**/*.jsonl.lock": True},
            },
            indent=2,
        )
    )
    port = _free_port()
    log = (tmp_path / "code-server.log").open("wb")
    process = subprocess.Popen(
        [
            str(binary),
            *common,
            "--bind-addr",
            f"127.0.0.1:{port}",
            "--auth",
            "none",
            "--disable-telemetry",
            "--disable-update-check",
            "--disable-workspace-trust",
            "--disable-getting-started-override",
            str(workspace),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )

    def listening() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            assert process.poll() is None, (tmp_path / "code-server.log").read_text()
            return False

    try:
        wait_for("code-server to listen", listening, timeout=90)
        yield CodeServer(tmp_path, f"http://127.0.0.1:{port}/", workspace, data / "logs", process)
    finally:
        # The group holds the extension host and the daemon it started too.
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()
