"""A JSON-RPC server that does nothing: the floor under any asyncio server's round trip.

It reads Content-Length frames from stdin and answers each request with ``null``, on
asyncio's own loop like the daemon. ``daemon_bench`` times it with the same blocking
client, so the daemon's sequential figures can be read against what the pipe, the
client and one asyncio wake-up cost on the machine at hand.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script

from bench.daemon_bench import split_frames


class NoopServer(asyncio.Protocol):
    def __init__(self, out: asyncio.WriteTransport) -> None:
        self.out = out
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        requests, self.buffer = split_frames(self.buffer + data)
        for request in requests:
            answer = json.dumps({"jsonrpc": "2.0", "id": request.get("id"), "result": None})
            body = answer.encode()
            self.out.write(b"Content-Length: %d\r\n\r\n%b" % (len(body), body))

    def eof_received(self) -> None:
        asyncio.get_running_loop().stop()


def main() -> None:
    loop = asyncio.new_event_loop()
    out, _ = loop.run_until_complete(loop.connect_write_pipe(asyncio.Protocol, sys.stdout))
    loop.run_until_complete(loop.connect_read_pipe(lambda: NoopServer(out), sys.stdin))
    loop.run_forever()


if __name__ == "__main__":
    main()
