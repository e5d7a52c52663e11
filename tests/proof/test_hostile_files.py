"""Hostile files: whatever sits at a session's path or beside it cannot redirect, freeze or
widen what the daemon writes, and an error never quotes a file that is not a session.

Against real ``sessiond serve`` processes and the CLI:

- A symlink (to an existing file or dangling, outside ``storage.allowedRoots``) or a hard
  link at ``<session>.lock`` is refused with ``invalidSessionFile`` when ``session/open`` or
  ``session/new`` takes the lock; the target keeps its bytes and mtime, nothing appears at a
  dangling link's target, and the link is left where it was. Closing a session removes
  its lock only while it is still the file that was locked.
- A FIFO, or a link to ``/dev/null``, at ``.lock`` is the same specific error (never -32603)
  and costs the daemon no file descriptor.
- Pruning appends context edits to the session and opens nothing beside it: a symlink or
  a file others can write planted at ``<session>.pruned`` (the archive older sessiond
  wrote) is left alone and the session only grows. A ``.lock`` a stopped sessiond left that
  others can only read is made 0600. oh-my-pi's files are pruned in place, their outputs
  archived in ``.pruned`` first: a link planted there refuses the pruning, its target
  untouched.
- A FIFO as the session path: ``session/open``, ``session/new``, the read-only CLI commands
  answer at once, ``session/list`` skips it (and symlinks), another client is served
  meanwhile, and SIGTERM still stops the daemon.
- A session path that is a symlink is refused; a session file swapped for a link while
  open is not appended through.
- Under ``umask 0`` the daemon creates files 0600 and directories 0700 (new sessions,
  their directories, the lock, ``.corrupt``, the log file, the tokenizer cache); an
  append keeps an existing file's own mode; a link planted at ``.corrupt`` is
  skipped, not written through.
- Opening an SSH key or a JSON credentials file as a session says it is not a session
  file without quoting it: not in the error, the CLI's message or the daemon's log.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sessiond.core.title_slot import serialize_title_slot
from sessiond.store.session import SessionStore
from tests.proof.support import (
    FAST,
    Peer,
    RpcError,
    assert_no_traceback,
    isolated_env,
    listening_daemon,
    merged,
    stdio_daemon,
    timeout_for,
)
from tests.store.helpers import assistant, tool_result, user

pytestmark = pytest.mark.timeout(timeout_for(180, 600))

# Long enough for a busy machine; a daemon blocked in open() never answers at all.
PROMPT = 10.0


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path, follow_symlinks=False).st_mode)


def fingerprint(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), os.stat(path).st_mtime_ns


def write_session(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with SessionStore.create("/p", path=path) as store:
        store.append(user("hello"))
        store.append(assistant("hi"))
    return path


def prunable_session(path: Path) -> Path:
    """Old tool outputs worth pruning at the end of the turn (as in the service tests):
    three of the six 60,000-character results go, which avoids a compaction."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with SessionStore.create("/p", path=path) as store:
        store.append(user("run the tools"))
        for index in range(6):
            store.append(assistant("", input=1000, stop="toolUse"))
            store.append(tool_result("o" * 60_000, tool="bash", call_id=f"c{index}"))
        store.append(assistant("summary of work", input=89_000))
    return path


def refused(peer: Peer, method: str, params: dict[str, Any], reason: str) -> RpcError:
    """The request fails at once with ``invalidSessionFile`` for ``reason``, cleanly."""
    with pytest.raises(RpcError) as caught:
        peer.call(method, params, timeout=PROMPT)
    error = caught.value
    assert (error.code, error.kind) == (-32017, "invalidSessionFile"), error.response
    assert error.data.get("reason") == reason, error.response
    assert_no_traceback([error.response])
    return error


def open_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


# -- links at the lock ---------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["session/open", "session/new"])
@pytest.mark.parametrize("planted", ["symlink", "dangling symlink", "hard link"])
def test_a_link_at_the_lock_is_refused_and_its_target_untouched(
    tmp_path: Path, method: str, planted: str
) -> None:
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    allowed.mkdir()
    outside.mkdir()
    session = allowed / "s.jsonl"
    if method == "session/open":
        write_session(session)
    target = (allowed if planted == "hard link" else outside) / "precious.txt"
    lock = allowed / "s.jsonl.lock"
    if planted == "dangling symlink":
        lock.symlink_to(target)
    else:
        target.write_bytes(b"the user's own file\n")
        os.utime(target, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
        if planted == "symlink":
            lock.symlink_to(target)
        else:
            os.link(target, lock)
    before = fingerprint(target) if target.exists() else None
    settings = merged(FAST, {"storage": {"allowedRoots": [str(allowed)]}})
    daemon, peer = stdio_daemon(tmp_path / "d", settings)
    try:
        peer.initialize()
        params = (
            {"path": str(session)}
            if method == "session/open"
            else {"cwd": "/p", "path": str(session), "writeNow": True}
        )
        error = refused(peer, method, params, "hardLink" if planted == "hard link" else "symlink")
        assert error.data["path"] == str(lock)
        if method == "session/open":
            # the daemon goes on serving, and the session itself was not harmed
            assert peer.call("session/list", {"sessionDir": str(allowed)})["sessions"]
    finally:
        daemon.stop()
    if planted == "hard link":
        assert lock.exists() and os.stat(lock).st_ino == os.stat(target).st_ino
    else:
        assert lock.is_symlink(), "the daemon removed a link it did not create"
    if before is None:
        assert not target.exists(), "a file was created at a dangling link's target"
        assert list(outside.iterdir()) == []
    else:
        assert fingerprint(target) == before, "the link's target was written"


def test_closing_removes_only_the_lock_file_it_made(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s" / "s.jsonl")
    lock = session.with_name(session.name + ".lock")
    moved = tmp_path / "elsewhere.lock"
    daemon, peer = stdio_daemon(tmp_path / "d", FAST)
    try:
        peer.initialize()
        sid = peer.call("session/open", {"path": str(session)})["sessionId"]
        # someone moves the lock file away and leaves a link to it in its place
        lock.rename(moved)
        lock.symlink_to(moved)
        assert peer.call("session/close", {"sessionId": sid})["closed"] is True
    finally:
        daemon.stop()
    assert lock.is_symlink(), "closing removed a link the daemon did not make"
    assert moved.exists()


@pytest.mark.parametrize("planted", ["fifo", "link to /dev/null"])
def test_a_fifo_or_device_at_the_lock_is_a_specific_error_and_costs_no_descriptor(
    tmp_path: Path, planted: str
) -> None:
    session = write_session(tmp_path / "s" / "s.jsonl")
    lock = session.with_name(session.name + ".lock")
    if planted == "fifo":
        os.mkfifo(lock)
    else:
        lock.symlink_to(os.devnull)
    reason = "notAFile" if planted == "fifo" else "symlink"
    daemon, peer = stdio_daemon(tmp_path / "d", FAST)
    try:
        peer.initialize()
        refused(peer, "session/open", {"path": str(session)}, reason)
        before = open_descriptors(daemon.pid)
        for _ in range(20):
            refused(peer, "session/open", {"path": str(session)}, reason)
        assert open_descriptors(daemon.pid) == before, "refused opens leaked descriptors"
    finally:
        daemon.stop()
    assert stat.S_ISFIFO(os.lstat(lock).st_mode) if planted == "fifo" else lock.is_symlink()


# -- a link at the pruned-output archive ------------------------------------------------------


def plant_archive_link(
    session: Path, outside: Path, planted: str
) -> tuple[Path, Path, tuple[bytes, int] | None]:
    """A symlink at ``<session>.pruned`` to a user's file outside (or to nowhere): the
    link, its target and the target's fingerprint (None for a dangling link)."""
    outside.mkdir()
    target = outside / "precious.txt"
    before = None
    if planted == "symlink":
        target.write_bytes(b"the user's own file\n")
        before = fingerprint(target)
    archive = session.with_name(session.name + ".pruned")
    archive.symlink_to(target)
    return archive, target, before


def assert_untouched(target: Path, before: tuple[bytes, int] | None) -> None:
    if before is None:
        assert not target.exists(), "a file was created at a dangling link's target"
    else:
        assert fingerprint(target) == before, "pruned output reached the link's target"


@pytest.mark.parametrize("planted", ["symlink", "dangling symlink"])
def test_pruning_never_opens_a_file_beside_the_session(tmp_path: Path, planted: str) -> None:
    """Pruning appends pi 1.6 context_edit entries to the session itself; a link planted at
    the old archive's name (``.pruned``) is never followed, and the session is never
    rewritten: what was in it stays, byte for byte."""
    session = prunable_session(tmp_path / "s" / "s.jsonl")
    original = session.read_bytes()
    archive, target, before = plant_archive_link(session, tmp_path / "outside", planted)
    daemon, peer = stdio_daemon(tmp_path / "d", FAST)
    try:
        peer.initialize()
        sid = peer.call("session/open", {"path": str(session)})["sessionId"]
        turn = {"sessionId": sid, "contextWindow": 100_000}
        assert peer.call("agent/turnEnded", turn)["prunedEntries"] == 3
    finally:
        daemon.stop()
    grown = session.read_bytes()
    assert grown.startswith(original), "the session was rewritten"
    assert grown[len(original) :].count(b'"type":"context_edit"') == 3
    assert archive.is_symlink()
    assert_untouched(target, before)


@pytest.mark.parametrize("planted", ["symlink", "dangling symlink"])
def test_a_link_at_the_archive_of_an_oh_my_pi_session_stops_its_pruning(
    tmp_path: Path, planted: str
) -> None:
    """oh-my-pi's files are pruned in place, their outputs first copied to ``.pruned``: a
    link planted there refuses the pruning, its target untouched; without it the same
    turn prunes into a new private archive and the title line stays."""
    session = prunable_session(tmp_path / "s" / "s.jsonl")
    slot = serialize_title_slot("Pruned", "user", "2026-09-27T09:00:00.000Z")
    session.write_bytes(slot + session.read_bytes())
    original = session.read_bytes()
    archive, target, before = plant_archive_link(session, tmp_path / "outside", planted)
    daemon, peer = stdio_daemon(tmp_path / "d", FAST)
    try:
        peer.initialize()
        sid = peer.call("session/open", {"path": str(session)})["sessionId"]
        turn = {"sessionId": sid, "contextWindow": 100_000}
        error = refused(peer, "agent/turnEnded", turn, "symlink")
        assert error.data["path"] == str(archive)
        assert session.read_bytes() == original, "outputs were pruned without their archive"
        archive.unlink()
        assert peer.call("agent/turnEnded", turn)["prunedEntries"] == 3
        assert not archive.is_symlink() and mode(archive) == 0o600
    finally:
        daemon.stop()
    pruned = session.read_bytes()
    assert pruned.startswith(slot) and pruned.count(b'"prunedAt"') == 3
    assert b'"context_edit"' not in pruned
    assert_untouched(target, before)


def test_a_lock_others_can_read_is_made_private_and_a_planted_archive_is_left_alone(
    tmp_path: Path,
) -> None:
    session = prunable_session(tmp_path / "s" / "s.jsonl")
    # as another local user would leave them in a shared directory
    archive = session.with_name(session.name + ".pruned")
    archive.write_bytes(b"planted\n")
    archive.chmod(0o666)
    before = fingerprint(archive)
    # a lock a stopped sessiond left, made readable by others since
    lock = session.with_name(session.name + ".lock")
    stale = {"pid": 1, "host": "h", "program": "sessiond 0.1.0", "since": "2026-01-01T00:00:00Z"}
    lock.write_text(json.dumps(stale) + "\n")
    lock.chmod(0o644)
    daemon, peer = stdio_daemon(tmp_path / "d", FAST)
    try:
        peer.initialize()
        sid = peer.call("session/open", {"path": str(session)})["sessionId"]
        assert mode(lock) == 0o600, "a lock others could read was kept as it was"
        turn = {"sessionId": sid, "contextWindow": 100_000}
        assert peer.call("agent/turnEnded", turn)["prunedEntries"] == 3
    finally:
        daemon.stop()
    assert fingerprint(archive) == before, "pruned output went into a file others can write"


# -- FIFOs and links as the session path ------------------------------------------------------------


def test_a_fifo_as_the_session_is_refused_at_once_while_others_are_served(
    tmp_path: Path,
) -> None:
    sessions = tmp_path / "sessions"
    good = write_session(sessions / "good.jsonl")
    fifo = sessions / "fifo.jsonl"
    os.mkfifo(fifo)
    (sessions / "link.jsonl").symlink_to(write_session(tmp_path / "elsewhere" / "e.jsonl"))
    daemon = listening_daemon(tmp_path / "d", ["--socket", str(tmp_path / "d.sock")])
    try:
        hostile, other = daemon.unix_peer("hostile"), daemon.unix_peer("other")
        hostile.initialize()
        other.initialize()
        # Sent without waiting: an open that blocked would stall every other client.
        opening = hostile.start("session/open", {"path": str(fifo)})
        assert other.call("session/open", {"path": str(good)}, timeout=PROMPT)["entryCount"] == 2
        response = hostile.wait(opening, timeout=PROMPT)
        assert response["error"]["data"]["reason"] == "notAFile", response
        new = {"cwd": "/p", "path": str(fifo), "writeNow": True}
        refused(hostile, "session/new", new, "notAFile")
        listed = other.call("session/list", {"sessionDir": str(sessions)}, timeout=PROMPT)
        assert [s["path"] for s in listed["sessions"]] == [str(good)], (
            "a listing shows only regular files: not the FIFO, not the link"
        )
        daemon.process.send_signal(signal.SIGTERM)
        try:
            daemon.process.wait(PROMPT)
        except subprocess.TimeoutExpired:
            pytest.fail("SIGTERM did not stop the daemon")
    finally:
        daemon.kill()
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced"


@pytest.mark.parametrize("command", ["info", "tree", "context"])
def test_the_cli_refuses_a_fifo_at_once(tmp_path: Path, command: str) -> None:
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "sessiond", command, str(fifo)],
            capture_output=True,
            text=True,
            env=isolated_env(tmp_path, FAST),
            timeout=PROMPT * 3,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"sessiond {command} blocked on a FIFO")
    assert result.returncode != 0
    assert "FIFO" in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_a_session_path_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    real = write_session(tmp_path / "real" / "s.jsonl")
    link = tmp_path / "links" / "s.jsonl"
    link.parent.mkdir()
    link.symlink_to(real)
    daemon, peer = stdio_daemon(tmp_path / "d", FAST)
    try:
        peer.initialize()
        error = refused(peer, "session/open", {"path": str(link)}, "symlink")
        assert "symbolic link" in error.message
        new = {"cwd": "/p", "path": str(link), "writeNow": True}
        refused(peer, "session/new", new, "symlink")
        # the file itself, by its own path, opens as usual
        assert peer.call("session/open", {"path": str(real)})["entryCount"] == 2
    finally:
        daemon.stop()
    assert not link.with_name("s.jsonl.lock").exists(), "a lock was made beside the link"


def test_a_session_swapped_for_a_link_while_open_is_not_written_through(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s" / "s.jsonl")
    target = tmp_path / "outside" / "precious.jsonl"
    target.parent.mkdir()
    target.write_bytes(session.read_bytes())  # even a file that looks like the session
    before = fingerprint(target)
    daemon, peer = stdio_daemon(tmp_path / "d", FAST)
    try:
        peer.initialize()
        sid = peer.call("session/open", {"path": str(session)})["sessionId"]
        session.unlink()
        session.symlink_to(target)
        append = {"sessionId": sid, "entries": [user("more")]}
        refused(peer, "session/append", append, "symlink")
    finally:
        daemon.stop()
    assert fingerprint(target) == before, "the append went through the link"


# -- modes ----------------------------------------------------------------------------------------


def test_everything_the_daemon_creates_is_private_whatever_the_umask(tmp_path: Path) -> None:
    torn = write_session(tmp_path / "torn" / "t.jsonl")
    with torn.open("ab") as handle:
        handle.write(b'{"type":"message","id":"cut')
    decoy = tmp_path / "decoy.txt"
    decoy.write_bytes(b"not for the daemon\n")
    decoy_before = fingerprint(decoy)
    torn.with_name("t.jsonl.corrupt").symlink_to(decoy)
    prunable = prunable_session(tmp_path / "prune" / "p.jsonl")
    prunable.chmod(0o640)  # the user's choice: pruning (an append) keeps it
    fresh = tmp_path / "fresh" / "deeper"
    env = isolated_env(tmp_path / "d", FAST)
    data_home = Path(env["XDG_DATA_HOME"])
    old = os.umask(0)
    try:
        daemon, peer = stdio_daemon(tmp_path / "d", env=env, log_file=True)
    finally:
        os.umask(old)
    try:
        peer.initialize()
        assert daemon.log_path is not None and mode(daemon.log_path) == 0o600
        created = peer.call(
            "session/new", {"cwd": "/p", "sessionDir": str(fresh), "writeNow": True}
        )
        path = Path(created["path"])
        assert mode(path) == 0o600, oct(mode(path))
        assert mode(path.with_name(path.name + ".lock")) == 0o600
        assert (mode(fresh), mode(fresh.parent)) == (0o700, 0o700)
        default = Path(peer.call("session/new", {"cwd": "/w/p", "writeNow": True})["path"])
        made = [default.parent, default.parent.parent, default.parent.parent.parent]
        assert made[-1] == data_home / "sessiond"
        assert [oct(mode(d)) for d in made] == [oct(0o700)] * 3
        assert mode(default) == 0o600

        repaired = peer.call("session/open", {"path": str(torn)})["recovery"]["tornTail"]
        saved = Path(repaired["savedTo"])
        assert saved.name == "t.jsonl.corrupt.1", "the link at .corrupt was not skipped"
        assert mode(saved) == 0o600

        sid = peer.call("session/open", {"path": str(prunable)})["sessionId"]
        turn = {"sessionId": sid, "contextWindow": 100_000}
        assert peer.call("agent/turnEnded", turn)["prunedEntries"] == 3
        assert not prunable.with_name("p.jsonl.pruned").exists()
        assert mode(prunable) == 0o640, "pruning changed the file's own mode"
    finally:
        daemon.stop()
    assert fingerprint(decoy) == decoy_before


def test_the_tokenizer_cache_is_private_whatever_the_umask(tmp_path: Path) -> None:
    session = write_session(tmp_path / "s" / "s.jsonl")
    env = isolated_env(tmp_path / "cli")  # default settings: the tiktoken estimator
    # the test process may have set one (tokenizer imported in-process): use the default
    env.pop("TIKTOKEN_CACHE_DIR", None)
    result = subprocess.run(
        [sys.executable, "-m", "sessiond", "info", str(session)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
        umask=0,
    )
    assert result.returncode == 0, result.stderr
    cache = Path(env["XDG_CACHE_HOME"]) / "sessiond"
    files = [p for p in cache.rglob("*") if p.is_file()]
    assert files, "the tokenizer wrote no cache: the test proved nothing"
    assert [oct(mode(d)) for d in (cache, cache / "tiktoken")] == [oct(0o700)] * 2
    assert [oct(mode(f)) for f in files] == [oct(0o600)] * len(files)


# -- errors never quote a file that is not a session ------------------------------------------------

KEY_FILE = (
    b"-----BEGIN OPENSSH PRIVATE KEY-----\n"
    b"b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    b"-----END OPENSSH PRIVATE KEY-----\n"
)
CREDENTIALS = b'{"type":"service_account","private_key":"MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"}\n'
ODD_VERSION = b'{"type":"session","version":"hunter2-is-my-password","id":"x"}\n'
FRAGMENTS = ("BEGIN", "OPENSSH", "b3BlbnNz", "service_account", "MIIEvQ", "hunter2")


def test_an_error_never_quotes_a_file_that_is_not_a_session(tmp_path: Path) -> None:
    files = tmp_path / "files"
    files.mkdir()
    for name, content in (
        ("id_ed25519.jsonl", KEY_FILE),
        ("creds.jsonl", CREDENTIALS),
        ("odd.jsonl", ODD_VERSION),
    ):
        (files / name).write_bytes(content)
    daemon, peer = stdio_daemon(tmp_path / "d", FAST)
    env = isolated_env(tmp_path / "cli", FAST)
    cli_output = []
    try:
        peer.initialize()
        for path in sorted(files.iterdir()):
            with pytest.raises(RpcError) as caught:
                peer.call("session/open", {"path": str(path)})
            assert caught.value.kind == "invalidSessionFile", caught.value.response
            result = subprocess.run(
                [sys.executable, "-m", "sessiond", "info", str(path)],
                capture_output=True,
                text=True,
                env=env,
                timeout=60,
                check=False,
            )
            assert result.returncode != 0 and str(path) in result.stderr, result.stderr
            cli_output.append(result.stdout + result.stderr)
        assert peer.call("session/list", {"sessionDir": str(files)})["sessions"] == []
    finally:
        daemon.stop()
    said = [body.decode("utf-8", "replace") for body in peer.bodies]
    said += [*cli_output, daemon.all_logs()]
    quoted = [f"{part}: {text[:300]}" for text in said for part in FRAGMENTS if part in text]
    assert quoted == [], quoted
