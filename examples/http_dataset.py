"""Images over HTTP: ``HttpDataset`` and a custom ``AsyncDataset``, against a local server.

A tile server with 20 ms of latency per request stands in for a remote
store. The loader keeps ``num_workers * item_concurrency`` requests in
flight on its own event loop, so an epoch takes about ``items / in_flight``
round trips instead of one per item; native transforms then decode the
bytes on the worker threads. Needs ``pip install "dataloader[http]"``.
"""

import http.server
import threading
import time

import aiohttp
from sample_data import image_folder

from dataloader import AsyncDataset, DataLoader, ImageCollator
from dataloader.sources import HttpDataset
from dataloader.transforms import Compose, Decode, Resize, ToChw, ToFloat

LATENCY_SECONDS = 0.02


def serve(tiles: dict[str, bytes]) -> http.server.ThreadingHTTPServer:
    """Serve ``tiles`` (path -> body) on a free port of 127.0.0.1, slowly."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            time.sleep(LATENCY_SECONDS)
            body = tiles.get(self.path)
            self.send_response(200 if body else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class Tiles(AsyncDataset):
    """The same tiles through a hand-written aiohttp client, created on the loader's loop."""

    def __init__(self, base: str, n: int) -> None:
        self.base, self.n, self.session = base, n, None

    def __len__(self) -> int:
        return self.n

    async def __getitem__(self, index: int) -> tuple[bytes, int]:
        if self.session is None:
            self.session = aiohttp.ClientSession()
        async with self.session.get(f"{self.base}/tiles/{index}.jpg") as response:
            response.raise_for_status()
            return await response.read(), index % 3

    async def aclose(self) -> None:
        if self.session is not None:
            await self.session.close()


def main() -> None:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        paths = sorted(Path(image_folder(tmp, per_class=16)).rglob("*.jpg"))
        tiles = {f"/tiles/{n}.jpg": path.read_bytes() for n, path in enumerate(paths)}
    server = serve(tiles)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    chain = Compose([Decode("RGB"), Resize((64, 64)), ToFloat(), ToChw()])

    dataset = HttpDataset.from_template(base + "/tiles/{n}.jpg", n=range(len(tiles)))
    with DataLoader(dataset, batch_size=8, num_workers=2, item_concurrency=8, transform=chain,
                    collate_fn=ImageCollator()) as loader:
        for _epoch in range(2):  # the first epoch also starts the loop and the client
            started = time.perf_counter()
            shapes = [batch.shape for batch in loader]
            elapsed = time.perf_counter() - started
    print(f"HttpDataset: {len(shapes)} batches of {shapes[0]}")
    serial = len(tiles) * LATENCY_SECONDS
    print(f"epoch in {elapsed:.2f} s; one request at a time would take {serial:.2f} s")

    with DataLoader(Tiles(base, len(tiles)), batch_size=8, num_workers=2, item_concurrency=8,
                    transform=chain, collate_fn=ImageCollator()) as loader:
        for epoch in range(2):  # the aiohttp session lives on across epochs
            labels = [labels.tolist() for _, labels in loader]
            print(f"AsyncDataset epoch {epoch}: {len(labels)} batches, labels {labels[0]}")
    server.shutdown()


if __name__ == "__main__":
    main()
