"""Replaying one ``protocol/examples/*.json`` scenario against real daemon processes.

The file format is described in ``protocol/README.md`` ("Examples"). In short::

    {
      "description": "...",
      "daemons": [{"transport": "stdio" | "socket" | "tcp", "token": "...", "exitCode": 0}],
      "peers": {"client": 0},                       # peer name -> daemon index
      "settingsFile": {...},                        # the user's settings.json
      "files": {"relative/path": "text" | [json lines]},
      "messages": [
        {"direction": "send", "message": {...}},     # or "raw": "bytes as text"
        {"direction": "receive", "message": {...}},
        {"direction": "check", "path": "<tmp>/x.jsonl", "exists": false | "jsonl": [...]},
        ...
      ]
    }

``peer`` on a step picks the connection (default: the first peer). Received
messages are matched per peer: a response by its id, a notification against the
next unmatched notification of the same method, a server request against the next
unmatched request of the same method, so notifications may interleave freely with
other messages. When the steps are done, every peer's input is closed, the rest of
what the daemon sends is read, and anything the example did not expect fails.

``replay`` returns the transcript: every message sent and received, in wire order,
as ``(peer, "send" | "receive", message)``.
"""

from __future__ import annotations

import json
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .matching import Bindings, Mismatch
from .wire import EOF, Channel, Daemon, socket_channel

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "protocol" / "examples"
# How long to wait for one expected message before giving up.
RECEIVE_TIMEOUT = 30.0


def example_paths() -> list[Path]:
    return sorted(EXAMPLES_DIR.glob("*.json"))


def load_example(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{path.name}: an example is a JSON object"
    return data


def kind_of(message: Any) -> str:
    """``response``, ``notification``, ``request`` (server to client) or ``batch``."""
    if isinstance(message, list):
        return "batch"
    if "method" in message:
        return "request" if "id" in message else "notification"
    return "response"


Transcript = list[tuple[str, str, Any]]


@dataclass
class Peer:
    name: str
    channel: Channel
    transcript: Transcript
    # Received, not yet matched, in arrival order.
    pending: list[Any] = field(default_factory=list)
    ended: bool = False

    def read_one(self, timeout: float) -> bool:
        """Move one message from the wire to ``pending``; False on timeout or at the end."""
        if self.ended:
            return False
        message = self.channel.receive(timeout)
        if message is None:
            return False
        if message is EOF:
            self.ended = True
            return False
        self.pending.append(message)
        self.transcript.append((self.name, "receive", message))
        return True


class Scenario:
    def __init__(self, path: Path, root: Path) -> None:
        self.path = path
        self.name = path.name
        self.data = load_example(path)
        self.root = root
        self.home = root / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.bindings = Bindings(
            {
                "tmp": str(root),
                "home": str(self.home),
                "configHome": str(self.home / ".config"),
                "dataHome": str(self.home / ".local/share"),
                "runtimeDir": str(self.home / "run"),
            }
        )
        self.daemons: list[Daemon] = []
        self.daemon_specs: list[dict[str, Any]] = []
        self.peers: dict[str, Peer] = {}
        self.transcript: Transcript = []

    # -- setting up

    def prepare_files(self) -> None:
        settings = self.data.get("settingsFile")
        if settings is not None:
            target = self.home / ".config" / "sessiond" / "settings.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(self.bindings.substitute(settings)), encoding="utf-8")
            target.chmod(0o600)
        for relative, content in self.data.get("files", {}).items():
            target = Path(self.bindings.substitute_text(f"<tmp>/{relative}"))
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, str):
                text = self.bindings.substitute_text(content)
            else:
                text = "".join(
                    self.bindings.substitute_text(item)
                    if isinstance(item, str)
                    else json.dumps(self.bindings.substitute(item), separators=(",", ":")) + "\n"
                    for item in content
                )
            target.write_text(text, encoding="utf-8")

    def start(self) -> None:
        self.daemon_specs = self.data.get("daemons", [{"transport": "stdio"}])
        peer_specs: dict[str, int] = self.data.get("peers", {"client": 0})
        for index, spec in enumerate(self.daemon_specs):
            transport = spec.get("transport", "stdio")
            env: dict[str, str] = {}
            if transport == "stdio":
                args = ["--stdio"]
            elif transport == "socket":
                args = ["--socket"]
            elif transport == "tcp":
                args = ["--tcp", "127.0.0.1:0"]
                if "token" in spec:
                    env["SESSIOND_TOKEN"] = spec["token"]
            else:
                raise AssertionError(f"{self.name}: unknown transport {transport!r}")
            # Every daemon has the same user directories; each logs to its own file.
            log = self.root / f"daemon{index}.log"
            self.daemons.append(Daemon(self.home, args, env=env, cwd=self.root, log_path=log))
        for name, index in peer_specs.items():
            daemon = self.daemons[index]
            transport = self.daemon_specs[index].get("transport", "stdio")
            if transport == "stdio":
                if any(peer_specs[other] == index for other in self.peers):
                    raise AssertionError(f"{self.name}: a stdio daemon has a single peer")
                channel = daemon.stdio_channel()
            else:
                family, address = daemon.wait_listening()
                channel = socket_channel(family, address)
                # Connection order decides hook order: let the daemon accept this one first.
                time.sleep(0.05)
            self.peers[name] = Peer(name, channel, self.transcript)

    # -- running

    def run(self) -> None:
        self.prepare_files()
        self.start()
        default_peer = next(iter(self.peers))
        for number, step in enumerate(self.data["messages"]):
            peer = self.peers[step.get("peer", default_peer)]
            direction = step["direction"]
            try:
                if direction == "send":
                    self.send(peer, step)
                elif direction == "receive":
                    self.receive(peer, step["message"])
                elif direction == "check":
                    self.check(step)
                else:
                    raise AssertionError(f"unknown direction {direction!r}")
            except AssertionError as exc:
                raise AssertionError(
                    f"{self.name}, step {number} ({direction}"
                    f"{' ' + _describe(step.get('message')) if 'message' in step else ''}): "
                    f"{exc}\n{self.logs()}"
                ) from None
        self.finish()

    def send(self, peer: Peer, step: dict[str, Any]) -> None:
        if "raw" in step:
            peer.channel.send_raw(self.bindings.substitute_text(step["raw"]).encode())
            return
        message = self.bindings.substitute(step["message"])
        self.transcript.append((peer.name, "send", message))
        peer.channel.send(message)

    def receive(self, peer: Peer, expected: Any) -> None:
        kind = kind_of(expected)
        deadline = time.monotonic() + RECEIVE_TIMEOUT
        while True:
            index = self._find(peer, expected, kind)
            if index is not None:
                actual = peer.pending.pop(index)
                try:
                    self.bindings.match(expected, actual)
                except Mismatch as exc:
                    raise AssertionError(f"{exc}\nreceived: {json.dumps(actual)[:2000]}") from None
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not peer.read_one(remaining):
                raise AssertionError(
                    f"{peer.name} never received it; still unmatched: "
                    f"{json.dumps(peer.pending)[:3000]}"
                )

    def _find(self, peer: Peer, expected: Any, kind: str) -> int | None:
        for index, message in enumerate(peer.pending):
            if kind_of(message) != kind:
                continue
            if kind == "response":
                if self._same_id(expected.get("id"), message.get("id")):
                    return index
            elif kind in ("notification", "request"):
                if message.get("method") == expected.get("method"):
                    return index
            else:
                return index
        return None

    def _same_id(self, expected: Any, actual: Any) -> bool:
        if isinstance(expected, str) and expected.startswith("<") and expected.endswith(">"):
            name = expected[1:-1]
            if name not in self.bindings:
                return True  # bound by the match itself
            expected = self.bindings[name]
        return bool(expected == actual) and type(expected) is type(actual)

    def check(self, step: dict[str, Any]) -> None:
        target = Path(self.bindings.substitute_text(step["path"]))
        if "exists" in step:
            assert target.exists() == step["exists"], (
                f"{target} should{'' if step['exists'] else ' not'} exist"
            )
        if "mode" in step:
            mode = oct(target.stat().st_mode & 0o777)
            assert mode == step["mode"], f"{target} has mode {mode}, not {step['mode']}"
        if "jsonl" in step:
            lines = target.read_text(encoding="utf-8").splitlines()
            actual = [json.loads(line) for line in lines if line.strip()]
            try:
                self.bindings.match(step["jsonl"], actual, target.name)
            except Mismatch as exc:
                raise AssertionError(f"{exc}\nfile: {json.dumps(actual)[:2000]}") from None

    def finish(self) -> None:
        """Close every peer's input, read what is left, then stop the daemons."""
        for peer in self.peers.values():
            peer.channel.close_input()
        for peer in self.peers.values():
            deadline = time.monotonic() + RECEIVE_TIMEOUT
            while not peer.ended and time.monotonic() < deadline:
                peer.read_one(deadline - time.monotonic())
            assert peer.ended, f"{self.name}: {peer.name}'s connection did not end\n{self.logs()}"
            assert not peer.pending, (
                f"{self.name}: {peer.name} received messages the example does not list: "
                f"{json.dumps(peer.pending)[:3000]}\n{self.logs()}"
            )
        for daemon, spec in zip(self.daemons, self.daemon_specs):
            if spec.get("transport", "stdio") != "stdio":
                daemon.process.send_signal(signal.SIGTERM)
            code = daemon.wait()
            assert code == spec.get("exitCode", 0), (
                f"{self.name}: the daemon exited with {code}\n{self.logs()}"
            )
            log = daemon.log()
            assert "Traceback" not in log, f"{self.name}: the daemon logged a traceback\n{log}"

    def logs(self) -> str:
        return "\n".join(
            f"--- daemon {index} log ---\n{daemon.log()[-4000:]}"
            for index, daemon in enumerate(self.daemons)
        )

    def close(self) -> None:
        for daemon in self.daemons:
            daemon.close()


def _describe(message: Any) -> str:
    if isinstance(message, dict):
        return str(message.get("method") or f"id {message.get('id')}")
    return "batch" if isinstance(message, list) else ""


def replay(path: Path, root: Path) -> Transcript:
    scenario = Scenario(path, root)
    try:
        scenario.run()
    finally:
        scenario.close()
    return scenario.transcript
