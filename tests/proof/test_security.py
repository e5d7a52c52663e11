"""Security: who may connect, which files a client may name, and where API keys may go.

- The Unix socket is 0600 in a 0700 directory, whatever the umask, and an existing
  runtime directory that others can open is tightened.
- TCP without the token, with a wrong one, with one of the wrong type or in the wrong
  place is refused with ``unauthorized`` and the connection is closed; before the token
  nothing is served and big messages close the connection; the token is never logged.
- Session ids with ``..`` or ``/`` are refused and nothing is created outside the
  session directory.
- With ``storage.allowedRoots``, paths outside are refused, through ``..`` and through
  symlinks (to files and to directories), and nothing is created outside; clients cannot
  lift the setting.
- API keys never reach logs (stderr and the log file, at DEBUG), notifications, error
  responses or session files, even from a provider that echoes the key back in every
  error it sends.
- A settings file that others can write is warned about in the log and in
  ``initialize``'s warnings.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sessiond.store.session import SessionStore
from tests.proof.provider import Act, ScriptedProvider, tagged_session
from tests.proof.support import (
    FAST,
    SERVE,
    SMALL_COMPACTION,
    DaemonProcess,
    Peer,
    RpcError,
    isolated_env,
    listening_daemon,
    merged,
    stdio_daemon,
    timeout_for,
    write_settings,
)
from tests.store.helpers import assistant, user

pytestmark = pytest.mark.timeout(timeout_for(180, 900))


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path, follow_symlinks=False).st_mode)


def snapshot(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if not p.name.endswith(".log")}


# -- the Unix socket --------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["default", "explicit"])
def test_the_socket_is_private_whatever_the_umask(
    tmp_path: Path, where: str, request: pytest.FixtureRequest
) -> None:
    env = isolated_env(tmp_path, FAST)
    if len(env["XDG_RUNTIME_DIR"]) > 70:
        # A socket path has at most 107 bytes: a long temporary root (PYTEST_DEBUG_TEMPROOT)
        # would make the daemon refuse the default path for its length, not its privacy.
        short = Path(tempfile.mkdtemp(prefix="sd-", dir="/tmp"))
        request.addfinalizer(lambda: shutil.rmtree(short, ignore_errors=True))
        env["XDG_RUNTIME_DIR"] = str(short)
    runtime = Path(env["XDG_RUNTIME_DIR"]) / "sessiond"
    if where == "default":
        runtime.mkdir(mode=0o755)
        runtime.chmod(0o755)  # someone made it open: the daemon must tighten it
        args = ["--socket"]
        expected = runtime / "sessiond.sock"
    else:
        expected = tmp_path / "fresh" / "dir" / "s.sock"
        args = ["--socket", str(expected)]
    old = os.umask(0)
    try:
        daemon = listening_daemon(tmp_path, args, env=env)
    finally:
        os.umask(old)
    try:
        assert Path(daemon.address) == expected
        assert stat.S_ISSOCK(os.stat(expected).st_mode)
        assert mode(expected) == 0o600
        assert mode(expected.parent) == 0o700
        peer = daemon.unix_peer()
        assert peer.initialize()["protocolVersion"] == "1"
    finally:
        daemon.stop()
    assert not expected.exists(), "the socket is removed on shutdown"


# -- TCP and its token --------------------------------------------------------------------------------

TOKEN = "proof-" + secrets.token_hex(16)


@pytest.fixture(scope="module")
def tcp_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProcess]:
    root = tmp_path_factory.mktemp("tcp")
    env = isolated_env(root, FAST, SESSIOND_TOKEN=TOKEN)
    daemon = listening_daemon(root, ["--tcp", "127.0.0.1:0", "--log-level", "DEBUG"], env=env)
    try:
        yield daemon
    finally:
        daemon.stop()
        logs = daemon.all_logs()
        assert TOKEN not in logs, "the token was logged"


REFUSED = [
    pytest.param({}, id="missing"),
    pytest.param({"authToken": "wrong"}, id="wrong"),
    pytest.param({"authToken": ""}, id="empty"),
    pytest.param({"authToken": TOKEN[:-1]}, id="prefix"),
    pytest.param({"authToken": TOKEN + " "}, id="trailing-space"),
    pytest.param({"authToken": TOKEN.upper()}, id="other-case"),
    pytest.param({"authToken": None}, id="null"),
    pytest.param({"authToken": 12345}, id="number"),
    pytest.param({"authToken": [TOKEN]}, id="in-a-list"),
    pytest.param({"authToken": {"token": TOKEN}}, id="in-an-object"),
    pytest.param({"auth_token": TOKEN}, id="snake-case-field"),
    pytest.param({"settings": {"authToken": TOKEN}}, id="inside-settings"),
]


@pytest.mark.parametrize("credentials", REFUSED)
def test_tcp_refuses_anything_but_the_token_and_hangs_up(
    tcp_daemon: DaemonProcess, credentials: dict[str, Any]
) -> None:
    peer = tcp_daemon.tcp_peer("stranger")
    try:
        response = peer.request("initialize", {"clientInfo": {"name": "stranger"}, **credentials})
        assert (
            response["error"]["code"] == -32001
            and response["error"]["data"]["kind"] == "unauthorized"
        )
        assert TOKEN not in str(response)
        assert peer.wait_eof(5), "the connection stayed open after a refused token"
    finally:
        peer.close()


def test_tcp_before_the_token(tcp_daemon: DaemonProcess) -> None:
    peer = tcp_daemon.tcp_peer("early")
    try:
        for method in ("session/list", "session/open", "settings/get", "shutdown"):
            response = peer.request(method, {"cwd": "/", "path": "/etc/passwd"})
            assert response["error"]["code"] == -32002, response
        # another client's successful initialize does not authorize this one
        other = tcp_daemon.tcp_peer("friend")
        other.initialize(authToken=TOKEN)
        assert peer.request("settings/get", {})["error"]["code"] == -32002
        other.close()
        # a big message before the token closes the connection, perhaps before all of it
        # is sent (then the send meets the reset)
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):
            peer.send_raw(b"Content-Length: %d\r\n\r\n" % (4 << 20) + b"{" + b" " * (2 << 20))
        assert peer.wait_eof(5)
    finally:
        peer.close()


def test_tcp_with_the_token_works_and_a_refusal_cannot_be_retried(
    tcp_daemon: DaemonProcess, tmp_path: Path
) -> None:
    stranger = tcp_daemon.tcp_peer("stranger")
    with pytest.raises(RpcError):
        stranger.initialize(authToken="guess")
    assert stranger.wait_eof(5)
    peer = tcp_daemon.tcp_peer("owner")
    try:
        assert peer.initialize(authToken=TOKEN)["protocolVersion"] == "1"
        created = peer.call(
            "session/new", {"cwd": "/p", "sessionDir": str(tmp_path), "writeNow": True}
        )
        assert Path(created["path"]).exists()
    finally:
        peer.close()


def test_a_generated_token_is_written_privately_and_never_printed(tmp_path: Path) -> None:
    env = isolated_env(tmp_path, FAST)
    daemon = listening_daemon(tmp_path, ["--tcp", "127.0.0.1:0"], env=env)
    try:
        token_file = (
            Path(env["XDG_RUNTIME_DIR"])
            / "sessiond"
            / f"tcp-{daemon.address.rpartition(':')[2]}.token"
        )
        assert mode(token_file) == 0o600 and mode(token_file.parent) == 0o700
        token = token_file.read_text().strip()
        assert len(token) >= 32 and token not in daemon.all_logs()
        peer = daemon.tcp_peer()
        assert peer.initialize(authToken=token)["protocolVersion"] == "1"
    finally:
        daemon.stop()
    assert not token_file.exists()


def test_tcp_will_not_listen_beyond_loopback_unless_told(tmp_path: Path) -> None:
    env = isolated_env(tmp_path, FAST, SESSIOND_TOKEN=TOKEN)
    done = subprocess.run(
        [*SERVE, "--tcp", "0.0.0.0:0"],
        check=False,
        env=env,
        capture_output=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    # A refusal, not a crash: one line, the documented status 2, no traceback.
    assert done.returncode == 2, done.stderr
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "non-loopback" in lines[0], done.stderr
    assert b"Traceback" not in done.stderr


# -- session ids and paths ------------------------------------------------------------------------------

BAD_IDS = [
    "..",
    "../escape",
    "a/b",
    "/absolute",
    ".hidden",
    "a..b",
    "x/../../y",
    "a\\b",
    "\x00",
    " ",
    "a" * 200,
]


def test_session_ids_cannot_name_files_outside_the_session_directory(tmp_path: Path) -> None:
    daemon, peer = stdio_daemon(tmp_path / "d")
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    before = snapshot(tmp_path)
    try:
        peer.initialize()
        for bad in BAD_IDS:
            with pytest.raises(RpcError) as refused:
                peer.call(
                    "session/new",
                    {"cwd": "/p", "sessionDir": str(sessions), "id": bad, "writeNow": True},
                )
            assert refused.value.code == -32602 and refused.value.kind == "invalidParams", bad
        # a cwd full of dots and slashes only names a directory inside the sessions root
        made = peer.call("session/new", {"cwd": "../../../../tmp/x", "writeNow": True})
        data_root = Path(daemon.env["XDG_DATA_HOME"]) / "sessiond" / "sessions"
        assert Path(made["path"]).resolve().parent.parent == data_root.resolve()
        good = peer.call(
            "session/new",
            {"cwd": "/p", "sessionDir": str(sessions), "id": "ok.id-1_x", "writeNow": True},
        )
        assert Path(good["path"]).parent == sessions
        blank = peer.call(
            "session/new", {"cwd": "/p", "sessionDir": str(sessions), "id": "", "writeNow": True}
        )
        assert (
            Path(blank["path"]).parent == sessions and blank["sessionId"]
        )  # "" is no id: a fresh one
    finally:
        daemon.stop()
    created = snapshot(tmp_path) - before
    outside = [
        p
        for p in created
        if sessions not in p.parents
        and data_root not in p.parents
        and p not in (sessions, data_root)
    ]
    outside = [p for p in outside if not str(p).startswith(str(tmp_path / "d"))]
    assert outside == [], outside


@pytest.fixture
def confined(tmp_path: Path) -> Iterator[tuple[DaemonProcess, Peer, Path, Path]]:
    allowed = (tmp_path / "allowed").resolve()
    outside = (tmp_path / "outside").resolve()
    for directory in (allowed, outside):
        directory.mkdir()
        with SessionStore.create("/p", path=directory / "s.jsonl") as store:
            store.append(user("hello"))
            store.append(assistant("hi"))
    (allowed / "link.jsonl").symlink_to(outside / "s.jsonl")
    (allowed / "dirlink").symlink_to(outside, target_is_directory=True)
    settings = merged(FAST, {"storage": {"allowedRoots": [str(allowed)]}})
    daemon, peer = stdio_daemon(tmp_path / "d", settings)
    peer.initialize()
    try:
        yield daemon, peer, allowed, outside
    finally:
        daemon.stop()


def test_allowed_roots_refuse_every_way_out(
    confined: tuple[DaemonProcess, Peer, Path, Path],
) -> None:
    daemon, peer, allowed, outside = confined
    before = snapshot(outside)
    data_home = Path(daemon.env["XDG_DATA_HOME"])
    assert peer.call("session/open", {"path": str(allowed / "s.jsonl")})["entryCount"] == 2
    attempts: list[tuple[str, dict[str, Any]]] = [
        ("session/open", {"path": str(outside / "s.jsonl")}),
        ("session/open", {"path": str(allowed / ".." / "outside" / "s.jsonl")}),
        ("session/open", {"path": str(allowed / "link.jsonl")}),
        ("session/open", {"path": str(allowed / "dirlink" / "s.jsonl")}),
        ("session/new", {"cwd": "/p", "path": str(outside / "new.jsonl"), "writeNow": True}),
        (
            "session/new",
            {"cwd": "/p", "path": str(allowed / "dirlink" / "new.jsonl"), "writeNow": True},
        ),
        ("session/new", {"cwd": "/p", "sessionDir": str(outside), "writeNow": True}),
        ("session/new", {"cwd": "/p", "sessionDir": str(allowed / "dirlink"), "writeNow": True}),
        (
            "session/new",
            {"cwd": "/p", "sessionDir": str(allowed / "dirlink" / "deeper"), "writeNow": True},
        ),
        ("session/new", {"cwd": "/p", "writeNow": True}),  # the default directory is outside
        ("session/list", {"sessionDir": str(outside)}),
        ("session/list", {"sessionDir": str(allowed / "dirlink")}),
        ("session/list", {"cwd": "/p"}),
    ]
    for method, params in attempts:
        with pytest.raises(RpcError) as refused:
            peer.call(method, params)
        assert refused.value.kind == "notAllowed" and refused.value.code == -32019, (
            method,
            params,
            refused.value,
        )
    assert snapshot(outside) == before, "something was created outside the allowed root"
    assert not list(data_home.rglob("*.jsonl")), (
        "a session file was created in the default directory"
    )
    assert not list(data_home.rglob("--p--")), "a refused session/new made its directory anyway"
    # clients cannot lift the confinement
    with pytest.raises(RpcError) as refused:
        peer.call("settings/update", {"settings": {"storage": {"allowedRoots": ["/"]}}})
    assert (refused.value.code, refused.value.kind) == (-32602, "trustedSetting")
    with pytest.raises(RpcError):
        peer.call("session/open", {"path": str(outside / "s.jsonl")})


def test_allowed_roots_cannot_be_lifted_at_initialize(tmp_path: Path) -> None:
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    settings = merged(FAST, {"storage": {"allowedRoots": [str(allowed)]}})
    daemon, peer = stdio_daemon(tmp_path / "d", settings)
    try:
        result = peer.initialize(settings={"storage": {"allowedRoots": ["/"]}})
        assert any("allowedRoots" in warning for warning in result["warnings"])
        with pytest.raises(RpcError) as refused:
            peer.call(
                "session/new",
                {"cwd": "/p", "sessionDir": str(tmp_path / "elsewhere"), "writeNow": True},
            )
        assert refused.value.kind == "notAllowed"
        assert not (tmp_path / "elsewhere").exists()
    finally:
        daemon.stop()


# -- API keys -----------------------------------------------------------------------------------------------

KEY = "sk-proof-" + secrets.token_hex(20)
SECRET_PART = KEY.removeprefix("sk-proof-")


def echoing(key: str, n: int, body: dict[str, Any], headers: dict[str, str]) -> Act:
    """A provider that puts the caller's credentials into every error it sends."""
    presented = headers.get("authorization", "") + " " + headers.get("x-api-key", "")
    kind = key.split("-", maxsplit=1)[0]
    if kind == "auth":
        return Act(
            401, f"Incorrect API key provided: {presented}. You can find your API key at ..."
        )
    if kind == "bad":
        return Act(400, f"invalid request from {presented} (key {presented.split()[-1]})")
    if kind == "flaky":
        return (
            Act(500, f"internal error while serving {presented}")
            if n < 2
            else Act(503, f"overloaded {presented}")
        )
    if kind == "limit":
        return Act(429, f"Rate limit for {presented}; retry-after: 0.01", {"retry-after-ms": "5"})
    if kind == "raw":
        return Act(
            body=f"upstream says: {presented} is not allowed".encode(),
            status=502,
            headers={"content-type": "text/plain"},
        )
    if kind == "inband":
        event = {"error": {"message": f"key {presented} revoked", "type": "invalid_request_error"}}
        return Act(
            body=b"data: " + json.dumps(event).encode() + b"\n\n",
            headers={"content-type": "text/event-stream"},
        )
    return Act(text=f"## Goal\nsummary for {key}")


def keyed_session(directory: Path, name: str) -> Path:
    return tagged_session(directory, name, "/keys/project", words=200)


@pytest.mark.parametrize("fallback", [False, True], ids=["no-fallback", "extractive-fallback"])
def test_api_keys_never_leave_the_daemon(tmp_path: Path, fallback: bool) -> None:
    provider = ScriptedProvider(echoing)
    settings = merged(
        FAST,
        SMALL_COMPACTION,
        {
            "retry": {"baseDelayMs": 5},
            "summarizer": {
                "extractiveFallback": fallback,
                "candidates": [provider.candidate(apiKeyEnv="PROOF_API_KEY", timeoutSeconds=5)],
            },
        },
    )
    env = isolated_env(tmp_path / "d", settings, PROOF_API_KEY=KEY)
    daemon, peer = stdio_daemon(
        tmp_path / "d", env=env, args=["--log-level", "DEBUG"], log_file=True
    )
    sessions = tmp_path / "sessions"
    try:
        peer.initialize()
        for kind in ("auth", "bad", "flaky", "limit", "raw", "inband"):
            path = keyed_session(sessions, kind)
            sid = peer.call("session/open", {"path": str(path)})["sessionId"]
            target = peer.call("session/path", {"sessionId": sid})["entries"][2]["id"]
            peer.request("compaction/run", {"sessionId": sid})
            peer.request("agent/turnEnded", {"sessionId": sid, "contextWindow": 6000})
            peer.request("tree/navigate", {"sessionId": sid, "targetId": target, "summarize": True})
            peer.request("compaction/prepare", {"sessionId": sid, "includeMessages": True})
            peer.request("settings/get", {"sessionId": sid})
        assert len(provider.hits) >= 6
        assert all(hit.headers.get("authorization") == f"Bearer {KEY}" for hit in provider.hits), (
            "the key was not even sent"
        )
    finally:
        daemon.stop()
        provider.stop()
    leaks = []
    for index, body in enumerate(peer.bodies):
        if KEY.encode() in body or SECRET_PART.encode() in body:
            leaks.append(f"message {index}: {body[:300]!r}")
    logs = daemon.all_logs()
    if SECRET_PART in logs:
        leaks.append("the daemon's log: " + logs[max(0, logs.find(SECRET_PART) - 200) :][:400])
    for path in tmp_path.rglob("*"):
        if path.is_file() and SECRET_PART.encode() in path.read_bytes():
            leaks.append(f"file {path}")
    assert leaks == []
    assert "[redacted]" in logs or any(b"[redacted]" in body for body in peer.bodies), (
        "the echo never came back: the test proved nothing"
    )
    if fallback:
        written = b"".join(p.read_bytes() for p in sessions.glob("*.jsonl"))
        assert b"failedAttempts" in written, (
            "no failure was recorded in a file: the file check proved nothing"
        )


def test_a_summary_that_echoes_the_key_is_not_written(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        lambda key, n, body, headers: Act(text=f"## Goal\nmy key is {headers.get('authorization')}")
    )
    settings = merged(
        FAST,
        {
            "compaction": {"keepRecentTokens": 300, "shortSummary": False},
            "summarizer": {"candidates": [provider.candidate(apiKeyEnv="PROOF_API_KEY")]},
        },
    )
    env = isolated_env(tmp_path / "d", settings, PROOF_API_KEY=KEY)
    daemon, peer = stdio_daemon(tmp_path / "d", env=env)
    try:
        peer.initialize()
        path = keyed_session(tmp_path / "sessions", "echo")
        sid = peer.call("session/open", {"path": str(path)})["sessionId"]
        peer.call("compaction/run", {"sessionId": sid})
    finally:
        daemon.stop()
        provider.stop()
    assert SECRET_PART.encode() not in path.read_bytes()


# -- the settings file ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("file_mode", [0o666, 0o620, 0o602, 0o600, 0o644])
def test_a_settings_file_others_can_write_is_warned_about(tmp_path: Path, file_mode: int) -> None:
    env = isolated_env(tmp_path)
    settings_path = write_settings(env, FAST, mode=file_mode)
    daemon, peer = stdio_daemon(tmp_path, env=env, log_file=True)
    try:
        warnings = peer.initialize().get("warnings", [])
        time.sleep(0.05)
    finally:
        daemon.stop()
    writable_by_others = bool(file_mode & 0o022)
    in_initialize = [
        w for w in warnings if "writable by other users" in w and str(settings_path) in w
    ]
    assert bool(in_initialize) == writable_by_others, warnings
    assert ("writable by other users" in daemon.all_logs()) == writable_by_others


def test_nothing_listens_on_a_network_port_in_stdio_mode(tmp_path: Path) -> None:
    daemon, peer = stdio_daemon(tmp_path)
    try:
        peer.initialize()
        inodes = {
            link.split("[")[1].rstrip("]")
            for link in (
                os.readlink(f) for f in Path(f"/proc/{daemon.pid}/fd").iterdir() if f.is_symlink()
            )
            if link.startswith("socket:[")
        }
        listening = set()
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A":  # LISTEN
                    listening.add(fields[9])
        assert not inodes & listening
    finally:
        daemon.stop()
