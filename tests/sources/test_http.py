"""HttpDataset against a real server on 127.0.0.1: retries, limits, errors, batches."""

import asyncio
import io
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
from PIL import Image

from dataloader import DataLoader
from dataloader.sources import HttpDataset, Retry

FAST = Retry(max_retries=3, initial_backoff=0.01, max_backoff=0.05)


def fetch(dataset, index):
    """One item outside a loader, closing the session after it."""

    async def run():
        try:
            return await dataset[index]
        finally:
            await dataset.aclose()

    return asyncio.run(run())


def png_bytes(seed):
    pixels = np.random.default_rng(seed).integers(0, 256, (6, 9, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue(), pixels


def test_items_are_the_bodies(http_server):
    dataset = HttpDataset([f"{http_server.url}/items/{n}" for n in range(3)])
    assert len(dataset) == 3
    assert fetch(dataset, 2) == b"item 2"
    assert fetch(dataset, -1) == b"item 2"


def test_index_out_of_range_is_an_index_error(http_server):
    with pytest.raises(IndexError):
        fetch(HttpDataset([f"{http_server.url}/items/0"]), 1)


def test_503_twice_then_200_takes_exactly_three_requests(http_server):
    http_server.script("/items/7", 503, 503)
    dataset = HttpDataset([f"{http_server.url}/items/7"], retry=FAST)
    assert fetch(dataset, 0) == b"item 7"
    assert http_server.requests["/items/7"] == 3


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
def test_retried_statuses_fail_after_the_retries_with_status_and_attempts(http_server, status):
    http_server.script("/items/1", *[status] * 10)
    dataset = HttpDataset([f"{http_server.url}/items/1"], retry=FAST)
    with pytest.raises(OSError, match=rf"HTTP {status}.*after 4 attempts") as raised:
        fetch(dataset, 0)
    assert type(raised.value) is OSError
    assert http_server.requests["/items/1"] == 4


def test_other_statuses_fail_at_once(http_server):
    http_server.script("/items/1", 403)
    with pytest.raises(OSError, match=r"HTTP 403.*after 1 attempt"):
        fetch(HttpDataset([f"{http_server.url}/items/1"], retry=FAST), 0)
    assert http_server.requests["/items/1"] == 1


def test_404_is_file_not_found_and_not_retried(http_server):
    with pytest.raises(FileNotFoundError, match="HTTP 404"):
        fetch(HttpDataset([f"{http_server.url}/missing.png"], retry=FAST), 0)
    assert http_server.requests["/missing.png"] == 1


def test_retry_after_is_honoured_up_to_max_backoff(http_server):
    # The server asks for an hour; max_backoff caps the wait at 50 ms.
    http_server.script("/items/2", ("status", 503, {"Retry-After": "3600"}))
    started = time.monotonic()
    assert fetch(HttpDataset([f"{http_server.url}/items/2"], retry=FAST), 0) == b"item 2"
    assert time.monotonic() - started < 30
    assert http_server.requests["/items/2"] == 2


def test_retry_after_sets_the_wait_before_the_retry(http_server):
    # Without the header the wait would be 0 (initial_backoff=0): only the
    # server's Retry-After can make the retry wait. A lower bound on elapsed
    # time does not flake on a busy machine.
    http_server.script("/items/4", ("status", 503, {"Retry-After": "1"}))
    dataset = HttpDataset([f"{http_server.url}/items/4"],
                          retry=Retry(max_retries=1, initial_backoff=0.0, max_backoff=10.0))
    started = time.monotonic()
    assert fetch(dataset, 0) == b"item 4"
    assert time.monotonic() - started >= 0.95
    assert http_server.requests["/items/4"] == 2


def test_slow_item_times_out_as_timeout_error(http_server):
    http_server.script("/items/3", ("delay", 30), ("delay", 30))
    dataset = HttpDataset([f"{http_server.url}/items/3"], timeout=0.2,
                          retry=Retry(max_retries=1, initial_backoff=0.01))
    with pytest.raises(TimeoutError, match=r"timed out after 0\.2 s after 2 attempts"):
        fetch(dataset, 0)
    assert http_server.requests["/items/3"] == 2


def test_content_length_over_max_bytes_is_a_value_error(http_server):
    http_server.bodies["/big"] = b"x" * 100_000
    with pytest.raises(ValueError, match="Content-Length 100000 exceeds max_bytes=1000"):
        fetch(HttpDataset([f"{http_server.url}/big"], max_bytes=1000, retry=FAST), 0)
    assert http_server.requests["/big"] == 1
    assert fetch(HttpDataset([f"{http_server.url}/big"], max_bytes=100_000), 0) == b"x" * 100_000


def test_streamed_body_over_max_bytes_stops_with_a_value_error(http_server):
    http_server.bodies["/stream"] = b"y" * 5_000_000
    http_server.script("/stream", "chunked")
    with pytest.raises(ValueError, match="body exceeds max_bytes=1000"):
        fetch(HttpDataset([f"{http_server.url}/stream"], max_bytes=1000), 0)
    http_server.script("/stream", "chunked")
    dataset = HttpDataset([f"{http_server.url}/stream"], max_bytes=5_000_000)
    assert fetch(dataset, 0) == b"y" * 5_000_000


def test_body_cut_short_is_retried_then_an_os_error(http_server):
    http_server.bodies["/cut"] = b"z" * 10_000
    http_server.script("/cut", "truncate")
    assert fetch(HttpDataset([f"{http_server.url}/cut"], retry=FAST), 0) == b"z" * 10_000
    assert http_server.requests["/cut"] == 2
    http_server.script("/cut", *["truncate"] * 5)
    with pytest.raises(OSError, match=r"cut short.*after 2 attempts"):
        fetch(HttpDataset([f"{http_server.url}/cut"],
                          retry=Retry(max_retries=1, initial_backoff=0.01)), 0)


def test_connection_refused_is_an_os_error_after_the_retries():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    with pytest.raises(OSError, match=r"connection failed.*after 2 attempts"):
        fetch(HttpDataset([f"http://127.0.0.1:{port}/x"],
                          retry=Retry(max_retries=1, initial_backoff=0.01)), 0)


def test_messages_show_neither_credentials_nor_query(http_server):
    host = http_server.url.removeprefix("http://")
    url = f"http://alice:s3cret@{host}/missing?token=abc123&sig=xyz"
    messages = []
    for urls, headers in [([url], None), ([url.replace("alice:s3cret@", "")],
                                          {"Authorization": "Bearer hunter2"})]:
        with pytest.raises(FileNotFoundError) as raised:
            fetch(HttpDataset(urls, headers=headers), 0)
        messages.append(str(raised.value))
    for message in messages:
        assert f"{host}/missing" in message
        for secret in ("s3cret", "alice", "token", "abc123", "hunter2"):
            assert secret not in message


def test_headers_are_sent(http_server):
    dataset = HttpDataset([f"{http_server.url}/items/0"], headers={"X-Api-Key": "k1"})
    fetch(dataset, 0)
    assert http_server.headers["/items/0"]["X-Api-Key"] == "k1"


def test_from_template_fills_columns_index_and_braces():
    dataset = HttpDataset.from_template(
        "http://h/{{raw}}/{z}/{x:03d}/{name}?i={index}", z=[1, 2], x=[5, 6], name=["a b", "c/d"]
    )
    assert list(dataset.urls) == [
        "http://h/{raw}/1/005/a%20b?i=0",
        "http://h/{raw}/2/006/c%2Fd?i=1",
    ]
    assert len(dataset) == 2


@pytest.mark.parametrize(
    ("template", "columns", "match"),
    [
        ("http://h/{x}/{y}", {"x": [1]}, "without a column: y"),
        ("http://h/{x}", {"x": [1], "y": [2]}, "not used by the template: y"),
        ("http://h/{x}/{y}", {"x": [1], "y": [2, 3]}, "equal lengths"),
        ("http://h/{index}", {}, "at least one column"),
        ("http://h/{x.real}", {"x": [1]}, "plain name"),
    ],
)
def test_from_template_rejects_mismatched_columns(template, columns, match):
    with pytest.raises(ValueError, match=match):
        HttpDataset.from_template(template, **columns)


def test_from_template_fetches_from_the_server(http_server):
    dataset = HttpDataset.from_template(http_server.url + "/items/{n}", n=[4, 8, 15])
    with DataLoader(dataset, batch_size=3, num_workers=2, item_concurrency=3,
                    collate_fn=list) as loader:
        assert list(loader) == [[b"item 4", b"item 8", b"item 15"]]


def test_png_bodies_decoded_by_a_transform_make_a_batch(http_server, make_loader):
    expected = []
    for n in range(10):
        data, pixels = png_bytes(n)
        http_server.bodies[f"/tiles/{n}.png"] = data
        expected.append(pixels)
    http_server.script("/tiles/4.png", 503)  # a transient failure inside an epoch

    def decode(index, body):
        return np.asarray(Image.open(io.BytesIO(body)).convert("RGB"))

    dataset = HttpDataset.from_template(http_server.url + "/tiles/{n}.png", n=range(10),
                                        retry=FAST)
    with make_loader(dataset, batch_size=4, transform=decode) as loader:
        batches = list(loader)
    assert [batch.shape for batch in batches] == [(4, 6, 9, 3), (4, 6, 9, 3), (2, 6, 9, 3)]
    np.testing.assert_array_equal(np.concatenate(batches), np.stack(expected))


def test_errors_keep_their_type_in_a_loader_and_the_epoch_continues(http_server, make_loader):
    urls = [f"{http_server.url}/items/{n}" for n in range(4)] + [f"{http_server.url}/gone"]
    urls += [f"{http_server.url}/items/{n}" for n in range(5, 7)]
    with make_loader(HttpDataset(urls), batch_size=2, collate_fn=list) as loader:
        it = iter(loader)
        assert next(it) == [b"item 0", b"item 1"]
        assert next(it) == [b"item 2", b"item 3"]
        with pytest.raises(FileNotFoundError, match="/gone"):
            next(it)
        assert next(it) == [b"item 6"]


def test_one_session_per_loader_closed_with_it(http_server):
    dataset = HttpDataset([f"{http_server.url}/items/{n}" for n in range(8)])
    first = DataLoader(dataset, batch_size=4, num_workers=2, collate_fn=list)
    second = DataLoader(dataset, batch_size=4, num_workers=1, item_concurrency=2,
                        collate_fn=list)
    for _ in range(2):
        assert list(first) == list(second)
    assert len(dataset._sessions) == 2
    first.close()
    assert len(dataset._sessions) == 1
    second.close()
    assert len(dataset._sessions) == 0


def test_invalid_arguments_are_rejected():
    with pytest.raises(ValueError, match="timeout"):
        HttpDataset([], timeout=0)
    with pytest.raises(TypeError, match="Retry"):
        HttpDataset([], retry=3)
    with pytest.raises(ValueError, match="max_retries"):
        Retry(max_retries=-1)


def test_retry_backoff_grows_with_jitter_and_honours_retry_after():
    retry = Retry(max_retries=5, initial_backoff=0.1, max_backoff=1.0)
    assert [retry.ceiling(n) for n in range(1, 6)] == [0.1, 0.2, 0.4, 0.8, 1.0]
    waits = [retry.backoff(3) for _ in range(200)]
    assert all(0.0 <= wait <= 0.4 for wait in waits) and len(set(waits)) > 1
    assert retry.backoff(1, "0.5") == 0.5
    assert retry.backoff(1, "30") == 1.0
    assert retry.backoff(1, "Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past
    assert 0.0 <= retry.backoff(1, "soon") <= 0.1  # unparsable: the usual backoff


def test_without_aiohttp_using_the_class_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "aiohttp", None)
    with pytest.raises(ImportError, match=r'pip install "dataloader\[http\]"'):
        HttpDataset(["http://127.0.0.1/x"])


def test_importing_the_package_needs_no_extra():
    code = (
        "import sys\n"
        "sys.modules['aiohttp'] = None\n"
        "sys.modules['obstore'] = None\n"
        "import dataloader, dataloader.sources\n"
        "from dataloader import HttpDataset, ObjectStoreDataset, FileDataset\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.stdout.strip() == "ok", result.stderr


# -- the waits between consecutive failures of one request --------------------


@pytest.fixture
def waits(monkeypatch):
    """The waits the client asks of ``asyncio.sleep`` (none is slept): the server's
    thread is left alone."""
    import random
    import threading

    real_sleep = asyncio.sleep
    asked = []

    async def sleep(delay, *args, **kwargs):
        if threading.current_thread().name != "test-http-server" and delay:
            asked.append(delay)
        return await real_sleep(0, *args, **kwargs)

    monkeypatch.setattr(asyncio, "sleep", sleep)
    random.seed(5)  # the jitter: the same draws every run
    return asked


def waits_of_each_item(http_server, waits, retry, scripts):
    """Fetch one item per script (its answers before the plain one); the waits before
    each item's retries, one list per item."""
    found = []
    for n, steps in enumerate(scripts):
        http_server.script(f"/items/{n}", *steps)
        first = len(waits)
        assert fetch(HttpDataset([f"{http_server.url}/items/{n}"], retry=retry), 0) == (
            f"item {n}".encode())
        assert http_server.requests[f"/items/{n}"] == len(steps) + 1
        found.append(waits[first:])
    return found


def test_waits_between_consecutive_failures_double_up_to_max_backoff(http_server, waits):
    retry = Retry(max_retries=6, initial_backoff=0.01, max_backoff=0.08)
    ceilings = [0.01, 0.02, 0.04, 0.08, 0.08, 0.08]
    found = waits_of_each_item(http_server, waits, retry, [[503, 500, 429, 503, 502, 504]] * 30)
    for item in found:
        assert len(item) == 6
        assert all(0.0 < wait <= ceiling for wait, ceiling in zip(item, ceilings, strict=True))
    # Each wait is drawn from its retry's whole window: some request's n-th wait
    # is above half its ceiling (the previous retry's, while the ceiling doubles).
    for n, ceiling in enumerate(ceilings):
        assert max(item[n] for item in found) > 0.5 * ceiling, n


def test_each_request_counts_its_own_failures(http_server, waits):
    # A success ends a request's count: the next request's first retry waits
    # within the first ceiling again, however many retries came before.
    retry = Retry(max_retries=3, initial_backoff=0.01, max_backoff=10.0)
    found = waits_of_each_item(http_server, waits, retry, [[503, 503, 503], [503], [503, 503]] * 8)
    assert [len(item) for item in found] == [3, 1, 2] * 8
    assert all(item[0] <= 0.01 for item in found)
    assert max(item[2] for item in found if len(item) == 3) > 0.02


def test_a_retry_after_answer_sets_one_wait_and_the_next_ones_go_on_growing(http_server, waits):
    retry = Retry(max_retries=4, initial_backoff=0.01, max_backoff=1.0)
    asks = ("status", 503, {"Retry-After": "0.5"})
    found = waits_of_each_item(http_server, waits, retry, [[503, asks, 503, 503]] * 20)
    assert all(item[1] == 0.5 for item in found)
    assert all(item[0] <= 0.01 and item[2] <= 0.04 and item[3] <= 0.08 for item in found)
    assert max(item[3] for item in found) > 0.04  # the fourth retry's window, not a reset
