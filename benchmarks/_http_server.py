"""A local HTTP server for the benchmarks: every GET answers after a fixed latency.

Run as ``python benchmarks/_http_server.py --latency 0.01 --size 1024``; it
prints its port on the first line of stdout and serves until killed. It runs
in a process of its own so that it does not share the interpreter with the
loaders being measured.
"""

from __future__ import annotations

import argparse
import asyncio

from aiohttp import web


async def serve(latency: float, size: int) -> None:
    body = b"x" * size

    async def handle(request: web.Request) -> web.Response:
        await asyncio.sleep(latency)
        return web.Response(body=body)

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
    await site.start()
    print(site._server.sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--latency", type=float, default=0.010)
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args()
    asyncio.run(serve(args.latency, args.size))


if __name__ == "__main__":
    main()
