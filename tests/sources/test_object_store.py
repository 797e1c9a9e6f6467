"""ObjectStoreDataset against an S3-compatible server (moto) and a local directory."""

import asyncio
import io
import socket
import sys

import numpy as np
import pytest
from PIL import Image

from dataloader.sources import ObjectStoreDataset

# The test extra installs all three; the free-threaded test run has no build
# of moto's cryptography dependency, nor of obstore, for its interpreter.
_REASON = "not installable on this interpreter (no free-threaded build)"
boto3 = pytest.importorskip("boto3", reason=_REASON)
pytest.importorskip("obstore", reason=_REASON)
ThreadedMotoServer = pytest.importorskip("moto.server", reason=_REASON).ThreadedMotoServer

CREDENTIALS = {"access_key_id": "testing", "secret_access_key": "dl-test-secret"}
N_IMAGES = 10


def png_bytes(seed):
    pixels = np.random.default_rng(seed).integers(0, 256, (8, 5, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue(), pixels


IMAGES = [png_bytes(n) for n in range(N_IMAGES)]
# What every backend holds: images under a prefix, and objects to leave out.
OBJECTS = {f"images/{n:02d}.png": data for n, (data, _) in enumerate(IMAGES)}
OBJECTS |= {"images/notes.txt": b"not an image", "other/99.png": IMAGES[0][0]}


@pytest.fixture(scope="module")
def s3_endpoint():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    client = boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1",
        aws_access_key_id=CREDENTIALS["access_key_id"],
        aws_secret_access_key=CREDENTIALS["secret_access_key"],
    )
    client.create_bucket(Bucket="training")
    for key, data in OBJECTS.items():
        client.put_object(Bucket="training", Key=key, Body=data)
    yield endpoint
    server.stop()


@pytest.fixture(params=["s3", "local"])
def source(request, tmp_path):
    """``(url of the images prefix, store options)`` for each backend."""
    if request.param == "s3":
        endpoint = request.getfixturevalue("s3_endpoint")
        options = {"endpoint": endpoint, "region": "us-east-1",
                   "client_options": {"allow_http": True}, **CREDENTIALS}
        return "s3://training/images", options
    for key, data in OBJECTS.items():
        path = tmp_path / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return (tmp_path / "images").as_uri(), {}


def fetch(dataset, index):
    return asyncio.run(dataset[index])


def decode(index, data):
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def test_from_url_lists_the_prefix_filtered_and_sorted(source):
    url, options = source
    dataset = ObjectStoreDataset.from_url(url, suffixes=(".png",), **options)
    assert dataset.keys == [f"{n:02d}.png" for n in range(N_IMAGES)]
    everything = ObjectStoreDataset.from_url(url, **options)
    assert "notes.txt" in everything.keys and len(everything) == N_IMAGES + 1


def test_items_are_the_objects_bytes(source):
    url, options = source
    dataset = ObjectStoreDataset.from_url(url, suffixes=(".png",), **options)
    assert fetch(dataset, 3) == IMAGES[3][0]
    assert fetch(dataset, -1) == IMAGES[-1][0]
    with pytest.raises(IndexError):
        fetch(dataset, N_IMAGES)


def test_png_objects_decoded_by_a_transform_make_a_batch(source, make_loader):
    url, options = source
    dataset = ObjectStoreDataset.from_url(url, suffixes=(".png",), **options)
    with make_loader(dataset, batch_size=4, transform=decode) as loader:
        batches = list(loader)
    assert [batch.shape for batch in batches] == [(4, 8, 5, 3), (4, 8, 5, 3), (2, 8, 5, 3)]
    np.testing.assert_array_equal(np.concatenate(batches), np.stack([p for _, p in IMAGES]))


def test_missing_key_is_file_not_found_and_the_epoch_continues(source, make_loader):
    url, options = source
    listed = ObjectStoreDataset.from_url(url, suffixes=(".png",), **options)
    dataset = ObjectStoreDataset(listed.store, ["00.png", "01.png", "gone.png", "03.png"])
    with make_loader(dataset, batch_size=2, collate_fn=list) as loader:
        it = iter(loader)
        assert next(it) == [IMAGES[0][0], IMAGES[1][0]]
        with pytest.raises(FileNotFoundError, match=r"gone\.png") as raised:
            next(it)
        with pytest.raises(StopIteration):
            next(it)
    assert CREDENTIALS["secret_access_key"] not in str(raised.value)


def test_object_over_max_bytes_is_a_value_error(source):
    url, options = source
    small = len(IMAGES[2][0]) - 1
    dataset = ObjectStoreDataset.from_url(url, suffixes=(".png",), max_bytes=small, **options)
    with pytest.raises(ValueError, match=f"max_bytes={small}"):
        fetch(dataset, 2)
    exact = ObjectStoreDataset(dataset.store, dataset.keys, max_bytes=len(IMAGES[2][0]))
    assert fetch(exact, 2) == IMAGES[2][0]


def test_memory_store():
    import obstore
    from obstore.store import MemoryStore

    store = MemoryStore()
    for key, data in OBJECTS.items():
        obstore.put(store, key, data)
    dataset = ObjectStoreDataset(store, [f"images/{n:02d}.png" for n in range(3)])
    assert fetch(dataset, 1) == IMAGES[1][0]


def test_listing_a_missing_bucket_is_an_os_error_without_the_secret(s3_endpoint):
    with pytest.raises(OSError) as raised:
        ObjectStoreDataset.from_url("s3://no-such-bucket/x", endpoint=s3_endpoint,
                                    region="us-east-1", client_options={"allow_http": True},
                                    **CREDENTIALS)
    assert "no-such-bucket" in str(raised.value)
    assert CREDENTIALS["secret_access_key"] not in str(raised.value)


def test_without_obstore_using_the_class_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "obstore", None)
    with pytest.raises(ImportError, match=r'pip install "dataloader\[s3\]"'):
        ObjectStoreDataset(None, [])
    with pytest.raises(ImportError, match=r'pip install "dataloader\[s3\]"'):
        ObjectStoreDataset.from_url("memory:///")
