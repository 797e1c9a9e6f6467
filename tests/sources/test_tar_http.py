"""Tar shards over HTTP: streamed by the aiohttp client, resumed after a cut, bounded memory."""

import io
import subprocess
import sys
import tarfile
import threading
import tracemalloc

import pytest

from dataloader.sources import Retry, TarDataset

pytest.importorskip("aiohttp")

SERVE = """
import functools, http.server, sys
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
handler.log_message = lambda *args: None
server = http.server.HTTPServer(("127.0.0.1", 0), handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""
FAST = Retry(max_retries=2, initial_backoff=0.01, max_backoff=0.05)


def shard(samples=20, size=3000):
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for n in range(samples):
            for extension, data in (("bin", bytes([n % 251]) * size), ("cls", b"%d" % n)):
                info = tarfile.TarInfo(f"{n:06d}.{extension}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def summary(samples):
    return [(s["__key__"], s["bin"][:1], len(s["bin"]), s["cls"]) for s in samples]


def test_a_body_cut_short_is_requested_again_from_where_it_stopped(http_server, tmp_path):
    body = shard(samples=400, size=10_000)  # 4 MB: the cut comes after some chunks were read
    http_server.bodies["/a.tar"] = body
    http_server.script("/a.tar", "truncate")
    local = tmp_path / "a.tar"
    local.write_bytes(body)
    got = summary(TarDataset(f"{http_server.url}/a.tar", retry=FAST))
    assert got == summary(TarDataset(str(local)))
    assert http_server.requests["/a.tar"] == 2
    # The second request asked for the rest only (aiohttp drops the bytes it
    # buffered when the connection broke, so the rest starts at most at the cut).
    start = int(http_server.headers["/a.tar"]["Range"].removeprefix("bytes=").rstrip("-"))
    assert 0 < start <= len(body) // 2


def test_a_chunked_body_without_length_streams(http_server, tmp_path):
    body = shard(samples=7)
    http_server.bodies["/c.tar"] = body
    http_server.script("/c.tar", "chunked")
    local = tmp_path / "c.tar"
    local.write_bytes(body)
    assert summary(TarDataset(f"{http_server.url}/c.tar")) == summary(TarDataset(str(local)))


def test_timeouts_are_retried_then_raised(http_server):
    http_server.bodies["/t.tar"] = shard(samples=2)
    http_server.script("/t.tar", ("delay", 1.0), ("delay", 1.0))
    no_retry = Retry(max_retries=1, initial_backoff=0.01, max_backoff=0.01)
    with pytest.raises(TimeoutError, match=r"timed out after 0.2 s after 2 attempts"):
        list(TarDataset(f"{http_server.url}/t.tar", timeout=0.2, retry=no_retry))
    dataset = TarDataset(f"{http_server.url}/t.tar", timeout=0.2, retry=no_retry,
                         on_error="skip")
    http_server.script("/t.tar", ("delay", 1.0), ("delay", 1.0))
    assert list(dataset) == [] and dataset.stats()["skipped_shards"] == 1


def test_memory_is_bounded_by_the_stream_not_the_shard(tmp_path):
    # The server is another process, so that only the client's memory is traced.
    body = shard(samples=400, size=100_000)  # 40 MB
    (tmp_path / "big.tar").write_bytes(body)
    server = subprocess.Popen(
        [sys.executable, "-c", SERVE, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        tracemalloc.start()
        count = 0
        for sample in TarDataset(f"http://127.0.0.1:{port}/big.tar"):
            count += len(sample["bin"]) == 100_000
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        server.kill()
        server.wait()
    assert count == 400
    assert peak < 8 * 2**20, peak  # a few chunks and samples, not the 40 MB shard


def test_reads_stay_on_the_calling_thread_and_close_their_loop(http_server):
    from dataloader.sources._http import HttpBody
    from dataloader.sources._shards import ShardOptions

    http_server.bodies["/b.tar"] = shard(samples=3)
    before = threading.active_count()
    stream = HttpBody(ShardOptions(None, 5.0, FAST, None).http_client(),
                      f"{http_server.url}/b.tar", 512)
    assert stream.read(3) == http_server.bodies["/b.tar"][512:515]
    assert threading.active_count() == before
    stream.close()
    assert stream._loop.is_closed()
    stream.close()  # twice is harmless
