"""Fixtures of the Python client's tests: real daemons, each in its own HOME.

Most tests connect to one daemon shared by the whole run (on a Unix socket: a
connection costs milliseconds, a daemon start half a second); every test has its
own connection, settings and project directory. Tests about the stdio process
itself spawn their own daemons. Until the editable install lists
``clients/python``, the client is imported from source.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

CLIENT_SOURCE = Path(__file__).resolve().parents[2] / "clients" / "python"
if str(CLIENT_SOURCE) not in sys.path:
    sys.path.insert(0, str(CLIENT_SOURCE))

from sessiond_client import SessiondClient  # noqa: E402
from tests.fake_provider import FakeProvider, provider  # noqa: E402, F401

Spawn = Callable[..., Awaitable[SessiondClient]]
Connect = Callable[..., Awaitable[SessiondClient]]


def make_home(root: Path, settings: dict[str, Any] | None = None) -> Path:
    """A HOME with a settings file: the chars estimator keeps start-up quick."""
    config = root / ".config" / "sessiond"
    config.mkdir(parents=True)
    written = {"compaction": {"tokenEstimator": "chars"}, **(settings or {})}
    (config / "settings.json").write_text(json.dumps(written), encoding="utf-8")
    (config / "settings.json").chmod(0o600)
    return root


def isolated_env(home: Path) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("XDG_", "SESSIOND_")) and key != "TIKTOKEN_CACHE_DIR"
    }
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        XDG_RUNTIME_DIR=str(home / "run"),
    )
    return env


def provider_settings(request: pytest.FixtureRequest) -> dict[str, Any] | None:
    """For a test that uses the ``provider`` fixture, daemon settings listing it.

    Summarizer endpoints come only from a daemon's settings file (a client can only
    pick among configured candidates), so the daemons of such a test have the
    provider (``provider.candidate()``) in their settings file, and the test's
    ``initialize`` settings may then name it."""
    if "provider" not in request.fixturenames:
        return None
    fake: FakeProvider = request.getfixturevalue("provider")
    return {"summarizer": {"candidates": [fake.candidate()]}}


@pytest.fixture
def home(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return make_home(tmp_path / "home", provider_settings(request))


@pytest.fixture
def daemon_env(home: Path) -> dict[str, str]:
    return isolated_env(home)


@pytest.fixture
def project(tmp_path: Path) -> str:
    directory = tmp_path / "project"
    directory.mkdir()
    return str(directory)


@contextlib.contextmanager
def socket_daemon(home: Path, what: str) -> Iterator[str]:
    """``sessiond serve --socket`` in ``home``; yields the socket's path."""
    # A short directory: socket paths are limited to about 100 bytes.
    directory = tempfile.mkdtemp(prefix="sdc-")
    path = os.path.join(directory, "d.sock")
    stderr_path = home / "stderr.txt"
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "sessiond", "serve", "--socket", path],
            env=isolated_env(home),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + 15
        while "listening on" not in stderr_path.read_text(encoding="utf-8"):
            assert process.poll() is None, stderr_path.read_text(encoding="utf-8")
            assert time.monotonic() < deadline, f"{what} did not start"
            time.sleep(0.02)
        yield path
    finally:
        process.terminate()
        assert process.wait(10) == 0
        os.rmdir(directory)  # the daemon removed its socket


@pytest.fixture(scope="session")
def shared_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A socket daemon for the whole run; yields the socket's path."""
    with socket_daemon(
        make_home(tmp_path_factory.mktemp("shared-home")), "the shared daemon"
    ) as path:
        yield path


@pytest.fixture
async def connect(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Connect]:
    """New connections to a daemon; all closed at the end of the test: the shared
    daemon, or for a test that uses ``provider`` a daemon of its own that has it in its
    settings file (``provider_settings``)."""
    opened: list[SessiondClient] = []
    with contextlib.ExitStack() as stack:
        settings = provider_settings(request)
        if settings is not None:
            home = make_home(tmp_path / "provider-home", settings)
            address = stack.enter_context(socket_daemon(home, "the provider's daemon"))
        else:
            address = request.getfixturevalue("shared_daemon")

        async def open_one(**options: Any) -> SessiondClient:
            client = await SessiondClient.connect_socket(address, **options)
            opened.append(client)
            return client

        yield open_one
        for client in opened:
            await client.close()


@pytest.fixture
async def client(connect: Connect) -> SessiondClient:
    connected = await connect()
    await connected.initialize(client_name="pytest")
    return connected


@pytest.fixture
async def spawn(daemon_env: dict[str, str], tmp_path: Path) -> AsyncIterator[Spawn]:
    """Start daemons on stdio; every one is closed, and must have exited, at the end."""
    started: list[SessiondClient] = []

    async def start(**options: Any) -> SessiondClient:
        options.setdefault("env", daemon_env)
        options.setdefault("stderr", tmp_path / f"daemon-{len(started)}.log")
        client = await SessiondClient.spawn(**options)
        started.append(client)
        return client

    yield start
    for client in started:
        await client.close()
        assert client.transport.process.returncode is not None  # type: ignore[attr-defined]
