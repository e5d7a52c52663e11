"""Concurrency: one writer per file across processes, many clients on one session, and
long operations racing each other on one session.

- A second daemon asking for a file the first one has open is refused with
  ``sessionLocked`` naming the first one's pid; it gets the file once the first lets go
  (closes it, or is killed).
- Eight clients on one Unix socket append to one session at once. With
  ``expectedLeafId`` the losers of each race get ``conflict`` and retry, and the file is
  one chain; without it every append still lands once, whole, in each client's order.
- Compaction, navigation, automatic compaction, appends and aborts fired together from
  several clients never graft a summary onto the wrong branch: one of two long
  operations is refused ``busy`` (a manual compaction aborts a running navigation
  instead), and every compaction and branch summary in the file sits where it belongs.
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest

from sessiond.store.session import SessionStore
from tests.fake_provider import Answer, FakeProvider, default_answer
from tests.proof.support import (
    FAST,
    SMALL_COMPACTION,
    Peer,
    RpcError,
    assert_no_traceback,
    assert_single_chain,
    count,
    file_entries,
    listening_daemon,
    merged,
    reopen,
    stdio_daemon,
    timeout_for,
)
from tests.store.helpers import assistant, user

pytestmark = pytest.mark.timeout(timeout_for(180, 1800))

CLIENTS = count(8, 16)
APPENDS = count(30, 400)
STRESS_ROUNDS = count(12, 150)


def written(directory: Path, turns: int = 6, size: int = 400) -> Path:
    with SessionStore.create("/race/project", session_dir=directory) as store:
        for turn in range(turns):
            store.append(user(f"request {turn} " + "words " * size))
            store.append(assistant(f"answer {turn} " + "more " * size, input=2000 * (turn + 1)))
        return store.path


# -- two daemons, one file ----------------------------------------------------------------------


def test_a_second_daemon_is_refused_with_the_owner(tmp_path: Path) -> None:
    path = written(tmp_path / "sessions")
    first, a = stdio_daemon(tmp_path / "first", name="first")
    second, b = stdio_daemon(tmp_path / "second", name="second")
    try:
        a.initialize()
        b.initialize()
        opened = a.call("session/open", {"path": str(path)})
        for method, params in [
            ("session/open", {"path": str(path)}),
            ("session/open", {"path": str(path.parent / ".." / path.parent.name / path.name)}),
        ]:
            with pytest.raises(RpcError) as refused:
                b.call(method, params)
            assert refused.value.code == -32016 and refused.value.kind == "sessionLocked"
            assert f"pid {first.pid}" in refused.value.message
            assert refused.value.data["owner"]["pid"] == first.pid
        # a session created but not written yet is locked too (pi writes lazily)
        fresh = tmp_path / "sessions" / "fresh.jsonl"
        a.call("session/new", {"cwd": "/race", "path": str(fresh)})
        with pytest.raises(RpcError) as refused:
            b.call("session/new", {"cwd": "/race", "path": str(fresh)})
        assert refused.value.kind == "sessionLocked"
        appended = a.call(
            "session/append",
            {"sessionId": opened["sessionId"], "entries": [user("from the first")]},
        )
        a.call("session/close", {"sessionId": opened["sessionId"]})
        taken = b.call("session/open", {"path": str(path)})
        assert taken["leafId"] == appended["leafId"]
        # the second now owns it; killing it leaves a stale lock file that means nothing
        second.kill()
        third, c = stdio_daemon(tmp_path / "third", name="third")
        try:
            c.initialize()
            assert c.call("session/open", {"path": str(path)})["leafId"] == appended["leafId"]
        finally:
            third.stop()
    finally:
        first.stop()
        second.stop()
    reopen(path).close()


# -- many clients, one session ----------------------------------------------------------------------


def _marker(text: str) -> tuple[int, int] | None:
    match = re.search(r"<c(\d+)-(\d+)>", text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _markers_in_file(path: Path) -> list[tuple[int, int]]:
    found = []
    for entry in file_entries(path):
        content = entry["message"]["content"]
        text = content if isinstance(content, str) else content[0]["text"]
        marker = _marker(text)
        assert marker is not None
        found.append(marker)
    return found


@pytest.mark.parametrize("guarded", [True, False], ids=["expectedLeafId", "blind"])
def test_many_clients_append_to_one_session(tmp_path: Path, guarded: bool) -> None:
    daemon = listening_daemon(tmp_path, ["--socket", str(tmp_path / "s.sock")])
    try:
        peers = [daemon.unix_peer(f"c{n}") for n in range(CLIENTS)]
        for peer in peers:
            peer.initialize()
        created = peers[0].call(
            "session/new",
            {"cwd": "/race", "sessionDir": str(tmp_path / "sessions"), "writeNow": True},
        )
        session_id, path = created["sessionId"], Path(created["path"])
        for peer in peers[1:]:
            assert peer.call("session/open", {"path": str(path)})["sessionId"] == session_id
        acked: list[list[tuple[int, list[str]]]] = [[] for _ in peers]
        conflicts = Counter[int]()
        failures: list[str] = []
        start = threading.Barrier(len(peers))

        def work(n: int, peer: Peer) -> None:
            rng = random.Random(n)
            leaf: str | None = None
            start.wait()
            try:
                for seq in range(APPENDS):
                    batch = [
                        (user if k % 2 == 0 else assistant)(
                            f"<c{n}-{seq}> part {k} " + "z" * rng.randint(0, 3000)
                        )
                        for k in range(rng.randint(1, 3))
                    ]
                    while True:
                        params: dict[str, Any] = {"sessionId": session_id, "entries": batch}
                        if guarded:
                            params["expectedLeafId"] = leaf or ""  # "": no entry yet
                        try:
                            result = peer.call("session/append", params)
                        except RpcError as err:
                            if not guarded or err.kind != "conflict" or err.code != -32011:
                                raise
                            conflicts[n] += 1
                            leaf = err.data["leafId"]
                            continue
                        acked[n].append((seq, result["ids"]))
                        leaf = result["leafId"]
                        break
            except BaseException as exc:
                failures.append(f"client {n}: {exc!r}")

        threads = [threading.Thread(target=work, args=(n, peer)) for n, peer in enumerate(peers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert not failures, failures
        for peer in peers:
            assert not peer.violations, peer.violations
    finally:
        daemon.stop()
    entries = file_entries(path)  # every line is whole JSON: no interleaving
    assert_single_chain(entries)
    on_file = [entry["id"] for entry in entries]
    assert len(on_file) == len(set(on_file))
    expected = [entry_id for client in acked for _, ids in client for entry_id in ids]
    assert sorted(on_file) == sorted(expected), "every acknowledged entry once, nothing else"
    markers = _markers_in_file(path)
    for n in range(len(peers)):
        mine = [seq for client, seq in markers if client == n]
        assert mine == sorted(mine), f"client {n}'s appends are out of order"
        assert len(set(mine)) == APPENDS
    # a batch is one write: its entries are adjacent
    position = {entry_id: index for index, entry_id in enumerate(on_file)}
    for client in acked:
        for _, ids in client:
            assert [position[i] for i in ids] == list(
                range(position[ids[0]], position[ids[0]] + len(ids))
            )
    if guarded:
        assert sum(conflicts.values()) >= len(peers) - 1, "the first race alone makes conflicts"
    with reopen(path) as store:
        assert store.leaf_id == on_file[-1]
    print(
        f"\n{len(peers)} clients, {len(expected)} entries, conflicts retried: {sum(conflicts.values())}"
    )


# -- long operations racing on one session -------------------------------------------------------------


RACE_SETTINGS = merged(
    FAST,
    SMALL_COMPACTION,
    {
        "summarizer": {"extractiveFallback": False},
        "retry": {"baseDelayMs": 10},
    },
)


def race_daemon(tmp_path: Path, provider: FakeProvider) -> Any:
    settings = merged(RACE_SETTINGS, {"summarizer": {"candidates": [provider.candidate()]}})
    return listening_daemon(tmp_path, ["--socket", str(tmp_path / "r.sock")], settings)


def two_peers_on(daemon: Any, path: Path) -> tuple[Peer, Peer, str, str]:
    """Clients a and b, both initialized with ``path`` open; returns them, the session id
    and the leaf."""
    a, b = daemon.unix_peer("a"), daemon.unix_peer("b")
    a.initialize()
    b.initialize()
    session = a.call("session/open", {"path": str(path)})
    b.call("session/open", {"path": str(path)})
    return a, b, session["sessionId"], session["leafId"]


def check_placement(path: Path) -> Counter[str]:
    """Every compaction keeps an entry of its own path; every branch summary comes from a
    leaf it left behind. Returns the entry types found."""
    with SessionStore.open(path, readonly=True) as store:
        report = store.recovery
        assert not report.damaged_lines and report.torn_tail is None, report
        types: Counter[str] = Counter()
        for record in store.records():
            types[record.type] += 1
            entry = msgspec.json.decode(store.raw_line(record))
            if record.type == "compaction":
                ancestors = [r.id for r in store.path_records(record.id)]
                assert entry["firstKeptEntryId"] in ancestors[:-1], (
                    "compaction grafted onto another branch"
                )
            elif record.type == "branch_summary":
                # fromId is the leaf the summary comes from (pi 1.6): an entry of the file
                # that the summary's own path does not pass through (a summary is written
                # only when the move abandons something)
                own_path = {r.id for r in store.path_records(record.id)}
                assert entry["fromId"] == "root" or store.has_entry(entry["fromId"])
                assert entry["fromId"] not in own_path, "branch summary away from its target"
                assert entry["parentId"] is None or store.has_entry(entry["parentId"])
        store.build_context()
        return types


def test_a_running_compaction_refuses_navigation(tmp_path: Path, provider: FakeProvider) -> None:
    path = written(tmp_path / "sessions")
    provider.responder = lambda body: Answer(text="## Goal\nheld summary", hold=True)
    daemon = race_daemon(tmp_path, provider)
    try:
        a, b, sid, leaf = two_peers_on(daemon, path)
        target = a.call("session/path", {"sessionId": sid})["entries"][3]["id"]
        running = a.start("compaction/run", {"sessionId": sid})
        assert provider.arrived.wait(10)
        for params in ({"targetId": target}, {"targetId": target, "summarize": True}):
            with pytest.raises(RpcError) as refused:
                b.call("tree/navigate", {"sessionId": sid, **params})
            assert refused.value.code == -32012 and refused.value.kind == "busy"
        # appends are fine meanwhile: they follow the cut
        extra = b.call("session/append", {"sessionId": sid, "entries": [user("while compacting")]})
        provider.released.set()
        result = a.wait(running)["result"]
        entry = msgspec.json.decode(msgspec.json.encode(result["entry"]))
        assert entry["parentId"] == extra["leafId"] != leaf
    finally:
        daemon.stop()
    assert check_placement(path)["compaction"] == 1


def test_a_manual_compaction_aborts_a_running_navigation(
    tmp_path: Path, provider: FakeProvider
) -> None:
    path = written(tmp_path / "sessions")
    provider.responder = lambda body: Answer(text="## Goal\nsummary", hold=True)
    daemon = race_daemon(tmp_path, provider)
    try:
        a, b, sid, leaf = two_peers_on(daemon, path)
        target = a.call("session/path", {"sessionId": sid})["entries"][4]["id"]
        navigating = a.start(
            "tree/navigate", {"sessionId": sid, "targetId": target, "summarize": True}
        )
        assert provider.arrived.wait(10)
        provider.arrived.clear()
        compacting = b.start("compaction/run", {"sessionId": sid})
        navigation = a.wait(navigating)["result"]
        assert navigation["cancelled"] and navigation["aborted"] and navigation["leafId"] == leaf
        assert provider.arrived.wait(10)
        provider.released.set()
        compaction = b.wait(compacting)["result"]
        entry = msgspec.json.decode(msgspec.json.encode(compaction["entry"]))
        assert entry["parentId"] == leaf
    finally:
        daemon.stop()
    types = check_placement(path)
    assert types["compaction"] == 1 and types["branch_summary"] == 0


def test_automatic_compaction_and_navigation_do_not_interleave(
    tmp_path: Path, provider: FakeProvider
) -> None:
    path = written(tmp_path / "sessions")
    provider.responder = lambda body: Answer(text="## Goal\nauto", hold=True)
    daemon = race_daemon(tmp_path, provider)
    try:
        a, b, sid, _ = two_peers_on(daemon, path)
        target = a.call("session/path", {"sessionId": sid})["entries"][2]["id"]
        a.call(
            "session/append",
            {"sessionId": sid, "entries": [user("go on"), assistant("big", input=9000)]},
        )
        turn = a.start("agent/turnEnded", {"sessionId": sid, "contextWindow": 10000})
        assert provider.arrived.wait(10)
        with pytest.raises(RpcError) as refused:
            b.call("tree/navigate", {"sessionId": sid, "targetId": target, "summarize": True})
        assert refused.value.kind == "busy"
        provider.released.set()
        assert a.wait(turn)["result"]["compaction"] is not None
        # and the other way round: a navigation summary in progress refuses the automatic one
        a.call(
            "session/append",
            {"sessionId": sid, "entries": [user("more"), assistant("big", input=9000)]},
        )
        provider.released.clear()
        provider.arrived.clear()
        navigating = b.start(
            "tree/navigate", {"sessionId": sid, "targetId": target, "summarize": True}
        )
        assert provider.arrived.wait(10)
        with pytest.raises(RpcError) as refused:
            a.call("agent/turnEnded", {"sessionId": sid, "contextWindow": 10000})
        assert refused.value.kind == "busy"
        provider.released.set()
        assert not b.wait(navigating)["result"]["cancelled"]
    finally:
        daemon.stop()
    types = check_placement(path)
    assert types["compaction"] == 1 and types["branch_summary"] == 1


ALLOWED_KINDS = {
    "busy",
    "cancelled",
    "conflict",
    "nothingToCompact",
    "alreadyCompacted",
    "notFound",
}


def test_random_races_never_misplace_a_summary(tmp_path: Path, provider: FakeProvider) -> None:
    path = written(tmp_path / "sessions", turns=8)
    rng = random.Random(5)
    lock = threading.Lock()

    def answer(body: dict[str, Any]) -> Answer:
        with lock:
            pause = rng.uniform(0, 0.08)
        time.sleep(pause)
        return default_answer(body)

    provider.responder = answer
    daemon = race_daemon(tmp_path, provider)
    outcomes: Counter[str] = Counter()
    try:
        peers = [daemon.unix_peer(f"p{n}") for n in range(3)]
        for peer in peers:
            peer.initialize()
        sid = peers[0].call("session/open", {"path": str(path)})["sessionId"]
        for peer in peers[1:]:
            peer.call("session/open", {"path": str(path)})
        for round_no in range(STRESS_ROUNDS):
            ids = [e["id"] for e in peers[0].call("session/entries", {"sessionId": sid})["entries"]]
            ops: list[tuple[Peer, str, dict[str, Any]]] = []
            for peer in peers:
                kind = rng.choice(["append", "navigate", "navigate", "compact", "turn", "abort"])
                if kind == "append":
                    entries = [
                        user(f"round {round_no} " + "w " * 200),
                        assistant("ok " * 200, input=rng.randint(1000, 9500)),
                    ]
                    ops.append((peer, "session/append", {"sessionId": sid, "entries": entries}))
                elif kind == "navigate":
                    params = {
                        "sessionId": sid,
                        "targetId": rng.choice(ids),
                        "summarize": rng.random() < 0.7,
                    }
                    ops.append((peer, "tree/navigate", params))
                elif kind == "compact":
                    ops.append((peer, "compaction/run", {"sessionId": sid}))
                elif kind == "turn":
                    ops.append(
                        (peer, "agent/turnEnded", {"sessionId": sid, "contextWindow": 10000})
                    )
                else:
                    ops.append(
                        (peer, rng.choice(["compaction/abort", "tree/abort"]), {"sessionId": sid})
                    )
            started = [(peer, method, peer.start(method, params)) for peer, method, params in ops]
            for peer, method, request_id in started:
                response = peer.wait(request_id, 30)
                if "error" in response:
                    kind = response["error"]["data"]["kind"]
                    assert kind in ALLOWED_KINDS, response
                    outcomes[f"{method}: {kind}"] += 1
                else:
                    outcomes[f"{method}: ok"] += 1
            check_placement(path)
        for peer in peers:
            assert not peer.violations
            assert_no_traceback(msgspec.json.decode(body) for body in peer.bodies)
    finally:
        daemon.stop()
    types = check_placement(path)
    assert "Traceback" not in daemon.all_logs()
    print(f"\nraces: {dict(outcomes)}; entries: {dict(types)}")
    assert types["compaction"] > 0 and types["branch_summary"] > 0
    assert any(key.endswith("busy") for key in outcomes), "no race ever collided"
