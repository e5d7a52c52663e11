"""The stdio server as a process: gating, recovery over a real pipe, and every way it ends."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from sessiond.jsonrpc.header_framing import encode_frame
from tests.jsonrpc.wire_client import EXAMPLE_SERVER, ServerProcess, spawn_server, stdio_client


async def test_gating_and_recovery_over_a_real_pipe() -> None:
    server = await spawn_server("--stdio", stdio=True)
    try:
        client = await stdio_client(server)
        assert (await client.request("echo", {}))["error"]["code"] == -32002
        await client.initialize()
        # Each broken frame is answered (or skipped) and the request after it is served.
        for broken in (
            b"Content-Length: 12\r\n\r\n{not json!!}",
            b"content-length: 5\r\n\r\n",  # too short: cuts into the next frame's header
            b"junk between frames\r\n\r\n",
            b"Content-Length: 999\r\n\r\n{}",  # too long
        ):
            client.send_raw(broken)
            assert await client.result("echo", {"after": broken.decode()}) == {
                "after": broken.decode()
            }
        assert await client.result("print") == "printed"
        assert await client.result("shutdown") is None
        client.notify("exit")
        assert await server.wait() == 0
    finally:
        await server.stop()
    stderr = bytes(server.stderr)
    assert b"a stray print must not reach the protocol stream" in stderr


async def test_exit_without_shutdown_exits_1() -> None:
    server = await spawn_server("--stdio", stdio=True)
    try:
        client = await stdio_client(server)
        await client.initialize()
        client.notify("exit")
        assert await server.wait() == 1
    finally:
        await server.stop()


async def test_end_of_stdin_answers_what_is_running_then_exits(tmp_path: Path) -> None:
    marker = tmp_path / "flushed"
    server = await spawn_server("--stdio", stdio=True, env={"EXAMPLE_SHUTDOWN_MARKER": str(marker)})
    try:
        client = await stdio_client(server)
        await client.initialize()
        request_id = client.start_request("sleep", {"seconds": 0.2})
        await asyncio.sleep(0.05)
        client.close()  # closes the server's stdin
        assert "result" in await client.answer(request_id)
        assert await server.wait() == 0
    finally:
        await server.stop()
    assert marker.read_text() == "flushed\n"


async def test_sigterm_runs_the_shutdown_hook(tmp_path: Path) -> None:
    marker = tmp_path / "flushed"
    server = await spawn_server("--stdio", stdio=True, env={"EXAMPLE_SHUTDOWN_MARKER": str(marker)})
    try:
        client = await stdio_client(server)
        await client.initialize()
        server.process.send_signal(signal.SIGTERM)
        assert await server.wait() == 0
    finally:
        await server.stop()
    assert marker.read_text() == "flushed\n"


async def test_exits_when_its_parent_dies_even_if_stdin_stays_open(tmp_path: Path) -> None:
    # The test holds the server's stdin open; only the parent's death can stop it.
    read_end, write_end = os.pipe()
    pid_file = tmp_path / "server.pid"
    log_file = tmp_path / "server.log"
    parent_code = textwrap.dedent(
        f"""
        import subprocess, sys, time
        server = subprocess.Popen(
            [sys.executable, {str(EXAMPLE_SERVER)!r}, "--stdio", "--log-file", {str(log_file)!r}],
            stdin={read_end}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=({read_end},),
        )
        open({str(pid_file)!r}, "w").write(str(server.pid))
        time.sleep(60)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code], pass_fds=(read_end,))
    try:
        deadline = time.monotonic() + 10
        while not log_file.exists() or "serving on stdio" not in log_file.read_text():
            assert time.monotonic() < deadline, "server did not start"
            await asyncio.sleep(0.02)
        server_pid = int(pid_file.read_text())
        assert _alive(server_pid)
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 5
        while _alive(server_pid):
            assert time.monotonic() < deadline, "server outlived its parent"
            await asyncio.sleep(0.05)
    finally:
        parent.kill()
        parent.wait()
        os.close(read_end)
        os.close(write_end)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (re-parented to init, not yet reaped) counts as gone.
    status = Path(f"/proc/{pid}/stat")
    return not status.exists() or status.read_text().split()[2] != "Z"


async def test_stdin_from_a_file_is_served(tmp_path: Path) -> None:
    requests = tmp_path / "requests.bin"
    requests.write_bytes(
        b"".join(
            encode_frame(body)
            for body in (
                b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}',
                b'{"jsonrpc":"2.0","id":2,"method":"echo","params":{"x":1}}',
            )
        )
    )
    with requests.open("rb") as stdin:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(EXAMPLE_SERVER),
            "--stdio",
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        server = ServerProcess(process)
        assert process.stdout is not None
        output = await asyncio.wait_for(process.stdout.read(), 10)
        await server.wait()
    # id 2 raced initialize (answered -32002 or served): either way it was answered.
    assert re.search(rb'"id":1,"result"', output)
    assert re.search(rb'"id":2,', output)


async def test_sigterm_lets_running_requests_finish_within_the_grace_period() -> None:
    server = await spawn_server("--stdio", stdio=True)  # the example's grace is 1 s
    try:
        client = await stdio_client(server)
        await client.initialize()
        quick = client.start_request("sleep", {"seconds": 0.3})
        stuck = client.start_request("sleep", {"seconds": 30})
        await asyncio.sleep(0.1)
        server.process.send_signal(signal.SIGTERM)
        assert "result" in await client.answer(quick)
        assert await server.wait() == 0  # without waiting for the 30 s request:
        answered = [m.get("id") for m in client.received if isinstance(m, dict)]
        assert stuck not in answered  # cut off when the grace period ended
    finally:
        await server.stop()
