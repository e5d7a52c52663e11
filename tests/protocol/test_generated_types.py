"""Types generated from protocol/schema.json by stock generators work as they are.

The commands are the ones ``protocol/codegen/README.md`` shows: quicktype (npm, pinned in
``protocol/codegen/package.json``) for Go, datamodel-code-generator (PyPI, the ``[test]``
extra) for Python msgspec Structs. Each test generates the types from the schema file as it
is, compiles the Go (``go build``) or imports the Python, and round-trips the daemon's real
traffic through them: every params and result the examples exchanged (``conftest.replays``)
is decoded into its named type and encoded again, and must come back the same, up to what
the protocol says carries no meaning (a null or default optional field, a field the schema
does not list). Go needs a toolchain (``./dev.sh test`` installs Debian's golang-go when run
as root); without one the Go test is skipped and says so.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import msgspec
import pytest

from .conftest import EXAMPLES
from .replay import Transcript
from .schema_validation import message_table, schema

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "protocol" / "schema.json"
CODEGEN = ROOT / "protocol" / "codegen"
QUICKTYPE = CODEGEN / "node_modules" / ".bin" / "quicktype"
# The Go program: one {"TypeName": value} object per line in, the same re-encoded out.
GO_MAIN = """package main

import (
\t"bufio"
\t"encoding/json"
\t"fmt"
\t"os"
)

func main() {
\tin := bufio.NewScanner(os.Stdin)
\tin.Buffer(make([]byte, 1<<20), 1<<28)
\tout := bufio.NewWriter(os.Stdout)
\tdefer out.Flush()
\tfor in.Scan() {
\t\tvar value SessiondProtocol
\t\tif err := json.Unmarshal(in.Bytes(), &value); err != nil {
\t\t\tfmt.Fprintf(out, "{\\"error\\": %q}\\n", err.Error())
\t\t\tcontinue
\t\t}
\t\tencoded, err := json.Marshal(&value)
\t\tif err != nil {
\t\t\tfmt.Fprintf(out, "{\\"error\\": %q}\\n", err.Error())
\t\t\tcontinue
\t\t}
\t\tout.Write(encoded)
\t\tout.WriteString("\\n")
\t}
}
"""


# -- what went over the wire, by named type ---------------------------------------------------------


def _typed_values(transcript: Transcript) -> Iterator[tuple[str, Any]]:
    """(type name, value) of every params and result of a transcript that has a named type.

    A request's params count once it was answered with a result: the examples also send
    wrong requests on purpose, to show the errors."""
    table = message_table()
    asked: dict[tuple[str, str, str], tuple[str, Any]] = {}
    for peer, direction, raw in transcript:
        sender = "client" if direction == "send" else "daemon"
        for message in raw if isinstance(raw, list) else [raw]:
            if not isinstance(message, dict):
                continue
            method = message.get("method")
            key = (peer, sender, json.dumps(message.get("id")))
            if isinstance(method, str):
                row = table.get((method, sender))
                if row is None:
                    continue
                params = message.get("params")
                typed = (row["params"], params) if isinstance(params, dict) else None
                if "id" in message:
                    asked[key] = (method, typed)
                elif typed is not None and row["params"]:
                    yield typed
            else:
                other = "daemon" if sender == "client" else "client"
                method, typed = asked.pop((peer, other, json.dumps(message.get("id"))), ("", None))
                row = table.get((method, other))
                if row is None or "result" not in message:
                    continue
                if typed is not None:
                    yield typed
                if message["result"] is not None:
                    yield row["result"], message["result"]


@pytest.fixture(scope="module")
def traffic(replays: dict[str, Future[Transcript]]) -> list[tuple[str, Any]]:
    found = [
        value for example in EXAMPLES for value in _typed_values(replays[example.name].result(300))
    ]
    assert len(found) > 500
    return found


# -- what "the same" means -----------------------------------------------------------------------


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = schema()["$defs"][node["$ref"].removeprefix("#/$defs/")]
    return node


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return {str: "string", list: "array", dict: "object"}[type(value)]


def _fits(value: Any, node: dict[str, Any]) -> bool:
    node = _resolve(node)
    if "const" in node:
        return bool(node["const"] == value)
    members = node.get("oneOf") or node.get("anyOf")
    if members:
        return any(_fits(value, member) for member in members)
    kind = node.get("type")
    if kind is None:
        return True
    wanted = "number" if kind == "integer" else kind
    if _json_type(value) != wanted:
        return False
    if kind == "object":
        tags = [k for k, v in node.get("properties", {}).items() if "const" in v]
        return all(value.get(tag) == node["properties"][tag]["const"] for tag in tags)
    return True


def meaning(value: Any, node: dict[str, Any]) -> Any:
    """``value`` as the schema reads it: without optional fields that are null or at their
    default, and without fields the schema does not list."""
    node = _resolve(node)
    members = node.get("oneOf") or node.get("anyOf")
    if members:
        chosen = next((m for m in members if _fits(value, m)), None)
        return value if chosen is None else meaning(value, chosen)
    if isinstance(value, list):
        return [meaning(item, node.get("items", {})) for item in value]
    if not isinstance(value, dict) or node.get("type") != "object":
        return value
    properties = node.get("properties")
    if not properties:  # a free-form object: kept whole
        return value
    required = set(node.get("required", []))
    out = {}
    for key, item in value.items():
        field = properties.get(key)
        if field is None:
            continue
        if key not in required and (item is None or item == field.get("default", None)):
            continue
        out[key] = meaning(item, field)
    return out


def unlisted(value: Any, node: dict[str, Any], where: str) -> Iterator[str]:
    """Where ``value`` has a field its schema node does not list."""
    node = _resolve(node)
    members = node.get("oneOf") or node.get("anyOf")
    if members:
        chosen = next((m for m in members if _fits(value, m)), None)
        if chosen is not None:
            yield from unlisted(value, chosen, where)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from unlisted(item, node.get("items", {}), f"{where}[{index}]")
    elif isinstance(value, dict) and node.get("properties"):
        for key, item in value.items():
            field = node["properties"].get(key)
            if field is None:
                yield f"{where}.{key}"
            else:
                yield from unlisted(item, field, f"{where}.{key}")


def test_the_traffic_holds_no_field_the_schema_does_not_list(
    traffic: list[tuple[str, Any]],
) -> None:
    """So the round trips below drop nothing: every field the examples exchange is typed."""
    found = {
        p for name, value in traffic for p in unlisted(value, {"$ref": f"#/$defs/{name}"}, name)
    }
    assert not found, sorted(found)


def _round_trip_problems(
    traffic: list[tuple[str, Any]], encoded: list[Any], *, empty_is_absent: bool = False
) -> list[str]:
    problems = []
    for (name, value), back in zip(traffic, encoded, strict=True):
        if "error" in back and len(back) == 1:
            problems.append(f"{name}: {back['error']}: {json.dumps(value)[:300]}")
            continue
        got = back.get(name)
        if got is None and empty_is_absent:
            got = {}  # an empty object, left out by omitempty
        node = {"$ref": f"#/$defs/{name}"}
        want, have = meaning(value, node), meaning(got, node)
        if empty_is_absent:
            want, have = _without_empty(want), _without_empty(have)
        if want != have:
            problems.append(
                f"{name}: {json.dumps(want)[:300]}\n  came back as {json.dumps(have)[:300]}"
            )
    return problems


def _without_empty(value: Any) -> Any:
    """Go's ``omitempty`` leaves out an empty list or object: both sides without them."""
    if isinstance(value, dict):
        return {k: _without_empty(v) for k, v in value.items() if v not in ([], {})}
    if isinstance(value, list):
        return [_without_empty(item) for item in value]
    return value


def _lines(traffic: list[tuple[str, Any]]) -> bytes:
    return b"".join(msgspec.json.encode({name: value}) + b"\n" for name, value in traffic)


# -- Go ----------------------------------------------------------------------------------------------


def _go_cache() -> Path:
    """Go's build cache, kept between runs beside the virtual environment (compiling the
    standard library the first time takes a few seconds)."""
    cache = Path(os.environ.get("GOCACHE") or ROOT / ".venv" / "go-build-cache")
    cache.mkdir(parents=True, exist_ok=True)
    return cache


def test_go_types_from_quicktype_round_trip_the_traffic(
    traffic: list[tuple[str, Any]], tmp_path: Path
) -> None:
    if not QUICKTYPE.exists():
        pytest.skip(
            "quicktype is not installed: run `npm ci` in protocol/codegen (./dev.sh test does)"
        )
    go = shutil.which("go")
    if go is None:
        pytest.skip(
            "no Go toolchain: ./dev.sh test installs Debian's golang-go when run as root; "
            "as another user, install golang-go to compile the generated Go types"
        )
    # The command protocol/codegen/README.md shows.
    generated = subprocess.run(
        [str(QUICKTYPE), "--src-lang", "schema", "--lang", "go", "--package", "main",
         "--top-level", "SessiondProtocol", "--out", str(tmp_path / "protocol.go"), str(SCHEMA)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert generated.returncode == 0, generated.stderr
    (tmp_path / "main.go").write_text(GO_MAIN, encoding="utf-8")
    (tmp_path / "go.mod").write_text("module roundtrip\n\ngo 1.19\n", encoding="utf-8")
    env = {
        **os.environ,
        "GOCACHE": str(_go_cache()),
        "GOPATH": str(tmp_path / "gopath"),
        "GOFLAGS": "-mod=mod",
        "GOPROXY": "off",  # the standard library only: nothing is downloaded
        "GOTOOLCHAIN": "local",
        "CGO_ENABLED": "0",
    }
    built = subprocess.run(
        [go, "build", "-o", "roundtrip", "."],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    ran = subprocess.run(
        [str(tmp_path / "roundtrip")], input=_lines(traffic), capture_output=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    encoded = [json.loads(line) for line in ran.stdout.splitlines()]
    problems = _round_trip_problems(traffic, encoded, empty_is_absent=True)
    assert not problems, f"{len(problems)} values changed:\n" + "\n".join(problems[:20])


# -- Python --------------------------------------------------------------------------------------------


def test_python_types_from_datamodel_code_generator_round_trip_the_traffic(
    traffic: list[tuple[str, Any]], tmp_path: Path
) -> None:
    module_path = tmp_path / "sessiond_protocol.py"
    # The command protocol/codegen/README.md shows.
    generated = subprocess.run(
        [str(Path(sys.executable).parent / "datamodel-codegen"),
         "--input", str(SCHEMA), "--input-file-type", "jsonschema",
         "--output-model-type", "msgspec.Struct", "--target-python-version", "3.11",
         "--snake-case-field", "--enum-field-as-literal", "all", "--keyword-only",
         "--disable-timestamp", "--formatters", "builtin", "--output", str(module_path)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert generated.returncode == 0, generated.stderr
    spec = importlib.util.spec_from_file_location("sessiond_protocol", module_path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["sessiond_protocol"] = module  # msgspec resolves annotations through it
    try:
        spec.loader.exec_module(module)
        decoder = msgspec.json.Decoder(module.SessiondProtocol)
        encoded = []
        for line in _lines(traffic).splitlines():
            try:
                encoded.append(msgspec.json.decode(msgspec.json.encode(decoder.decode(line))))
            except msgspec.ValidationError as exc:
                encoded.append({"error": str(exc)})
    finally:
        del sys.modules["sessiond_protocol"]
    problems = _round_trip_problems(traffic, encoded)
    assert not problems, f"{len(problems)} values changed:\n" + "\n".join(problems[:20])
    # Tagged unions are real unions: an entry decodes as its own type.
    entry = {"type": "label", "id": "e1", "parentId": None, "timestamp": "t", "targetId": "e0"}
    decoded = msgspec.convert({"Entry": entry}, module.SessiondProtocol)
    assert type(decoded.entry).__name__ == "LabelEntry"
