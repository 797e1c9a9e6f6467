"""A local HTTP server for the benchmarks: every GET answers after a fixed latency.

Run as ``python benchmarks/_http_server.py --latency 0.01 --size 1024``; it
prints its port on the first line of stdout and serves until killed. It runs
in a process of its own, so that it does not share the interpreter with the
loaders being measured, and it is a bare asyncio protocol (HTTP/1.1,
keep-alive, no request body) so that its own CPU time per request stays far
below the latency being simulated.
"""

from __future__ import annotations

import argparse
import asyncio


class LatencyServer(asyncio.Protocol):
    """Answers each request head after ``latency`` seconds with ``body``."""

    def __init__(self, latency: float, body: bytes) -> None:
        self.latency = latency
        self.response = (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body)
        ) + body
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        loop = asyncio.get_running_loop()
        while b"\r\n\r\n" in self.buffer:
            head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
            close = b"connection: close" in head.lower()
            loop.call_later(self.latency, self.respond, close)

    def respond(self, close: bool) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        self.transport.write(self.response)
        if close:
            self.transport.close()


async def serve(latency: float, size: int) -> None:
    loop = asyncio.get_running_loop()
    body = b"x" * size
    server = await loop.create_server(
        lambda: LatencyServer(latency, body), "127.0.0.1", 0, backlog=1024
    )
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--latency", type=float, default=0.010)
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args()
    asyncio.run(serve(args.latency, args.size))


if __name__ == "__main__":
    main()
