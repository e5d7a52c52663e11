"""An oh-my-pi 18 session file through a real daemon: its dialect, its context in both
forms, its entry types, a rename through its title line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sessiond_client import InvalidEntryError, OriginalUnavailableError, SessiondClient
from tests.store.helpers import assistant, omp_entry, omp_file

ANSWER = assistant("calling", stop="toolUse")["message"]
ANSWER["content"].append({"type": "toolCall", "id": "c1", "name": "read", "arguments": {}})


def session(path: Path) -> Path:
    return omp_file(
        path,
        [
            omp_entry("message", "aaaa0001", None, message={"role": "user", "content": "q"}),
            omp_entry("message", "aaaa0002", "aaaa0001", message=ANSWER),
            omp_entry(
                "custom_message",
                "aaaa0003",
                "aaaa0002",
                customType="note",
                content="a note",
                display=True,
            ),
        ],
        title="Through the daemon",
    )


async def test_an_oh_my_pi_file_over_the_protocol(client: SessiondClient, tmp_path: Path) -> None:
    path = session(tmp_path / "omp.jsonl")
    opened = await client.open_session(path)
    assert opened.dialect == "oh-my-pi" and opened.name == "Through the daemon"
    sid = opened.session_id
    agent = await client.build_context(sid)
    # the unanswered tool call is gone from the answer, the rest of it as stored
    answer = agent.messages[1]
    assert answer["content"] == [{"type": "text", "text": "calling"}]
    assert answer["usage"] == ANSWER["usage"]
    llm = await client.build_context(sid, format="llm")
    assert [m["role"] for m in llm.messages] == ["user", "assistant", "developer"]
    await client.append(sid, [{"type": "reset_boundary"}])
    with pytest.raises(InvalidEntryError) as caught:
        await client.append(sid, [{"type": "session_info", "name": "no"}])
    assert caught.value.data["reason"] == "wrongDialect"
    assert (await client.build_context(sid)).messages == []
    await client.set_name(sid, "Renamed")
    await client.close_session(sid)
    first = json.loads(path.read_bytes()[:256])
    assert (first["type"], first["title"], first["source"]) == ("title", "Renamed", "user")
    reopened = await client.open_session(path)
    assert reopened.name == "Renamed" and reopened.dialect == "oh-my-pi"


async def test_a_result_pruned_in_place_is_read_back_through_the_client(
    client: SessiondClient, tmp_path: Path
) -> None:
    """The archive here is written as sessiond's pruning writes it (its mark, then the
    original line); pruning itself is tests/proof/test_pruned_originals.py's."""
    result = {
        "role": "toolResult",
        "toolCallId": "c1",
        "toolName": "bash",
        "content": [{"type": "text", "text": "the whole output"}],
        "isError": False,
        "timestamp": 1790499602000,
    }
    original = omp_entry("message", "aaaa0003", "aaaa0002", message=result)
    notice = [{"type": "text", "text": "[Output truncated - 5 tokens]"}]
    pruned = {**original, "message": {**result, "content": notice, "prunedAt": 1790499700000}}
    path = omp_file(
        tmp_path / "pruned.jsonl",
        [
            omp_entry("message", "aaaa0001", None, message={"role": "user", "content": "q"}),
            omp_entry("message", "aaaa0002", "aaaa0001", message=ANSWER),
            pruned,
        ],
    )
    archive = path.with_name(path.name + ".pruned")
    line = json.dumps(original, separators=(",", ":")).encode()
    archive.write_bytes(b'{"type":"sessiond.prunedOutputs","version":1}\n' + line + b"\n")
    archive.chmod(0o600)
    sid = (await client.open_session(path)).session_id
    now = await client.entry(sid, "aaaa0003")
    assert now.entry == pruned and now.from_archive is None
    read_back = await client.entry(sid, "aaaa0003", original=True)
    assert read_back.entry == original and read_back.from_archive is True
    archive.unlink()
    with pytest.raises(OriginalUnavailableError) as caught:
        await client.entry(sid, "aaaa0003", original=True)
    assert caught.value.code == -32024
    assert caught.value.data["reason"] == "noArchive"
    assert caught.value.data["path"] == str(archive)
