"""Where the byte streams come from: a daemon we spawn on stdio, a Unix socket, or TCP.

A spawned daemon's stderr goes to a log file when one is given; otherwise it is read
continuously (so the daemon never blocks on a full pipe) and its last lines are kept
to explain an unexpected exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import subprocess
import sys
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path

from .errors import ConnectionClosedError

log = logging.getLogger("sessiond_client")

DEFAULT_COMMAND: tuple[str, ...] = (sys.executable, "-m", "sessiond", "serve", "--stdio")
TOKEN_ENV = "SESSIOND_TOKEN"
_STDERR_TAIL_LINES = 40
# Above asyncio's 64 KiB default so that a long header line is reported, not a crash.
_STREAM_LIMIT = 1 << 20


class Transport:
    """The streams of one connection, and how to let go of them."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, description: str
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.description = description

    async def describe_end(self) -> str:
        """Why the daemon ended the stream, as far as the transport knows."""
        return f"the daemon closed the connection ({self.description})"

    async def aclose(self, timeout: float) -> None:
        """Release the transport after the connection is closed."""


class ProcessTransport(Transport):
    """A daemon spawned as a child process, speaking on its stdin and stdout."""

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        command: Sequence[str],
        stderr_tail: deque[str] | None,
    ) -> None:
        assert process.stdout is not None and process.stdin is not None
        super().__init__(process.stdout, process.stdin, f"pid {process.pid}")
        self.process = process
        self.command = list(command)
        self._stderr_tail = stderr_tail
        self._stderr_task: asyncio.Task[None] | None = None
        if process.stderr is not None and stderr_tail is not None:
            self._stderr_task = asyncio.get_running_loop().create_task(
                _drain(process.stderr, stderr_tail)
            )

    @property
    def stderr_tail(self) -> list[str]:
        """The daemon's last stderr lines (empty when stderr goes to a log file)."""
        return list(self._stderr_tail or ())

    async def describe_end(self) -> str:
        try:
            # The stream ends a moment before the process does; wait briefly for its code.
            code = await asyncio.wait_for(self.process.wait(), 1.0)
        except TimeoutError:
            return f"the daemon (pid {self.process.pid}) closed its stdout"
        if self._stderr_task is not None:
            await asyncio.wait({self._stderr_task}, timeout=0.5)
        text = f"the daemon (pid {self.process.pid}) exited with code {code}"
        tail = self.stderr_tail[-5:]
        return f"{text}; its stderr ended with:\n" + "\n".join(tail) if tail else text

    async def aclose(self, timeout: float) -> None:
        """Wait for the exit the daemon was asked for; terminate, then kill, if it lingers."""
        process = self.process
        for signal_name, stop in (("SIGTERM", process.terminate), ("SIGKILL", process.kill)):
            try:
                await asyncio.wait_for(process.wait(), timeout)
                break
            except TimeoutError:
                log.warning("daemon pid %d still running: %s", process.pid, signal_name)
            with contextlib.suppress(ProcessLookupError):
                stop()
        await process.wait()  # reaped, even after SIGKILL: no zombie is left
        if self._stderr_task is not None:
            done, _ = await asyncio.wait({self._stderr_task}, timeout=1.0)
            if not done:
                self._stderr_task.cancel()


async def _drain(stream: asyncio.StreamReader, tail: deque[str]) -> None:
    while True:
        try:
            line = await stream.readline()
        except ValueError:  # a line beyond the stream limit: keep going with the rest
            continue
        if not line:
            return
        text = line.decode("utf-8", "replace").rstrip()
        tail.append(text)
        log.debug("daemon: %s", text)


async def spawn_process(
    command: Sequence[str] | None,
    *,
    env: Mapping[str, str] | None,
    cwd: str | os.PathLike[str] | None,
    stderr: str | os.PathLike[str] | None,
) -> ProcessTransport:
    argv = list(command or DEFAULT_COMMAND)
    log_file = open(stderr, "ab") if stderr is not None else None  # noqa: SIM115 - closed below
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log_file if log_file is not None else subprocess.PIPE,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            limit=_STREAM_LIMIT,
        )
    except OSError as exc:
        raise ConnectionClosedError(f"cannot start the daemon {argv[0]!r}: {exc}") from exc
    finally:
        if log_file is not None:
            log_file.close()  # the child has its own descriptor now
    tail = deque[str](maxlen=_STDERR_TAIL_LINES) if stderr is None else None
    return ProcessTransport(process, argv, tail)


async def connect_unix(path: str | os.PathLike[str] | None) -> Transport:
    if path is None:
        # The daemon's default: sessiond.sock in platformdirs' user runtime directory.
        import platformdirs

        path = platformdirs.user_runtime_path("sessiond", appauthor=False) / "sessiond.sock"
    try:
        reader, writer = await asyncio.open_unix_connection(os.fspath(path), limit=_STREAM_LIMIT)
    except OSError as exc:
        raise ConnectionClosedError(f"cannot connect to unix socket {path}: {exc}") from exc
    return Transport(reader, writer, f"unix {path}")


async def connect_tcp(host: str, port: int) -> Transport:
    try:
        reader, writer = await asyncio.open_connection(host, port, limit=_STREAM_LIMIT)
    except OSError as exc:
        raise ConnectionClosedError(f"cannot connect to tcp {host}:{port}: {exc}") from exc
    return Transport(reader, writer, f"tcp {host}:{port}")


def resolve_token(token: str | None, token_file: str | os.PathLike[str] | None) -> str | None:
    """The TCP token: given, else read from ``token_file``, else ``$SESSIOND_TOKEN``."""
    if token is not None:
        return token
    if token_file is not None:
        return Path(token_file).read_text(encoding="utf-8").strip()
    return os.environ.get(TOKEN_ENV)
