"""A loopback HTTP server that misbehaves on purpose, for the tests of untrusted input.

Routes (each records the request's headers under its path in ``seen``)::

    /loop                 302 to itself, query kept: a redirect loop
    /to?url=U             302 to U (another scheme, another origin, ...)
    /to-ftp               302 to an ftp:// URL
    /status/N             HTTP N
    /echo-headers/N       HTTP N, the request's headers and URL in its reason and body
    /reset                the connection closed before any response
    /cut?head=H           200 declaring 1 MiB, ``bodies[H]``, then the connection closed
    /slow                 no response for a minute
    /endless              200, chunked, bytes for ever
    /drip?every=S         200, chunked, 64 bytes every S seconds, for ever
                          (both after ``bodies[H]`` with ``&head=H``; declaring
                          ``N`` bytes with ``&length=N``)
    /body/NAME            200 with ``bodies[NAME]`` (``Range: bytes=N-`` honoured)
    /chunked/NAME         200 with ``bodies[NAME]``, chunked: no length said
    /echo                 200, "echo"

A path under ``/bucket/`` is the route after it (an object store's GET).
``raw`` is the URL of a second listener that answers every connection with
bytes that are not HTTP. Servers run on their own event loop thread and are
started and stopped by the test that uses them; nothing is timed tightly.
"""

import asyncio
import threading

from aiohttp import web


class HostileServer:
    def __init__(self):
        self.bodies = {}
        self.seen = {}
        # Query parameters of requests without their own (an object store's GET has none).
        self.default_query = {}
        self.url = self.raw = None
        self._loop = None
        self._thread = None
        self._runner = None
        self._raw_server = None

    def start(self):
        started = threading.Event()

        async def serve():
            app = web.Application()
            app.router.add_get("/{tail:.*}", self._handle)
            self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0)
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            await site.start()
            self.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
            self._raw_server = await asyncio.start_server(self._garbage, "127.0.0.1", 0)
            self.raw = f"http://127.0.0.1:{self._raw_server.sockets[0].getsockname()[1]}"

        def run():
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(serve())
            started.set()
            self._loop.run_forever()
            self._raw_server.close()
            self._loop.run_until_complete(self._runner.cleanup())
            self._loop.close()

        self._thread = threading.Thread(target=run, name="test-hostile-server", daemon=True)
        self._thread.start()
        assert started.wait(30)
        return self

    def stop(self):
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)

    async def _garbage(self, reader, writer):
        await reader.read(1024)
        writer.write(b"HTTP/1.1 2OO \x00\x01 not a status line\r\n\r\n")
        await writer.drain()
        writer.close()

    async def _handle(self, request):
        # An object store asks for /BUCKET/KEY: the first segment names no route.
        path = request.path
        if path.startswith("/bucket/"):
            path = path.removeprefix("/bucket")
        self.seen[path] = dict(request.headers)
        if path == "/loop":
            raise web.HTTPFound(location=str(request.rel_url))
        if path == "/to":
            raise web.HTTPFound(location=request.query["url"])
        if path == "/to-ftp":
            raise web.HTTPFound(location="ftp://127.0.0.1/x")
        if path.startswith("/echo-headers/"):
            # A server repeating the request's headers in an error's body.
            text = "; ".join(f"{k}: {v}" for k, v in request.headers.items())
            return web.Response(status=int(path.removeprefix("/echo-headers/")),
                                text=f"{text} {request.url}", reason=text)
        if path.startswith("/status/"):
            return web.Response(status=int(path.removeprefix("/status/")), text="scripted")
        if path == "/reset":
            request.transport.close()
            return web.Response()
        if path == "/cut":
            response = web.StreamResponse(headers={"Content-Length": str(1 << 20)})
            await response.prepare(request)
            await response.write(self.bodies[request.query["head"]])
            request.transport.close()
            return response
        if path == "/slow":
            await asyncio.sleep(60)
            return web.Response(text="late")
        if path in ("/endless", "/drip"):
            query = {**self.default_query, **request.query}
            every = float(query.get("every", 0))
            response = web.StreamResponse()
            if "length" in query:  # a length said, and never reached
                response.headers["Content-Length"] = query["length"]
            else:
                response.enable_chunked_encoding()
            await response.prepare(request)
            if "head" in query:
                await response.write(self.bodies[query["head"]])
            chunk = b"\0" * (64 if every else 1 << 16)
            try:
                while True:
                    await response.write(chunk)
                    if every:
                        await asyncio.sleep(every)
            except ConnectionError:  # the client gave up: what the route is for
                return response
        if path.startswith("/chunked/"):
            response = web.StreamResponse()
            response.enable_chunked_encoding()
            await response.prepare(request)
            body = self.bodies[path.removeprefix("/chunked/")]
            try:
                for start in range(0, len(body), 4096):
                    await response.write(body[start:start + 4096])
                await response.write_eof()
            except ConnectionError:  # the client stopped reading: a bad shard, say
                pass
            return response
        if path.startswith("/body/"):
            body = self.bodies[path.removeprefix("/body/")]
            ranged = request.headers.get("Range", "")
            if ranged.startswith("bytes=") and ranged.endswith("-"):
                start = int(ranged[len("bytes="):-1])
                return web.Response(status=206, body=body[start:], headers={
                    "Content-Range": f"bytes {start}-{len(body) - 1}/{len(body)}"})
            return web.Response(body=body)
        return web.Response(text="echo")
