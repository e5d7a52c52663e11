"""An editor's workspace cannot choose what the editor runs or where it connects.

A cloned repository brings its ``.vscode/settings.json`` along. The VS Code extension's
settings that name the daemon's command line (``sessiond.command``) or a socket to
connect to (``sessiond.socket``) are machine-scoped: VS Code takes them only from the
user's (or the remote machine's) settings, never from a workspace, so opening a project
cannot make the extension run a program of the project's choosing or send sessions to
its socket. (The extension's own test reads the same manifest; this one keeps the
promise in the proof suite.)
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_settings_naming_a_program_or_a_socket_are_machine_scoped() -> None:
    manifest = json.loads((ROOT / "clients" / "vscode" / "package.json").read_text())
    properties = manifest["contributes"]["configuration"]["properties"]
    for name in ("sessiond.command", "sessiond.socket"):
        assert properties[name].get("scope") == "machine", name
