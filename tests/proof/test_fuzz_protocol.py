"""Fuzzing a live daemon over stdio with malformed and hostile requests for every method.

For each method of ``protocol/schema.json`` a valid request is built from the schema
(with real session and entry ids), then hypothesis bends it: a field dropped, nulled,
given the wrong type, made huge (long strings, big numbers, long arrays, wide objects),
nested thousands deep, unknown fields added, strings full of non-ASCII and hostile
text, entries broken inside, or the params replaced by null, an array, a scalar, or
left out. Every reply must be a well-formed JSON-RPC response to that request id, with
either a result or an error of the right family: a client error (-32600 or -32602) or
one of sessiond's own codes with the ``data.kind`` that belongs to it; never an internal
error (-32603), never traceback text. And after every case the next valid request is
answered.

The daemon confines paths to a temporary root (``storage.allowedRoots``) and has no
summarizer but the offline one, so nothing leaves the machine whatever the fuzzer sends.
CI: 3,000 cases; SESSIOND_LONG=1: 100,000. Derandomized, so CI failures reproduce.
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessiond import errors
from sessiond.store.session import SessionStore
from tests.isolation import TRACEBACK
from tests.proof.support import (
    FAST,
    ROOT,
    DaemonProcess,
    Peer,
    RpcError,
    count,
    isolated_env,
    merged,
    stdio_daemon,
    timeout_for,
)
from tests.store.helpers import assistant, tool_call, tool_result, user

pytestmark = pytest.mark.timeout(timeout_for(240, 7200))

SCHEMA = json.loads((ROOT / "protocol" / "schema.json").read_text())
# Requests, client to daemon, by method: their params type's name in $defs.
PARAMS = {
    row["method"]: row["params"]
    for row in SCHEMA["messages"]
    if row["kind"] == "request" and row["direction"] == "clientToServer"
}
METHODS = sorted(m for m in PARAMS if m != "shutdown")
CASES = int(os.environ.get("SESSIOND_FUZZ_CASES", "0")) or count(3_000, 100_000)
ANSWER_WITHIN = 20.0

# Codes a hostile request may get, with the kinds that go with each: every SessiondError
# of the daemon except the ones that would mean the daemon failed or misread a valid frame.
NEVER = {
    errors.INTERNAL_ERROR,  # a bug
    errors.PARSE_ERROR,  # every body sent here is valid JSON
    errors.METHOD_NOT_FOUND,  # every method sent here exists
    errors.SERVER_NOT_INITIALIZED,
    errors.UNAUTHORIZED,  # stdio has no token
}
KINDS: dict[int, set[str]] = {}
for _, cls in inspect.getmembers(errors, inspect.isclass):
    if issubclass(cls, errors.SessiondError) and cls.code not in NEVER:
        KINDS.setdefault(cls.code, set()).add(cls.kind)


@dataclass
class World:
    daemon: DaemonProcess
    peer: Peer
    root: Path
    path: Path
    session_id: str
    entry_ids: list[str]
    user_ids: list[str]
    outcomes: dict[str, int] = field(default_factory=dict)
    next_id: int = 0


def seed_session(directory: Path) -> Path:
    with SessionStore.create("/fuzz/project", session_dir=directory) as store:
        for turn in range(4):
            store.append(user(f"question {turn} \u00e9\u6f22"))
            store.append(
                assistant(
                    f"working {turn}", tools=[tool_call("read", path=f"f{turn}.py")], stop="toolUse"
                )
            )
            store.append(tool_result(f"contents {turn}", tool="read", call_id="call-read"))
            store.append(assistant(f"answer {turn}"))
        return store.path


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("fuzz").resolve()
    sessions = root / "sessions"
    path = seed_session(sessions)
    settings = merged(FAST, {"storage": {"allowedRoots": [str(root)], "sessionDir": str(sessions)}})
    env = isolated_env(root / "env", settings)
    daemon, peer = stdio_daemon(root / "env", env=env, log_file=True, name="fuzz")
    peer.initialize()
    opened = peer.call("session/open", {"path": str(path)})
    entries = peer.call("session/entries", {"sessionId": opened["sessionId"]})["entries"]
    world = World(
        daemon,
        peer,
        root,
        path,
        opened["sessionId"],
        [e["id"] for e in entries],
        [e["id"] for e in entries if e.get("message", {}).get("role") == "user"],
    )
    try:
        yield world
    finally:
        daemon.stop()


# -- valid requests, from the schema ------------------------------------------------------------


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = SCHEMA["$defs"][schema["$ref"].split("/")[-1]]
    return schema


def valid_params(method: str, w: World, pick: int) -> dict[str, Any]:
    """A request for ``method`` that the daemon should accept (or refuse for a reason of its own)."""
    schema = _resolve({"$ref": f"#/$defs/{PARAMS[method]}"})
    entry = w.entry_ids[pick % len(w.entry_ids)]
    known: dict[str, Any] = {
        "sessionId": w.session_id,
        "entryId": w.user_ids[pick % len(w.user_ids)] if method == "session/fork" else entry,
        "targetId": entry,
        "fromId": entry,
        "leafId": entry,
        "firstKeptEntryId": entry,
        "path": str(w.path),
        "sessionDir": str(w.root / "sessions"),
        "cwd": "/fuzz/project",
        "entries": [user("fuzzed"), assistant("fine")],
        "settings": {"compaction": {"keepRecentTokens": 2000}},
        "summary": "## Goal\nfuzzed summary",
        "name": "fuzzed name",
        "label": "fuzzed",
        "format": "llm",
        "contextWindow": 128000,
        "ids": [entry],
        "offset": 0,
        "limit": 3,
        "clientInfo": {"name": "fuzzer", "version": "1"},
        "protocolVersion": "1",
        "capabilities": {"hooks": [], "llm": False},
        "model": {"provider": "fake", "modelId": "m"},
    }
    params: dict[str, Any] = {}
    properties = schema.get("properties", {})
    for name in schema.get("required", []):
        params[name] = known.get(name, _example(_resolve(properties.get(name, {}))))
    for name in properties:
        if name not in params and name in known and pick % 3 == 0:
            params[name] = known[name]
    if method == "session/new":
        params.pop("path", None)  # a new file each time, in the session directory
        params.pop("id", None)
    return params


def _example(schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    if "anyOf" in schema or "oneOf" in schema:
        return _example(_resolve((schema.get("anyOf") or schema["oneOf"])[0]))
    return {
        "string": "x",
        "integer": 1,
        "number": 1.0,
        "boolean": False,
        "array": [],
        "object": {},
    }.get(kind)


# -- how requests are bent ---------------------------------------------------------------------------

NASTY = [
    "",
    " ",
    "..",
    "../../../../etc/passwd",
    "/",
    "/dev/zero",
    "~",
    "a\x00b",
    "\u2028\u2029",
    "\ufeff",
    "\U0001f600" * 30,
    "\u202etxt.exe",
    "%s%n%x",
    "${HOME}",
    "\\",
    '"',
    "{}",
    "null",
    "CON",
    "a" * 1000,
    "\t\r\n",
    "\u0000\u0001\u001f",
    "𝕏漢字é",
]
WRONG: list[Any] = [
    None,
    0,
    -1,
    1.5,
    -0.0,
    True,
    False,
    "",
    "wrong",
    [],
    {},
    [1, "a", None],
    {"a": {"b": []}},
    2**53,
    -(2**63),
    1e308,
]


@st.composite
def huge(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["string", "int", "float", "list", "dict", "entries"]))
    if kind == "string":
        return "h" * draw(st.integers(10_000, 64_000))
    if kind == "int":
        return draw(st.sampled_from([2**64, -(2**64), 10**30, 2**63, -(2**63) - 1]))
    if kind == "float":
        return draw(st.sampled_from([1e308, -1e308, 5e-324]))
    if kind == "list":
        return list(range(draw(st.integers(1_000, 20_000))))
    if kind == "dict":
        return {f"k{i}": i for i in range(draw(st.integers(500, 5_000)))}
    return [user(f"bulk {i}") for i in range(draw(st.integers(100, 1_500)))]


text = st.one_of(st.sampled_from(NASTY), st.text(max_size=60))
json_value = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        text,
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(text, inner, max_size=4)),
    max_leaves=12,
)


@st.composite
def broken_entry(draw: st.DrawFn) -> Any:
    base = draw(
        st.sampled_from(
            [user("u"), assistant("a"), tool_result("t"), {"type": "label", "targetId": "x"}]
        )
    )
    entry = json.loads(json.dumps(base))
    choice = draw(st.sampled_from(["type", "message", "role", "content", "extra", "id", "whole"]))
    if choice == "type":
        entry["type"] = draw(
            st.one_of(
                st.sampled_from(["session", "compaction", "branch_summary", "", "message "]),
                json_value,
            )
        )
    elif choice == "message":
        entry["message"] = draw(json_value)
    elif choice == "role" and "message" in entry:
        entry["message"]["role"] = draw(
            st.one_of(
                st.sampled_from(["compactionSummary", "branchSummary", "system", ""]), json_value
            )
        )
    elif choice == "content" and "message" in entry:
        entry["message"]["content"] = draw(json_value)
    elif choice == "extra":
        entry[draw(text)] = draw(json_value)
    elif choice == "id":
        entry[draw(st.sampled_from(["id", "parentId", "timestamp"]))] = draw(json_value)
    else:
        return draw(json_value)
    return entry


@dataclass
class Case:
    method: str
    mutation: str
    params: Any  # a JSON value, or bytes (raw JSON), or ABSENT
    deep: int = 0


ABSENT = object()
DEEP_MARK = "\x00DEEP\x00"


@st.composite
def cases(draw: st.DrawFn, w: World) -> Case:
    method = draw(st.sampled_from(METHODS))
    params: Any = valid_params(method, w, draw(st.integers(0, 1000)))
    mutation = draw(
        st.sampled_from(
            [
                "valid",
                "drop",
                "null",
                "retype",
                "huge",
                "deep",
                "unknown",
                "text",
                "entries",
                "whole",
                "absent",
            ]
        )
    )
    keys = sorted(params)
    key = draw(st.sampled_from(keys)) if keys else None
    deep = 0
    if mutation == "drop" and key:
        del params[key]
    elif mutation == "null" and key:
        params[key] = None
    elif mutation == "retype" and key:
        params[key] = draw(st.sampled_from(WRONG))
    elif mutation == "huge" and key:
        params[key] = draw(huge())
    elif mutation == "deep":
        deep = draw(st.sampled_from([50, 900, 3_000, 100_000]))
        params[key or "extra"] = DEEP_MARK
    elif mutation == "unknown":
        for _ in range(draw(st.integers(1, 4))):
            params[draw(text)] = draw(json_value)
    elif mutation == "text":
        for name in keys:
            if isinstance(params[name], str):
                params[name] = draw(text)
    elif mutation == "entries":
        params["entries"] = draw(st.lists(broken_entry(), min_size=0, max_size=4))
    elif mutation == "whole":
        params = draw(
            st.one_of(
                st.none(), st.lists(json_value, max_size=3), text, st.integers(), st.booleans()
            )
        )
    elif mutation == "absent":
        params = ABSENT
    return Case(method, mutation, params, deep)


def encode(case: Case, request_id: int) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": case.method}
    if case.params is not ABSENT:
        message["params"] = case.params
    data = json.dumps(message, ensure_ascii=request_id % 2 == 0).encode()
    if case.deep:
        marker = json.dumps(DEEP_MARK, ensure_ascii=request_id % 2 == 0).encode()
        data = data.replace(marker, b"[" * case.deep + b"]" * case.deep)
    return data


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n%b" % (len(body), body)


def check_response(case: Case, response: dict[str, Any], request_id: int) -> str:
    """The reply is a well-formed JSON-RPC response of the right family; returns its outcome."""
    assert response.get("jsonrpc") == "2.0"
    assert response.get("id") == request_id
    assert ("result" in response) != ("error" in response), response
    if "result" in response:
        return "ok"
    error = response["error"]
    assert isinstance(error.get("code"), int) and isinstance(error.get("message"), str), error
    data = error.get("data")
    assert isinstance(data, dict) and isinstance(data.get("kind"), str), error
    code, kind = error["code"], data["kind"]
    assert code in KINDS, f"{case.method} ({case.mutation}) got code {code}: {error}"
    assert kind in KINDS[code], f"{case.method}: kind {kind} does not go with code {code}"
    assert not TRACEBACK.search(json.dumps(error)), error
    return kind


def ask(w: World, make: Callable[[int], bytes]) -> tuple[int, dict[str, Any]]:
    w.next_id += 1
    request_id = w.next_id
    w.peer.send_raw(frame(make(request_id)))
    response = w.peer.wait(request_id, ANSWER_WITHIN)  # fails the test after that long
    return request_id, response


def request(method: str, params: dict[str, Any]) -> Callable[[int], bytes]:
    def make(request_id: int) -> bytes:
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        return json.dumps(message).encode()

    return make


def canary(path: Path) -> Callable[[int], bytes]:
    return request("session/open", {"path": str(path)})


def forget_created(w: World, response: dict[str, Any]) -> None:
    """Close and delete a session the fuzzer made (session/new, session/fork), so that long
    runs do not pile up open files and listings do not grow without end."""
    result = response.get("result")
    if not isinstance(result, dict) or not isinstance(result.get("sessionId"), str):
        return
    created = result["sessionId"]
    if created == w.session_id or "path" not in result:
        return
    _, closed = ask(w, request("session/close", {"sessionId": created}))
    assert "result" in closed, closed
    path = Path(result["path"])
    if path != w.path and w.root in path.parents:
        path.unlink(missing_ok=True)


def test_hostile_requests_for_every_method(world: World) -> None:
    w = world
    seen_methods: set[str] = set()

    @settings(
        max_examples=CASES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def run(data: st.DataObject) -> None:
        case = data.draw(cases(w))
        seen_methods.add(case.method)
        request_id, response = ask(w, lambda request_id: encode(case, request_id))
        outcome = check_response(case, response, request_id)
        key = f"{case.mutation}: {outcome}"
        w.outcomes[key] = w.outcomes.get(key, 0) + 1
        if case.method in ("session/new", "session/fork"):
            forget_created(w, response)
        # the next valid request is answered (and keeps the session open for the next case)
        _, answer = ask(w, canary(w.path))
        assert answer.get("result", {}).get("sessionId") == w.session_id, answer
        assert not w.peer.violations, w.peer.violations

    run()
    assert seen_methods == set(METHODS)
    assert w.daemon.process.poll() is None, "the daemon died"
    outcomes = dict(sorted(w.outcomes.items()))
    print(f"\n{CASES} hostile requests over {len(METHODS)} methods: {outcomes}")
    # the fuzzer reached past the decoder: real work and real refusals both happened
    assert sum(v for k, v in outcomes.items() if k.endswith(": ok")) > CASES // 10
    assert sum(v for k, v in outcomes.items() if k.endswith("invalidParams")) > CASES // 10


def test_nothing_escaped_the_root_and_nothing_was_logged_as_a_crash(world: World) -> None:
    log = world.daemon.all_logs()
    assert "Traceback" not in log, log[log.find("Traceback") - 500 :][:3000]
    assert "Internal error" not in log
    home = Path(world.daemon.env["HOME"])
    assert not [p for p in home.rglob("*") if p.suffix == ".jsonl"], (
        "a session was written outside the root"
    )


@pytest.mark.parametrize(
    "params",
    [None, {}, [], "x", 5, {"unknown": {"deep": [1, 2, 3]}}, {"\u00e9": "\U0001f600"}],
    ids=["null", "empty", "array", "string", "number", "unknown", "non-ascii"],
)
def test_shutdown_with_odd_params_still_shuts_down_cleanly(tmp_path: Path, params: Any) -> None:
    daemon, peer = stdio_daemon(tmp_path)
    try:
        peer.initialize()
        response = peer.request("shutdown", params)
        if "error" in response:
            assert response["error"]["code"] == errors.INVALID_PARAMS, response
            response = peer.request("shutdown", None)
        assert response["result"] is None
        after = peer.request("settings/get", {})
        assert after["error"]["code"] == errors.INVALID_REQUEST  # shutting down: only exit now
        peer.notify("exit")
        assert daemon.process.wait(10) == 0
    finally:
        daemon.stop()


def test_a_lone_surrogate_from_a_javascript_client_is_answered(tmp_path: Path) -> None:
    daemon, peer = stdio_daemon(tmp_path)
    try:
        peer.initialize()
        sid = peer.call("session/new", {"cwd": "/p", "sessionDir": str(tmp_path / "s")})[
            "sessionId"
        ]
        body = (
            b'{"jsonrpc":"2.0","id":77,"method":"session/append","params":{"sessionId":"%s",'
            % sid.encode()
        )
        body += (
            b'"entries":[{"type":"message","message":{"role":"user","content":"cut \\ud83d"}}]}}'
        )
        peer.send_raw(frame(body))
        response = peer.wait(77, 2)
        assert "result" in response or response["error"]["code"] == errors.INVALID_PARAMS
    finally:
        daemon.stop()


# -- what the fuzzer found, pinned down ------------------------------------------------------------


def test_what_the_fuzzer_found_is_answered_properly(tmp_path: Path) -> None:
    """Each of these once got -32603 Internal error, or no answer at all."""
    sessions = tmp_path / "sessions"
    daemon, peer = stdio_daemon(tmp_path / "d", log_file=True)
    try:
        peer.initialize()
        sid = peer.call("session/new", {"cwd": "/p", "sessionDir": str(sessions)})["sessionId"]
        deep = b"[" * 50_000 + b"]" * 50_000
        raw_cases = [
            (
                b'{"jsonrpc":"2.0","id":501,"method":"settings/update","params":{"settings":%s}}'
                % deep,
                501,
            ),
            (b'{"jsonrpc":"2.0","id":502,"method":"session/list","params":%s}' % deep, 502),
            (b'{"jsonrpc":"2.0","id":503,"method":"nope","params":{"x":%s}}' % deep, 503),
        ]
        for body, request_id in raw_cases:
            peer.send_raw(frame(body))
            response = peer.wait(request_id, 10)
            assert response["error"]["code"] in (errors.INVALID_PARAMS, errors.INVALID_REQUEST)
        cases: list[tuple[str, dict[str, Any], str]] = [
            ("session/new", {"cwd": "h" * 5000}, "invalidParams"),
            ("session/new", {"cwd": "a\x00b"}, "invalidParams"),
            (
                "session/new",
                {"cwd": "/p", "sessionDir": str(sessions / ("h" * 300))},
                "invalidParams",
            ),
            ("session/open", {"path": str(sessions / ("h" * 300))}, "invalidParams"),
            ("session/open", {"path": "h" * 5000}, "invalidParams"),
            ("session/list", {"cwd": "h" * 5000}, "invalidParams"),
            (
                "session/append",
                {
                    "sessionId": sid,
                    "entries": [{"type": "message", "message": {"role": [], "content": "u"}}],
                },
                "invalidEntry",
            ),
            (
                "session/append",
                {
                    "sessionId": sid,
                    "entries": [{"type": "message", "message": {"role": {}, "content": "u"}}],
                },
                "invalidEntry",
            ),
        ]
        for method, params, kind in cases:
            with pytest.raises(RpcError) as refused:
                peer.call(method, params)
            assert refused.value.kind == kind, (method, refused.value)
        assert peer.call("settings/get", {})["settings"]
    finally:
        daemon.stop()
    assert "Traceback" not in daemon.all_logs()
