"""Reading pruned tool output back: ``session/entry`` with ``original: true``, against real
``sessiond serve --stdio`` processes, on files pruned by ``agent/turnEnded``.

- On an oh-my-pi file pruning edits the tool results in place; each one's original comes
  back from ``<session>.pruned`` byte for byte (``fromArchive: true``), an entry pruning
  never changed comes back as it is, and the daemon never keeps what it read: the
  archive is looked at again for every request.
- On a pi file pruning appends context edits; the same request answers the tool result
  itself (``fromArchive: false``) and opens nothing beside the session.
- The archive is a file beside the session that anyone with the folder may have planted
  or grown. Missing, a link (to a valid archive), a FIFO, the user's own file, a file
  others can write, one with another name, one not the user's: a specific error each,
  never a line of another entry, and the planted thing left as it was. Lines that are
  not the entry's original (another entry's, another type, another tool call, a copy
  that is itself a notice) are never answered; a line longer than 64 MiB is skipped
  unread. After every refusal the daemon answers the next request, and the same read
  works again once the archive is put back.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sessiond.core.title_slot import serialize_title_slot
from sessiond.store.lines import MAX_LINE_BYTES
from sessiond.store.session import SessionStore
from tests.checks import assert_no_traceback
from tests.proof.support import FAST, DaemonProcess, Peer, RpcError, stdio_daemon, timeout_for
from tests.store.helpers import assistant, tool_result, user

pytestmark = pytest.mark.timeout(timeout_for(180, 600))

# Long enough for a busy machine; a daemon blocked in open() never answers at all.
PROMPT = 10.0


def prunable_session(path: Path, *, oh_my_pi: bool) -> Path:
    """Six 60,000-character tool outputs and a usage that makes the end of the turn prune
    the three oldest (each output distinct, so that one cannot pass for another)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with SessionStore.create("/p", path=path) as store:
        store.append(user("run the tools"))
        for index in range(6):
            store.append(assistant("", input=1000, stop="toolUse"))
            store.append(tool_result(f"{index}" * 60_000, tool="bash", call_id=f"c{index}"))
        store.append(assistant("summary of work", input=89_000))
    if oh_my_pi:
        slot = serialize_title_slot("Pruned", "user", "2026-09-27T09:00:00.000Z")
        path.write_bytes(slot + path.read_bytes())
    return path


def lines_by_id(path: Path) -> dict[str, bytes]:
    found = {}
    for line in path.read_bytes().splitlines():
        value = json.loads(line)
        if isinstance(value.get("id"), str) and value.get("type") != "session":
            found[value["id"]] = line
    return found


@dataclass
class Pruned:
    """A session pruned at the end of a turn, in a daemon that has it open."""

    daemon: DaemonProcess
    peer: Peer
    session: Path
    session_id: str
    # The lines of the tool results pruning changed, as they were written before.
    originals: dict[str, bytes]
    # Every entry's line as it was written before the turn ended.
    written: dict[str, bytes]

    @property
    def archive(self) -> Path:
        return self.session.with_name(self.session.name + ".pruned")

    def entry(self, entry_id: str, **params: Any) -> dict[str, Any]:
        return self.peer.call(  # type: ignore[no-any-return]
            "session/entry",
            {"sessionId": self.session_id, "entryId": entry_id, **params},
            timeout=PROMPT,
        )

    def original(self, entry_id: str) -> dict[str, Any]:
        return self.entry(entry_id, original=True)

    def last_body(self) -> bytes:
        return self.peer.bodies[-1]


def prune(tmp_path: Path, *, oh_my_pi: bool) -> Iterator[Pruned]:
    session = prunable_session(tmp_path / "s" / "s.jsonl", oh_my_pi=oh_my_pi)
    written = lines_by_id(session)
    daemon, peer = stdio_daemon(tmp_path / "d", FAST)
    try:
        peer.initialize()
        sid = peer.call("session/open", {"path": str(session)})["sessionId"]
        turn = {"sessionId": sid, "contextWindow": 100_000}
        assert peer.call("agent/turnEnded", turn)["prunedEntries"] == 3
        if oh_my_pi:
            now = lines_by_id(session)
            changed = [i for i, line in written.items() if now[i] != line]
        else:
            edits = [json.loads(line) for line in session.read_bytes().splitlines()]
            changed = [e["targetId"] for e in edits if e.get("type") == "context_edit"]
        assert len(changed) == 3
        yield Pruned(daemon, peer, session, sid, {i: written[i] for i in changed}, written)
        assert not peer.violations
    finally:
        daemon.stop()


@pytest.fixture
def omp(tmp_path: Path) -> Iterator[Pruned]:
    yield from prune(tmp_path, oh_my_pi=True)


@pytest.fixture
def pi(tmp_path: Path) -> Iterator[Pruned]:
    yield from prune(tmp_path, oh_my_pi=False)


def test_each_result_pruned_in_place_is_read_back_as_it_was_written(omp: Pruned) -> None:
    assert omp.archive.exists() and omp.archive.read_bytes().startswith(
        b'{"type":"sessiond.prunedOutputs"'
    )
    for entry_id, line in omp.originals.items():
        now = omp.entry(entry_id)["entry"]
        assert now["message"]["prunedAt"] > 0
        assert now["message"]["content"][0]["text"].startswith("[Output truncated - ")
        answer = omp.original(entry_id)
        assert answer["fromArchive"] is True
        assert answer["entry"] == json.loads(line)
        # The line itself, byte for byte, in the answer's frame.
        assert b'"entry":' + line + b',"fromArchive":true' in omp.last_body()
        assert "fromArchive" not in omp.entry(entry_id)
    untouched = next(i for i, line in omp.written.items() if b'"role":"user"' in line)
    answer = omp.original(untouched)
    assert answer["fromArchive"] is False
    assert b'"entry":' + omp.written[untouched] + b',"fromArchive":false' in omp.last_body()
    with pytest.raises(RpcError) as caught:
        omp.original("no-such-entry")
    assert caught.value.kind == "notFound"


def test_on_pi_files_the_entry_is_its_own_original(pi: Pruned) -> None:
    for entry_id, line in pi.originals.items():
        answer = pi.original(entry_id)
        assert answer["fromArchive"] is False
        assert b'"entry":' + line + b',"fromArchive":false' in pi.last_body()
    assert not pi.archive.exists()


def test_the_newest_copy_is_answered_and_long_lines_before_it_are_skipped(omp: Pruned) -> None:
    """An archive can hold an id twice (a pruning whose rewrite failed was done again): the
    newest copy is the original. A line longer than the longest a session may hold is
    never read, wherever it is."""
    entry_id, line = next(iter(omp.originals.items()))
    newer = json.loads(line)
    newer["message"]["content"] = [{"type": "text", "text": "the output, written again"}]
    newer_line = json.dumps(newer, separators=(",", ":")).encode()
    with omp.archive.open("ab") as archive:
        archive.truncate(archive.tell() + MAX_LINE_BYTES + 1)  # a hole: one long line of NULs
        archive.seek(0, os.SEEK_END)
        archive.write(b"\n" + newer_line + b"\n")
    answer = omp.original(entry_id)
    assert answer["fromArchive"] is True and answer["entry"] == newer
    for other, other_line in list(omp.originals.items())[1:]:
        assert omp.original(other)["entry"] == json.loads(other_line)


def without_line(archive: Path, line: bytes) -> bytes:
    data = archive.read_bytes()
    assert data.count(line + b"\n") == 1
    return data.replace(line + b"\n", b"")


def replaced(entry: bytes, change: Callable[[dict[str, Any]], None]) -> bytes:
    value = json.loads(entry)
    change(value)
    return json.dumps(value, separators=(",", ":")).encode()


# What is planted at the archive's name, and the refusal it must meet: (kind, reason).
Planting = Callable[[Pruned, Path, str], None]


def plant_nothing(omp: Pruned, outside: Path, entry_id: str) -> None:
    omp.archive.unlink()


def plant_symlink(omp: Pruned, outside: Path, entry_id: str) -> None:
    # A link to a copy of the very archive: valid lines, still not followed.
    target = outside / "copy.pruned"
    target.write_bytes(omp.archive.read_bytes())
    omp.archive.unlink()
    omp.archive.symlink_to(target)


def plant_fifo(omp: Pruned, outside: Path, entry_id: str) -> None:
    omp.archive.unlink()
    os.mkfifo(omp.archive, 0o600)


def plant_users_file(omp: Pruned, outside: Path, entry_id: str) -> None:
    # The user's own notes, which happen to hold the entry's line.
    data = b"my notes on the pruning\n" + omp.originals[entry_id] + b"\n"
    omp.archive.write_bytes(data)


def plant_writable(omp: Pruned, outside: Path, entry_id: str) -> None:
    omp.archive.chmod(0o666)


def plant_hard_link(omp: Pruned, outside: Path, entry_id: str) -> None:
    os.link(omp.archive, outside / "another-name")


def plant_foreign_owner(omp: Pruned, outside: Path, entry_id: str) -> None:
    os.chown(omp.archive, 4242, 4242)


def plant_without_it(omp: Pruned, outside: Path, entry_id: str) -> None:
    omp.archive.write_bytes(without_line(omp.archive, omp.originals[entry_id]))


def plant_another_entrys_line(omp: Pruned, outside: Path, entry_id: str) -> None:
    # Its place taken by the line of another pruned result.
    other = next(line for i, line in omp.originals.items() if i != entry_id)
    data = without_line(omp.archive, omp.originals[entry_id])
    omp.archive.write_bytes(data + other + b"\n")


def plant_changed(change: Callable[[dict[str, Any]], None]) -> Planting:
    def plant(omp: Pruned, outside: Path, entry_id: str) -> None:
        line = omp.originals[entry_id]
        data = without_line(omp.archive, line)
        omp.archive.write_bytes(data + replaced(line, change) + b"\n")

    return plant


def plant_overlong(omp: Pruned, outside: Path, entry_id: str) -> None:
    line = omp.originals[entry_id]
    data = without_line(omp.archive, line)
    long_line = line[:-1] + b" " * (MAX_LINE_BYTES + 1 - len(line)) + b"}"
    omp.archive.write_bytes(data + long_line + b"\n")


def _as_custom(value: dict[str, Any]) -> None:
    value["type"] = "custom_message"


def _other_call(value: dict[str, Any]) -> None:
    value["message"]["toolCallId"] = "another-call"


def _still_pruned(value: dict[str, Any]) -> None:
    value["message"]["prunedAt"] = 1


PLANTINGS: dict[str, tuple[Planting, str, str]] = {
    "missing": (plant_nothing, "originalUnavailable", "noArchive"),
    "symlink": (plant_symlink, "invalidSessionFile", "symlink"),
    "fifo": (plant_fifo, "invalidSessionFile", "notAFile"),
    "the user's own file": (plant_users_file, "invalidSessionFile", "notOurs"),
    "writable by others": (plant_writable, "invalidSessionFile", "notPrivate"),
    "hard link": (plant_hard_link, "invalidSessionFile", "hardLink"),
    "id missing": (plant_without_it, "originalUnavailable", "notArchived"),
    "another entry's line": (plant_another_entrys_line, "originalUnavailable", "notArchived"),
    "another type": (plant_changed(_as_custom), "originalUnavailable", "mismatch"),
    "another tool call": (plant_changed(_other_call), "originalUnavailable", "mismatch"),
    "a notice, not the original": (plant_changed(_still_pruned), "originalUnavailable", "mismatch"),
    "overlong line": (plant_overlong, "originalUnavailable", "lineTooLong"),
}
if os.geteuid() == 0:  # only root can give the archive to another user
    PLANTINGS["another user's"] = (plant_foreign_owner, "invalidSessionFile", "notOurs")


def snapshot(path: Path) -> tuple[int, int, bytes | None]:
    status = os.lstat(path)
    data = path.read_bytes() if stat.S_ISREG(status.st_mode) else None
    return status.st_mode, status.st_uid, data


@pytest.mark.parametrize("planted", list(PLANTINGS))
def test_an_archive_that_cannot_give_the_original_is_a_specific_error(
    omp: Pruned, tmp_path: Path, planted: str
) -> None:
    plant, kind, reason = PLANTINGS[planted]
    entry_id = next(iter(omp.originals))
    kept = omp.archive.read_bytes()
    outside = tmp_path / "outside"
    outside.mkdir()
    plant(omp, outside, entry_id)
    before = snapshot(omp.archive) if os.path.lexists(omp.archive) else None
    with pytest.raises(RpcError) as caught:
        omp.original(entry_id)
    error = caught.value
    code = -32024 if kind == "originalUnavailable" else -32017
    assert (error.code, error.kind, error.data.get("reason")) == (code, kind, reason)
    assert error.data["path"] == str(omp.archive)
    if kind == "originalUnavailable":
        assert error.data["entryId"] == entry_id
    assert_no_traceback([error.response])
    assert "result" not in error.response, "an answer came with the error"
    # Left as it was: nothing chmodded, written or removed.
    after = snapshot(omp.archive) if os.path.lexists(omp.archive) else None
    assert after == before
    # The daemon goes on: the entry as it is now, then the original once the archive is
    # back (read again, not remembered).
    assert "prunedAt" in omp.entry(entry_id)["entry"]["message"]
    if os.path.lexists(omp.archive):
        os.unlink(omp.archive)
    omp.archive.write_bytes(kept)
    omp.archive.chmod(0o600)
    answer = omp.original(entry_id)
    assert answer["fromArchive"] is True
    assert answer["entry"] == json.loads(omp.originals[entry_id])
