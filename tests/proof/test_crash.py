"""SIGKILL at random moments: what was acknowledged survives, and the file always opens.

Two writers are killed over and over:

- ``drivers/append_driver.py``: a client that appends through ``sessiond serve --stdio``
  (batches from a few bytes to 2.5 MB, labels, under each fsync policy in turn). The
  driver and its daemon share a process group and die together.
- ``drivers/store_driver.py``: the store and the service in-process: appends, pruning
  (appended context edits), compactions with the offline summarizer, and migrations of
  v1 files (atomic rewrite on open).

A process kill leaves the page cache alone: with the ``batch`` and ``never`` policies an
acknowledged append is in the page cache when the answer is sent, and survives the kill
(not a power cut; the tests cannot pull the plug). After every kill: every acknowledged
entry is in the file with its content; the file opens with at most a torn tail and no
other damage; it is one chain whose leaf is the last line; the context builds; every
compaction's kept entry is on its own path; a pruned output is still in its entry, and an
acknowledged pruning's edit targets it; a v1 file
is either untouched or fully migrated; leftover ``.tmp`` files are never listed.
Torn tails are repaired (by the test or by the next writer) into ``.corrupt`` files that
hold exactly the bytes cut off.
"""

from __future__ import annotations

import collections
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import pytest

from sessiond.store.listing import list_sessions
from sessiond.store.session import SessionStore
from tests.proof.drivers.store_driver import tool_text, v1_lines
from tests.proof.support import FAST, count, isolated_env, merged, timeout_for, write_settings

DRIVERS = Path(__file__).parent / "drivers"
KILLS = count(30, 200)
POLICIES = ("batch", "always", "never")
ROTATE_BYTES = 16 << 20
SEED = int(os.environ.get("SESSIOND_CRASH_SEED", "0")) or int(time.time())

pytestmark = pytest.mark.timeout(timeout_for(240, 3600))


# -- what the writers acknowledged ------------------------------------------------------------


def read_acks(path: Path) -> list[tuple[str, Any]]:
    if not path.exists():
        return []
    acks = []
    for line in path.read_bytes().split(b"\n"):
        if line:
            kind, value = json.loads(line)
            acks.append((kind, value))
    return acks


def wait_gone(pid: int, timeout: float = 10) -> None:
    """Until ``pid`` is dead (a zombie counts as dead: it cannot write any more)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, IndexError):
            return
        if state in ("Z", "X"):
            return
        time.sleep(0.005)
    raise AssertionError(f"process {pid} still alive after SIGKILL")


def wait_until_ready(
    acks_path: Path, driver: subprocess.Popen[bytes], what: str = "ready", timeout: float = 15
) -> None:
    """Until the driver has written a ``what`` line (``ready``: the session is open)."""
    deadline = time.monotonic() + timeout
    while not any(kind == what for kind, _ in read_acks(acks_path)):
        assert driver.poll() is None, "the driver exited on its own"
        assert time.monotonic() < deadline, f"no {what} from the driver in time"
        time.sleep(0.002)


# -- checks shared by both writers ---------------------------------------------------------------


def opened(path: Path) -> Iterator[SessionStore]:
    store = SessionStore.open(path, readonly=True)
    try:
        yield store
    finally:
        store.close()


def check_file(store: SessionStore) -> bytes | None:
    """Damage other than a torn tail fails; returns the torn bytes, if any."""
    report = store.recovery
    assert not report.damaged_lines, report.damaged_lines
    assert not report.duplicate_ids and not report.unreadable_entries, report
    assert not report.invalid_utf8_lines and report.blank_lines == 0, report
    records = store.records()
    previous = None
    for record in records:
        assert record.parent_id == previous, f"{record.id} is not the child of {previous}"
        previous = record.id
    assert store.leaf_id == (records[-1].id if records else None)
    store.build_context()
    if report.torn_tail is None:
        return None
    data = store.path.read_bytes()
    assert len(data) == report.torn_tail.offset + report.torn_tail.length
    return data[report.torn_tail.offset :]


def corrupt_contents(path: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted(path.parent.glob(path.name + ".corrupt*"))]


def repair(path: Path, torn: bytes) -> None:
    """Open for writing, as a writer would: the torn bytes go to a new .corrupt file."""
    before = len(path.read_bytes())
    saved = corrupt_contents(path)
    SessionStore.open(path).close()
    assert len(path.read_bytes()) == before - len(torn)
    new = corrupt_contents(path)
    assert len(new) == len(saved) + 1 and torn in new


def check_listing(directory: Path, expected: set[Path]) -> None:
    listed = {Path(s.path) for s in list_sessions(directory)}
    assert not any(p.name.endswith(".tmp") or p.name.startswith(".") for p in listed), listed
    assert expected <= listed, expected - listed


@dataclass
class Tally:
    kills: int = 0
    torn: int = 0
    repaired_by_test: int = 0
    acked_entries: int = 0
    landed: collections.Counter[str] = field(default_factory=collections.Counter)
    leftover_tmp: int = 0

    def line(self) -> str:
        return (
            f"{self.kills} kills, {self.acked_entries} acknowledged entries, {self.torn} torn "
            f"tails ({self.repaired_by_test} repaired by the test, the rest by the next writer), "
            f"{self.leftover_tmp} leftover .tmp files, kills landed in: {dict(self.landed)}"
        )


# -- the daemon writer -----------------------------------------------------------------------------


def new_session(directory: Path) -> Path:
    store = SessionStore.create("/crash/project", session_dir=directory)
    store.write_now()
    path = store.path
    store.close()
    return path


def test_sigkill_while_appending_through_the_daemon(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    env = isolated_env(tmp_path, FAST)
    directory = tmp_path / "sessions"
    sessions: dict[Path, dict[str, str | None]] = {}
    current = new_session(directory)
    sessions[current] = {}
    pending_torn: dict[Path, list[bytes]] = collections.defaultdict(list)
    tally = Tally()
    for kill in range(KILLS):
        if current.stat().st_size > ROTATE_BYTES:
            current = new_session(directory)
            sessions[current] = {}
        policy = POLICIES[kill % len(POLICIES)]
        write_settings(env, merged(FAST, {"storage": {"fsync": policy}}))
        acks_path = tmp_path / f"acks-{kill}.log"
        with open(tmp_path / f"driver-{kill}.err", "wb") as err:
            driver = subprocess.Popen(
                [
                    sys.executable,
                    str(DRIVERS / "append_driver.py"),
                    str(current),
                    str(acks_path),
                    str(SEED * 1000 + kill),
                ],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
            )
        roll = rng.random()
        if roll < 0.2:
            time.sleep(rng.uniform(0.0, 0.7))  # during start-up: the open, the repair
        elif roll < 0.5:
            wait_until_ready(acks_path, driver, "big")  # aimed at a megabytes-long write()
            time.sleep(rng.uniform(0.0, 0.015))
        else:
            wait_until_ready(acks_path, driver)
            time.sleep(rng.uniform(0.0, 0.5))
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
        acks = read_acks(acks_path)
        for kind, value in acks:
            if kind == "pid":
                wait_gone(value)
        tally.kills += 1
        assert not [a for a in acks if a[0] in ("error", "openFailed")], (
            acks,
            (tmp_path / f"driver-{kill}.err").read_text(),
        )
        kinds = [kind for kind, _ in acks]
        if "ready" not in kinds:
            tally.landed["start-up"] += 1
        elif roll >= 0.2 and roll < 0.5:
            tally.landed["aimed at a big write"] += 1
        else:
            tally.landed["appending"] += 1
        acked = sessions[current]
        for kind, value in acks:
            if kind == "append":
                for entry_id, marker in value:
                    acked[entry_id] = marker
            elif kind == "label":
                acked[value[0]] = None
        for store in opened(current):
            torn = check_file(store)
            for entry_id, marker in acked.items():
                assert store.has_entry(entry_id), (
                    f"acknowledged entry {entry_id} lost (kill {kill}, {policy})"
                )
                if marker is not None:
                    assert marker.encode() in store.raw_line(store.record(entry_id))
        if torn is not None:
            tally.torn += 1
            if rng.random() < 0.5:
                repair(current, torn)
                tally.repaired_by_test += 1
            else:
                pending_torn[current].append(torn)
    for path, acked in sessions.items():
        for store in opened(path):
            torn = check_file(store)
            assert all(store.has_entry(entry_id) for entry_id in acked)
        if torn is not None:
            repair(path, torn)
        saved = corrupt_contents(path)
        for torn in pending_torn[path]:
            assert torn in saved, "a torn tail was cut off without being saved aside"
        tally.acked_entries += len(acked)
    tally.leftover_tmp = len(list(directory.glob(".*.tmp")))
    check_listing(directory, set(sessions))
    print(f"\ndaemon appends (seed {SEED}): {tally.line()}")
    assert tally.acked_entries > KILLS, "the writer barely wrote anything: the test proved little"


# -- the store and service writer -------------------------------------------------------------------


@dataclass
class StoreState:
    appended: dict[str, tuple[str, int]] = field(
        default_factory=dict
    )  # tool result id -> (marker, size)
    entry_ids: set[str] = field(default_factory=set)
    pruned: set[str] = field(default_factory=set)
    compactions: set[str] = field(default_factory=set)
    v1: dict[str, tuple[int, str]] = field(default_factory=dict)  # name -> (seed, sha)
    migrated: set[str] = field(default_factory=set)


def take_acks(state: StoreState, acks: list[tuple[str, Any]]) -> str:
    """Record what was acknowledged; returns what the writer was doing when killed."""
    doing = "start-up"
    for kind, value in acks:
        if kind == "begin":
            doing = value
            continue
        if kind in ("append", "prune", "compact", "compactSkipped", "migrated", "open"):
            doing = "between operations"
        if kind == "v1":
            doing = "migrate"
        if kind == "append":
            state.entry_ids.update(value["ids"])
            state.appended[value["ids"][2]] = (value["marker"], value["size"])
        elif kind == "prune":
            state.pruned.update(value["targets"])
            state.entry_ids.update(value["edits"])
        elif kind == "compact":
            state.compactions.add(value["id"])
        elif kind == "v1":
            state.v1[value["name"]] = (value["seed"], value["sha"])
        elif kind == "migrated":
            state.migrated.add(value)
    return doing


def check_main(path: Path, state: StoreState) -> bytes | None:
    for store in opened(path):
        torn = check_file(store)
        missing = state.entry_ids - {r.id for r in store.records()}
        assert not missing, f"acknowledged entries lost: {sorted(missing)[:5]}"
        edited: dict[str, str] = {}
        for record in store.records():
            if record.type == "context_edit":
                edit = msgspec.json.decode(store.raw_line(record))
                edited[edit["targetId"]] = edit["replacement"]["content"][0]["text"]
        for entry_id, (marker, size) in state.appended.items():
            line = msgspec.json.decode(store.raw_line(store.record(entry_id)))
            # pruning never changes an entry: the output stays in the file
            assert line["message"]["content"][0]["text"] == tool_text(marker, size)
            if entry_id in state.pruned:
                assert entry_id in edited, f"acknowledged pruning of {entry_id} lost"
            if entry_id in edited:
                assert edited[entry_id].startswith("[Output truncated - ")
        on_file = set()
        for record in store.records():
            if record.type != "compaction":
                continue
            on_file.add(record.id)
            entry = msgspec.json.decode(store.raw_line(record))
            assert entry["summary"]
            ancestors = {r.id for r in store.path_records(record.id)}
            assert entry["firstKeptEntryId"] in ancestors, "a compaction kept an entry off its path"
        assert state.compactions <= on_file, "an acknowledged compaction was lost"
        context = store.build_context()
        path_types = [r.type for r in store.path_records()]
        if "compaction" in path_types:
            assert type(context.messages[0]).__name__ == "CompactionSummaryMessage"
    return torn


def check_legacy(directory: Path, state: StoreState) -> int:
    """Every v1 file is either exactly as written or wholly migrated; returns how many migrated."""
    migrated = 0
    for path in directory.glob("legacy-*.jsonl"):
        seed = int(path.stem.split("-")[1])
        original = v1_lines(seed)
        data = path.read_bytes()
        if data == b"".join(line + b"\n" for line in original):
            assert path.name not in state.migrated, f"{path.name}: acknowledged migration lost"
            continue
        header = json.loads(data.split(b"\n", 1)[0])
        assert header["version"] == 3, f"{path.name} is neither v1 nor migrated"
        migrated += 1
        for store in opened(path):
            assert store.recovery.clean, store.recovery
            entries = [msgspec.json.decode(store.raw_line(r)) for r in store.records()]
            expected = [json.loads(line) for line in original[1:]]
            assert len(entries) == len(expected)
            for got, want in zip(entries, expected):
                assert got.get("message") == want.get("message") and got["type"] == want["type"]
            compaction = next(e for e in entries if e["type"] == "compaction")
            assert compaction["firstKeptEntryId"] == entries[2]["id"]
            assert "firstKeptEntryIndex" not in compaction
    return migrated


def test_sigkill_during_rewrites_migrations_and_compactions(tmp_path: Path) -> None:
    rng = random.Random(SEED + 1)
    env = isolated_env(tmp_path)
    zygote = subprocess.Popen(
        [sys.executable, str(DRIVERS / "store_driver.py")],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=open(tmp_path / "zygote.err", "wb"),  # noqa: SIM115 - the process owns it
        text=True,
        bufsize=1,
    )
    assert zygote.stdin is not None and zygote.stdout is not None
    tally = Tally()
    workdirs: list[tuple[Path, StoreState]] = []
    pending_torn: list[tuple[Path, bytes]] = []
    totals: collections.Counter[str] = collections.Counter()
    try:
        for kill in range(KILLS):
            if not workdirs or (workdirs[-1][0] / "main.jsonl").stat().st_size > 8 << 20:
                workdir = tmp_path / f"work-{len(workdirs)}"
                workdir.mkdir()
                (workdir / "main.jsonl").write_bytes(new_session(workdir).read_bytes())
                for stray in workdir.glob("*_*.jsonl"):
                    stray.unlink()
                workdirs.append((workdir, StoreState()))
            workdir, state = workdirs[-1]
            acks_path = workdir / "acks.log"
            before = len(read_acks(acks_path))
            zygote.stdin.write(f"run {SEED * 1000 + kill} {workdir}\n")
            child = int(zygote.stdout.readline())
            time.sleep(rng.uniform(0.05, 0.6))
            os.kill(child, signal.SIGKILL)
            reaped = zygote.stdout.readline().split()
            assert reaped[:2] == ["reaped", str(child)], reaped
            assert os.WIFSIGNALED(int(reaped[2])), (tmp_path / "zygote.err").read_text()
            tally.kills += 1
            acks = read_acks(acks_path)[before:]
            tally.landed[take_acks(state, acks)] += 1
            totals.update(kind for kind, _ in acks if kind != "begin")
            torn = check_main(workdir / "main.jsonl", state)
            totals["migrated files checked"] = check_legacy(workdir, state)
            if torn is not None:
                tally.torn += 1
                if rng.random() < 0.5:
                    repair(workdir / "main.jsonl", torn)
                    tally.repaired_by_test += 1
                else:
                    pending_torn.append((workdir / "main.jsonl", torn))
    finally:
        zygote.stdin.close()
        zygote.wait(10)
    for workdir, state in workdirs:
        torn = check_main(workdir / "main.jsonl", state)
        if torn is not None:
            repair(workdir / "main.jsonl", torn)
        check_legacy(workdir, state)
        check_listing(workdir, {workdir / "main.jsonl"})
        tally.acked_entries += len(state.entry_ids)
        tally.leftover_tmp += len(list(workdir.glob(".*.tmp")))
    for path, torn in pending_torn:
        assert torn in corrupt_contents(path), "a torn tail was cut off without being saved aside"
    print(f"\nstore and service (seed {SEED}): {tally.line()}; acknowledged: {dict(totals)}")
    for kind in ("append", "compact", "migrated"):
        assert totals[kind] > 0, f"no {kind} was ever acknowledged: the test proved little"
    assert any(state.pruned for _, state in workdirs), "no pruning was ever acknowledged"
