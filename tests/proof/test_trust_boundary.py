"""The trust boundary of settings, secrets, hook waits and server requests, against real daemons.

- A client cannot make the daemon send a key to a server of the client's choosing: endpoints,
  headers and key variables come only from the settings file (or the command line), through
  ``initialize.settings``, ``settings/update`` (connection and session) and a call's
  ``settings`` alike.
- ``settings/get`` shows no header value and no password of a URL, and what it returns can be
  sent back with ``settings/update`` (the configured values are then used, not the redacted
  text).
- A provider body that carries part of a key (straddling the snippet the daemon cuts from a
  malformed answer, or any run of 8 characters of it) never reaches a client, a log or a
  session file.
- A session's ``hooks.timeoutMs`` set by one client cannot make another client's
  ``compaction/run`` wait longer than that client's own setting.
- Requests and notifications that carry a session's content (``llm/complete``, the hooks,
  ``session/changed``) go only to clients that have the session open.
- The daemon's command line (``sessiond serve --set``) is trusted configuration, as the
  settings file is.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.proof.provider import Act, ScriptedProvider, tagged_session
from tests.proof.support import (
    FAST,
    SMALL_COMPACTION,
    RpcError,
    file_entries,
    isolated_env,
    listening_daemon,
    merged,
    stdio_daemon,
    timeout_for,
)

pytestmark = pytest.mark.timeout(timeout_for(180, 600))

ALL_HOOKS = [
    "session_before_compact",
    "session.compacting",
    "session_compact",
    "session_before_tree",
    "session_tree",
]
# No "sk-" prefix: a key that does not look like one is only caught by knowing it.
KEY = "trust" + secrets.token_hex(18)
assert len(KEY) == 41


def windows(secret: str, size: int = 8) -> list[bytes]:
    """Every run of ``size`` characters of ``secret``: none may appear anywhere."""
    return [secret[i : i + size].encode() for i in range(len(secret) - size + 1)]


def leaks_of(secret: str, places: dict[str, bytes]) -> list[str]:
    found = []
    for name, data in places.items():
        for window in windows(secret):
            if window in data:
                found.append(f"{name}: {window.decode()!r}")
                break
    return found


def session_in(root: Path, name: str) -> Path:
    return tagged_session(root / "sessions", name, "/trust/project", words=200)


# -- endpoints and key sources ------------------------------------------------------------------


@pytest.mark.parametrize(
    "layer", ["initialize", "connection-update", "session-update", "call", "remote-endpoint"]
)
def test_a_client_cannot_send_a_daemon_key_to_its_own_server(tmp_path: Path, layer: str) -> None:
    thief = ScriptedProvider(lambda key, n, body, headers: Act(text="## Goal\nthanks for the key"))
    rogue_candidate = thief.candidate(apiKeyEnv="DAEMON_SECRET", headers={"x-stolen": "1"})
    rogue: dict[str, Any] = {"summarizer": {"candidates": [rogue_candidate]}}
    if layer == "remote-endpoint":
        rogue = {"compaction": {"remoteEndpoint": thief.url}}
    env = isolated_env(tmp_path / "d", merged(FAST, SMALL_COMPACTION), DAEMON_SECRET=KEY)
    daemon, peer = stdio_daemon(tmp_path / "d", env=env, log_file=True)
    refused: dict[str, Any] = {}
    try:
        init = peer.initialize(settings=rogue if layer == "initialize" else {})
        sid = peer.call("session/open", {"path": str(session_in(tmp_path, "s"))})["sessionId"]
        if layer == "call":
            refused = peer.request("compaction/run", {"sessionId": sid, "settings": rogue})
        elif layer != "initialize":
            params: dict[str, Any] = {"settings": rogue}
            if layer == "session-update":
                params["sessionId"] = sid
            refused = peer.request("settings/update", params)
        # Whatever the client tried, the daemon's next summary goes nowhere near its server.
        peer.request("compaction/run", {"sessionId": sid})
        shown = peer.call("settings/get", {"sessionId": sid})["settings"]
    finally:
        daemon.stop()
        thief.stop()
    assert thief.hits == [], f"{len(thief.hits)} request(s) reached the client's server"
    assert shown["compaction"]["remoteEndpoint"] is None
    assert shown["summarizer"]["candidates"] == []
    if layer == "initialize":
        warnings = init.get("warnings", [])
        assert any("summarizer.candidates[0]" in w for w in warnings), warnings
        return
    assert "error" in refused, f"the daemon accepted a client's endpoint: {refused}"
    error = refused["error"]
    assert error["code"] == -32602 and error["data"]["kind"] == "trustedSetting", error
    named = error["data"]["setting"]
    assert named in ("summarizer.candidates[0].baseUrl", "compaction.remoteEndpoint"), named


# -- what settings/get shows --------------------------------------------------------------------


def test_settings_get_shows_no_secret_and_its_answer_round_trips(tmp_path: Path) -> None:
    provider = ScriptedProvider(lambda key, n, body, headers: Act(text="## Goal\nsummarized"))
    header_secret = "hdr" + secrets.token_hex(16)
    password = "pw" + secrets.token_hex(8)
    candidate = provider.candidate(
        apiKeyEnv="PROOF_API_KEY", headers={"x-api-key": header_secret, "x-team": "platform"}
    )
    # A second candidate, never reached, whose URL carries a password.
    proxied = {
        "kind": "openai",
        "model": "other",
        "baseUrl": f"http://user:{password}@proxy.lan/v1",
    }
    settings = merged(FAST, SMALL_COMPACTION, {"summarizer": {"candidates": [candidate, proxied]}})
    env = isolated_env(tmp_path / "d", settings, PROOF_API_KEY=KEY)
    daemon, peer = stdio_daemon(tmp_path / "d", env=env, log_file=True)
    path = session_in(tmp_path, "roundtrip")
    try:
        peer.initialize()
        shown = peer.call("settings/get")["settings"]
        listed, second = shown["summarizer"]["candidates"]
        assert listed["headers"] == {"x-api-key": "[redacted]", "x-team": "[redacted]"}
        assert listed["apiKeyEnv"] == "PROOF_API_KEY"  # where the key is, never the key
        assert second["baseUrl"] == "http://[redacted]@proxy.lan/v1"
        # pi-style clients send whole settings objects back: that must work, connection
        # and session alike, and change nothing about where the summary goes.
        peer.call("settings/update", {"settings": shown})
        sid = peer.call("session/open", {"path": str(path)})["sessionId"]
        again = peer.call("settings/get", {"sessionId": sid})["settings"]
        assert again == shown
        peer.call("settings/update", {"sessionId": sid, "settings": again})
        peer.call("compaction/run", {"sessionId": sid})
    finally:
        daemon.stop()
        provider.stop()
    assert len(provider.hits) == 1
    sent = provider.hits[0].headers
    assert sent["x-api-key"] == header_secret, "the redacted text was sent instead of the value"
    assert sent["authorization"] == f"Bearer {KEY}"
    places = {f"message {i}": body for i, body in enumerate(peer.bodies)}
    places["logs"] = daemon.all_logs().encode()
    places["session file"] = path.read_bytes()
    for secret in (KEY, header_secret, password):
        assert leaks_of(secret, places) == []


# -- key fragments in provider errors -----------------------------------------------------------

SNIPPET = 200  # what the daemon quotes of a malformed answer


def _garbage(before: int, fragment: str) -> bytes:
    """A body that is neither JSON nor an event stream, ``fragment`` at offset ``before``."""
    head = "<html>upstream said: "
    return (head + "." * (before - len(head)) + fragment + " and then some more text").encode()


FRAGMENT_CASES = {
    # The whole key, 30 of its 41 characters inside the quoted snippet.
    "straddle30": Act(body=_garbage(SNIPPET - 30, KEY), headers={"content-type": "text/html"}),
    # The whole key with only its first 6 characters inside the snippet.
    "straddle6": Act(body=_garbage(SNIPPET - 6, KEY), headers={"content-type": "text/html"}),
    # 20 characters from the middle of the key, well inside the snippet.
    "inner": Act(body=_garbage(60, KEY[9:29]), headers={"content-type": "text/html"}),
    # A JSON error message quoting 12 characters of the key.
    "status": Act(400, f"token {KEY[20:32]} is not valid for this model"),
}


def fragment_script(key: str, n: int, body: dict[str, Any], headers: dict[str, str]) -> Act:
    return FRAGMENT_CASES[key]


@pytest.mark.parametrize("fallback", [False, True], ids=["error", "extractive-fallback"])
def test_a_key_fragment_in_a_provider_body_never_reaches_a_client(
    tmp_path: Path, fallback: bool
) -> None:
    provider = ScriptedProvider(fragment_script)
    settings = merged(
        FAST,
        SMALL_COMPACTION,
        {
            "retry": {"enabled": False},
            "summarizer": {
                "extractiveFallback": fallback,
                "candidates": [provider.candidate(apiKeyEnv="PROOF_API_KEY")],
            },
        },
    )
    env = isolated_env(tmp_path / "d", settings, PROOF_API_KEY=KEY)
    daemon, peer = stdio_daemon(
        tmp_path / "d", env=env, args=["--log-level", "DEBUG"], log_file=True
    )
    messages: dict[str, str] = {}
    try:
        peer.initialize()
        for name in FRAGMENT_CASES:
            sid = peer.call("session/open", {"path": str(session_in(tmp_path, name))})["sessionId"]
            peer.request("agent/turnEnded", {"sessionId": sid, "contextWindow": 6000})
            answer = peer.request("compaction/run", {"sessionId": sid})
            if "error" in answer:
                messages[name] = answer["error"]["message"]
            else:
                messages[name] = str(answer["result"]["entry"]["details"])
    finally:
        daemon.stop()
        provider.stop()
    assert {hit.key for hit in provider.hits} == set(FRAGMENT_CASES), "a case never ran"
    if not fallback:
        assert "Malformed response" in messages["straddle30"], messages
    places = {f"message {i}": body for i, body in enumerate(peer.bodies)}
    places["logs"] = daemon.all_logs().encode()
    for path in tmp_path.rglob("*.jsonl"):
        places[str(path)] = path.read_bytes()
    assert leaks_of(KEY, places) == []
    # Nor a shorter piece of the key where the daemon cut the snippet.
    for name in ("straddle30", "straddle6"):
        for size in range(4, 8):
            assert KEY[:size] not in messages[name], (name, messages[name])


# -- hook waits ---------------------------------------------------------------------------------


def test_a_session_hook_timeout_cannot_hold_another_clients_compaction(tmp_path: Path) -> None:
    daemon = listening_daemon(
        tmp_path, ["--socket", str(tmp_path / "h.sock")], merged(FAST, SMALL_COMPACTION)
    )
    release = threading.Event()
    path = session_in(tmp_path, "hooks")
    try:
        slow = daemon.unix_peer("slow")
        slow.answers["hooks/session_before_compact"] = lambda params: release.wait(60) and {}
        slow.initialize(capabilities={"hooks": ["session_before_compact"], "llm": False})
        mine = daemon.unix_peer("mine")
        mine.initialize(settings={"hooks": {"timeoutMs": 500}})
        sid = slow.call("session/open", {"path": str(path)})["sessionId"]
        mine.call("session/open", {"path": str(path)})
        huge = slow.request(
            "settings/update", {"sessionId": sid, "settings": {"hooks": {"timeoutMs": 10**12}}}
        )
        assert "error" in huge, "a client set a hook timeout of 30 years for everyone"
        assert huge["error"]["data"] == {
            "kind": "invalidParams",
            "setting": "hooks.timeoutMs",
            "maximum": 300000,
        }
        # The largest value a client may set is accepted, and still does not reach my request.
        accepted = slow.call(
            "settings/update", {"sessionId": sid, "settings": {"hooks": {"timeoutMs": 300000}}}
        )
        # ...and its author is told that a session's value only ever shortens a wait.
        assert accepted["settings"]["hooks"]["timeoutMs"] == 30000
        assert any(w.startswith("hooks.timeoutMs:") for w in accepted["warnings"]), accepted
        result = mine.call("compaction/run", {"sessionId": sid}, timeout=60)
    finally:
        release.set()
        daemon.stop()
    # My compaction gave the other client's hook my 0.5 s, not the 30 s it asked for.
    problems = result["entry"]["details"]["hookProblems"]
    assert any("timed out after 0.5 s" in p for p in problems), problems


# -- who hears about a session ------------------------------------------------------------------


def test_session_content_goes_only_to_clients_with_the_session_open(tmp_path: Path) -> None:
    daemon = listening_daemon(
        tmp_path, ["--socket", str(tmp_path / "o.sock")], merged(FAST, SMALL_COMPACTION)
    )
    path = session_in(tmp_path, "private")
    client_summarizer = {"summarizer": {"candidates": [{"kind": "client"}]}}
    try:
        outsider = daemon.unix_peer("outsider")
        outsider.answers["llm/complete"] = lambda params: {"text": "## Goal\nINJECTED BY OUTSIDER"}
        outsider.initialize(capabilities={"hooks": ALL_HOOKS, "llm": True})
        owner = daemon.unix_peer("owner")
        owner.initialize(settings=client_summarizer)
        sid = owner.call("session/open", {"path": str(path)})["sessionId"]
        target = owner.call("session/path", {"sessionId": sid})["entries"][2]["id"]
        # Nobody with the session open summarizes: these fail (a manual run does not fall
        # back to the offline summarizer), but they must not ask the outsider.
        owner.request("compaction/run", {"sessionId": sid})
        owner.request("tree/navigate", {"sessionId": sid, "targetId": target, "summarize": True})
        owner.call(
            "session/append",
            {"sessionId": sid, "entries": [{"type": "message", "message": _user("hello")}]},
        )
        assert outsider.server_requests == [], [r["method"] for r in outsider.server_requests]
        # A client that has the session open is asked (the feature still works).
        shared = session_in(tmp_path, "shared")
        editor = daemon.unix_peer("editor")
        editor.answers["llm/complete"] = lambda params: {"text": "## Goal\nfrom the editor"}
        editor.initialize(capabilities={"hooks": [], "llm": True})
        shared_id = owner.call("session/open", {"path": str(shared)})["sessionId"]
        editor.call("session/open", {"path": str(shared)})
        done = owner.call("compaction/run", {"sessionId": shared_id})
    finally:
        daemon.stop()
    about_it = [
        method
        for method, params, _ in outsider.notifications
        if isinstance(params, dict) and params.get("sessionId") == sid
    ]
    assert about_it == [], about_it
    assert b"INJECTED" not in path.read_bytes()
    assert [r["method"] for r in editor.server_requests] == ["llm/complete"]
    assert done["entry"]["summary"].startswith("## Goal\nfrom the editor")
    assert [e["type"] for e in file_entries(shared)].count("compaction") == 1


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": int(time.time() * 1000)}


def test_refusals_name_the_setting(tmp_path: Path) -> None:
    daemon, peer = stdio_daemon(
        tmp_path, merged(FAST, {"storage": {"allowedRoots": [str(tmp_path)]}})
    )
    try:
        peer.initialize()
        for settings, named in [
            ({"storage": {"allowedRoots": ["/"]}}, "storage.allowedRoots"),
            (
                {"summarizer": {"candidates": [{"kind": "client", "apiKeyEnv": "HOME"}]}},
                "summarizer.candidates[0].apiKeyEnv",
            ),
        ]:
            with pytest.raises(RpcError) as refused:
                peer.call("settings/update", {"settings": settings})
            assert (refused.value.code, refused.value.kind) == (-32602, "trustedSetting")
            assert refused.value.data["setting"] == named
        # The configured value itself is accepted unchanged (a round trip of settings/get).
        peer.call("settings/update", {"settings": {"storage": {"allowedRoots": [str(tmp_path)]}}})
    finally:
        daemon.stop()


def test_the_command_line_is_trusted_configuration(tmp_path: Path) -> None:
    provider = ScriptedProvider(lambda key, n, body, headers: Act(text="## Goal\nfrom the flag"))
    configured = json.dumps([provider.candidate(apiKeyEnv="PROOF_API_KEY")])
    env = isolated_env(tmp_path / "d", merged(FAST, SMALL_COMPACTION), PROOF_API_KEY=KEY)
    daemon, peer = stdio_daemon(
        tmp_path / "d", env=env, args=["--set", f"summarizer.candidates={configured}"]
    )
    path = session_in(tmp_path, "flag")
    try:
        # A client picks the candidate by its kind alone, and changes its window.
        init = peer.initialize(
            settings={"summarizer": {"candidates": [{"kind": "openai", "contextWindow": 64000}]}}
        )
        assert init.get("warnings", []) == []
        sid = peer.call("session/open", {"path": str(path)})["sessionId"]
        done = peer.call("compaction/run", {"sessionId": sid})
    finally:
        daemon.stop()
        provider.stop()
    assert done["entry"]["summary"].startswith("## Goal\nfrom the flag")
    assert [hit.headers["authorization"] for hit in provider.hits] == [f"Bearer {KEY}"]
