"""Shared fixtures: the execution modes every epoch-semantics test runs in,
and natural-looking test images with their encodings."""

import io
import os
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from PIL import Image as PILImage

from dataloader import DataLoader
from dataloader._images.samples import synthetic_image

# Property tests (test_kernel_properties.py, test_crash_hunt.py): a modest
# number of examples per test under `make test`, many more under `make soak`.
settings.register_profile(
    "default", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "soak", max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

# (num_workers, item_concurrency): the direct path first; every other mode
# must give the same batches in the same order.
MODES = [
    pytest.param((0, 1), id="direct"),
    pytest.param((0, 4), id="lanes"),
    pytest.param((2, 1), id="workers"),
    pytest.param((2, 4), id="workers+lanes"),
]
# DATALOADER_TEST_MODES=direct,workers runs those modes only (the mutation
# runs, tools/mutation/python.py, which repeat the tests for every mutant).
if os.environ.get("DATALOADER_TEST_MODES"):
    MODES = [m for m in MODES if m.id in os.environ["DATALOADER_TEST_MODES"].split(",")]


@pytest.fixture(params=MODES)
def mode(request):
    return request.param


@pytest.fixture
def make_loader(mode):
    """Build a DataLoader in the current execution mode."""
    num_workers, item_concurrency = mode

    def make(dataset, **kwargs):
        kwargs.setdefault("num_workers", num_workers)
        kwargs.setdefault("item_concurrency", item_concurrency)
        # The modes are the thread engine's (worker processes: test_processes.py).
        kwargs.setdefault("worker_type", "thread")
        return DataLoader(dataset, **kwargs)

    return make


def loader_thread_count():
    """The loaders' threads: pool threads (OS threads named ``dataloader-N``) and
    Python threads named ``dataloader-...`` (an event loop's).

    Other libraries' runtimes (an object store client's, say) start and
    retire threads of their own at any time; they are not counted.
    """
    count = sum(t.name.startswith("dataloader-") for t in threading.enumerate())
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/stat") as stat:
                fields = stat.read()
        except FileNotFoundError:
            continue  # exited meanwhile
        name, _, rest = fields.partition(" (")[2].rpartition(") ")
        # A joined thread can still be listed for a moment: pthread_join
        # returns once the kernel clears the thread's id in do_exit, before
        # the task is released. Such a task is flagged PF_EXITING.
        exiting = int(rest.split()[6]) & _PF_EXITING
        count += name.startswith("dataloader-") and not exiting
    return count


_PF_EXITING = 0x4  # linux/sched.h


DATA = Path(__file__).parent / "data"


# Smooth gradients plus noise: resampling and codecs behave as on photos.
natural_image = synthetic_image


def encode(array_or_image, fmt, **options):
    """Encode with Pillow; a 2-D or 1-channel array becomes mode L."""
    if isinstance(array_or_image, np.ndarray):
        array = array_or_image
        if array.ndim == 3 and array.shape[2] == 1:
            array = array[:, :, 0]
        image = PILImage.fromarray(array)
    else:
        image = array_or_image
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def pillow_pixels(data, mode=None):
    """What Pillow decodes, as an (H, W, C) uint8 array."""
    with PILImage.open(io.BytesIO(data)) as image:
        if mode is not None:
            image = image.convert(mode)
        array = np.asarray(image)
    return array[:, :, None] if array.ndim == 2 else array


def assert_same_batches_on_workers(items, chain, *, batch_size, seed):
    """``chain`` over a loader of ``items`` gives the same image batches on the
    direct path and on 2 worker threads."""
    epochs = []
    for workers in (0, 2):
        loader = DataLoader(items, batch_size=batch_size, num_workers=workers, transform=chain,
                            seed=seed)
        epochs.append([np.asarray(batch[0]) for batch in loader])
        loader.close()
    for a, b in zip(*epochs, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.fixture(scope="session")
def media(tmp_path_factory):
    """The test videos and audio files (tests/media_files.py): {name: path}."""
    from media_files import make_media

    return make_media(tmp_path_factory.mktemp("media"))


@pytest.fixture(scope="session")
def photos():
    """Real photographs shipped with scikit-image: {name: encoded bytes}."""
    data = pytest.importorskip(
        "skimage.data", reason="scikit-image ships the photographs (no wheel on every build)")

    root = Path(data.data_dir)
    names = ["rocket.jpg", "retina.jpg", "hubble_deep_field.jpg", "astronaut.png",
             "coffee.png", "chelsea.png"]
    return {name: (root / name).read_bytes() for name in names}


class HttpServer:
    """An HTTP server on 127.0.0.1 (aiohttp.web on a thread of its own).

    ``GET /items/<n>`` answers ``item <n>``; ``bodies`` maps other paths to
    their bytes; anything else is a 404. ``latency`` delays every answer.
    ``script(path, *steps)`` queues what the next requests of ``path`` get
    instead of the plain answer: a status (``503``), ``("status", 503,
    {headers})``, ``("delay", seconds)``, ``"truncate"`` (a body cut short)
    or ``"chunked"`` (no ``Content-Length``). A ``Range: bytes=<start>-``
request of a ``bodies`` path gets 206 and the body from ``start``, a ``Range:
    bytes=<start>-<last>`` one 206 and those bytes with their ``Content-Range``
    (each kept in ``ranges`` as ``(path, start, size)``; ``ignore_ranges``
    answers 200 and the whole body instead). ``requests`` counts requests
    per path, ``headers`` keeps the last request headers of each path;
    ``peak`` is the most requests ever in flight at once. With ``gate = n``
    every answer waits until ``n`` requests are in flight at once (then
    ``gate_opened`` is true), or 30 s.
    """

    def __init__(self):
        import collections

        self.latency = 0.0
        self.bodies = {}
        self.ranges = []
        self.ignore_ranges = False
        self.scripts = collections.defaultdict(collections.deque)
        self.requests = collections.Counter()
        self.headers = {}
        self.in_flight = 0
        self.peak = 0
        self.gate = None
        self.gate_opened = False
        self._gate_event = None
        self.url = None
        self._loop = None
        self._thread = None
        self._runner = None

    def script(self, path, *steps):
        self.scripts[path].extend(steps)

    def start(self):
        import asyncio

        from aiohttp import web

        started = threading.Event()

        async def serve():
            app = web.Application()
            app.router.add_get("/{tail:.*}", self._handle)
            self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0)
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            await site.start()
            port = site._server.sockets[0].getsockname()[1]
            self.url = f"http://127.0.0.1:{port}"

        def run():
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(serve())
            started.set()
            self._loop.run_forever()
            self._loop.run_until_complete(self._runner.cleanup())
            self._loop.close()

        self._thread = threading.Thread(target=run, name="test-http-server", daemon=True)
        self._thread.start()
        assert started.wait(10)
        return self

    def stop(self):
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _pass_gate(self):
        import asyncio

        if self._gate_event is None:
            self._gate_event = asyncio.Event()
        if self.in_flight >= self.gate:
            self.gate_opened = True
            self._gate_event.set()
        try:
            await asyncio.wait_for(self._gate_event.wait(), 30)
        except TimeoutError:
            pass

    async def _handle(self, request):
        import asyncio

        from aiohttp import web

        path = request.path
        self.requests[path] += 1
        self.headers[path] = dict(request.headers)
        self.in_flight += 1  # only the server's loop thread touches these
        self.peak = max(self.peak, self.in_flight)
        try:
            if self.gate is not None:
                await self._pass_gate()
            step = self.scripts[path].popleft() if self.scripts[path] else None
            if self.latency:
                await asyncio.sleep(self.latency)
            if isinstance(step, tuple) and step[0] == "delay":
                await asyncio.sleep(step[1])
            if isinstance(step, int):
                return web.Response(status=step, text=f"scripted {step}")
            if isinstance(step, tuple) and step[0] == "status":
                return web.Response(status=step[1], headers=step[2], text="scripted")
            if path.startswith("/items/"):
                body = f"item {path.removeprefix('/items/')}".encode()
            elif path in self.bodies:
                body = self.bodies[path]
                ranged = request.headers.get("Range", "")
                if ranged.startswith("bytes=") and ranged.endswith("-"):
                    start = int(ranged[len("bytes="):-1])
                    return web.Response(status=206, body=body[start:])
                if ranged.startswith("bytes=") and not self.ignore_ranges:
                    start, last = map(int, ranged[len("bytes="):].split("-"))
                    last = min(last, len(body) - 1)
                    self.ranges.append((path, start, last - start + 1))
                    return web.Response(status=206, body=body[start:last + 1], headers={
                        "Content-Range": f"bytes {start}-{last}/{len(body)}"})
            else:
                return web.Response(status=404, text="not found")
            if step == "truncate":
                response = web.StreamResponse(headers={"Content-Length": str(len(body))})
                await response.prepare(request)
                await response.write(body[: len(body) // 2])
                request.transport.close()
                return response
            if step == "chunked":
                response = web.StreamResponse()
                response.enable_chunked_encoding()
                await response.prepare(request)
                for start in range(0, len(body), 1024):
                    await response.write(body[start : start + 1024])
                await response.write_eof()
                return response
            return web.Response(body=body)
        finally:
            self.in_flight -= 1


@pytest.fixture
def http_server():
    """A fresh :class:`HttpServer` for one test."""
    server = HttpServer().start()
    yield server
    server.stop()
