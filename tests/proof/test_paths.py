"""Every path a client names is checked once, before anything looks at it.

A path the OS cannot take (a NUL byte, a lone UTF-16 surrogate, a path or a name too
long, the home of a user that does not exist) is the client's mistake: ``invalidParams``
naming the parameter, never -32603 with a traceback, whichever method carries it and
whichever call would first have met it. The first hardening fixed NUL bytes where the
store met them; a later change added a call (``realpath``, for shared opens) before the
store and the NUL came back as an internal error. So the proof tries every method that
takes a path, every parameter that becomes one (``cwd`` names a directory,
``storage.sessionDir`` a root), with every such value, against a real daemon.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.proof.support import FAST, assert_no_traceback, merged, stdio_daemon, timeout_for

pytestmark = pytest.mark.timeout(timeout_for(120, 300))


def bad_paths(root: Path) -> dict[str, str]:
    return {
        "NUL": f"{root}/a\x00b.jsonl",
        "NUL at the end": f"{root}/\x00",
        "too long": f"{root}/" + "d/" * 2100 + "s.jsonl",
        "name too long": f"{root}/" + "n" * 300 + ".jsonl",
        "unknown user": "~no-such-user-here-at-all/s.jsonl",
    }


def requests(value: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("session/open", {"path": value}),
        ("session/new", {"cwd": "/p", "path": value}),
        ("session/new", {"cwd": "/p", "sessionDir": value}),
        ("session/list", {"sessionDir": value}),
    ]


def cwd_requests(value: str) -> list[tuple[str, dict[str, Any]]]:
    """``cwd`` becomes a directory name under the sessions root."""
    return [("session/new", {"cwd": value}), ("session/list", {"cwd": value})]


def test_a_path_the_os_cannot_take_is_invalid_params_in_every_method(tmp_path: Path) -> None:
    daemon, peer = stdio_daemon(tmp_path / "daemon", log_file=True)
    try:
        peer.initialize()
        failures: list[str] = []
        for label, value in bad_paths(tmp_path / "s").items():
            cases = requests(value)
            if label != "unknown user":
                cases += cwd_requests(value.replace(str(tmp_path), "/home/u"))
            for method, params in cases:
                response = peer.request(method, params)
                error = response.get("error") or {}
                kind = (error.get("data") or {}).get("kind")
                if error.get("code") != -32602 or kind != "invalidParams":
                    failures.append(f"{label}: {method} {sorted(params)} -> {error or response}")
        assert failures == []
        assert peer.call("settings/get", {}) is not None  # still serving
        assert peer.violations == []
        assert "Traceback" not in daemon.all_logs()
    finally:
        daemon.stop()
    assert_no_traceback(daemon.all_logs())


def test_a_sessions_root_set_by_a_client_is_checked_too(tmp_path: Path) -> None:
    daemon, peer = stdio_daemon(tmp_path / "daemon", FAST, log_file=True)
    try:
        root = f"{tmp_path}/roots/\x00"
        peer.initialize(settings=merged(FAST, {"storage": {"sessionDir": root}}))
        for method, params in [("session/new", {"cwd": "/p"}), ("session/list", {"cwd": "/p"})]:
            response = peer.request(method, params)
            assert response["error"]["code"] == -32602, response
            assert response["error"]["data"]["kind"] == "invalidParams"
    finally:
        daemon.stop()
    assert "Traceback" not in daemon.all_logs()
