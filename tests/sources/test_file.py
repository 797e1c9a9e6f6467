"""FileDataset and the native reader behind it (dataloader/_core/io.pyx)."""

import io
import os

import numpy as np
import pytest
from PIL import Image

from dataloader._core.io import read_file
from dataloader.sources import FileDataset


def png_bytes(seed, size=(7, 5)):
    pixels = np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue(), pixels


def decode_png(index, data):
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 65537, 3 * 2**20 + 7])
def test_read_file_returns_the_exact_bytes(tmp_path, size):
    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    path = tmp_path / "blob"
    path.write_bytes(data)
    assert read_file(path) == data
    assert read_file(str(path), size) == data
    assert read_file(os.fsencode(path)) == data


def test_missing_file_is_file_not_found_naming_the_path(tmp_path):
    missing = tmp_path / "nope.png"
    with pytest.raises(FileNotFoundError, match=r"nope\.png") as raised:
        FileDataset([missing])[0]
    assert raised.value.filename == str(missing)


def test_directory_and_pipe_are_os_errors(tmp_path):
    with pytest.raises(IsADirectoryError):
        read_file(tmp_path)
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(NotADirectoryError):
        read_file(tmp_path / "file" / "child")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="fifo"):  # without waiting for a writer
        read_file(fifo)


def test_over_max_bytes_is_a_value_error_before_reading(tmp_path):
    # A sparse file of 64 GiB: reading it would take the machine's memory.
    path = tmp_path / "huge"
    with open(path, "wb") as f:
        f.truncate(64 * 2**30)
    with pytest.raises(ValueError, match="max_bytes=1000"):
        FileDataset([path], max_bytes=1000)[0]
    path.write_bytes(b"x" * 1000)
    assert FileDataset([path], max_bytes=1000)[0] == b"x" * 1000


def test_index_out_of_range_is_an_index_error(tmp_path):
    path = tmp_path / "a"
    path.write_bytes(b"a")
    dataset = FileDataset([path])
    assert dataset[-1] == b"a"
    with pytest.raises(IndexError):
        dataset[1]
    with pytest.raises(IndexError):
        dataset[-2]


def test_invalid_max_bytes_is_rejected():
    with pytest.raises(ValueError, match="max_bytes"):
        FileDataset([], max_bytes=-1)


def test_png_files_decoded_by_a_transform_make_a_batch(tmp_path, make_loader):
    paths, expected = [], []
    for n in range(10):
        data, pixels = png_bytes(n)
        path = tmp_path / f"{n}.png"
        path.write_bytes(data)
        paths.append(path)
        expected.append(pixels)
    loader = make_loader(FileDataset(paths), batch_size=4, transform=decode_png)
    batches = list(loader)
    assert [batch.shape for batch in batches] == [(4, 5, 7, 3), (4, 5, 7, 3), (2, 5, 7, 3)]
    np.testing.assert_array_equal(np.concatenate(batches), np.stack(expected))
    loader.close()


def test_errors_keep_their_type_in_a_loader(tmp_path, make_loader):
    paths = []
    for n in range(6):
        path = tmp_path / f"{n}.bin"
        if n != 3:
            path.write_bytes(bytes([n]))
        paths.append(path)
    loader = make_loader(FileDataset(paths), batch_size=2, collate_fn=list)
    it = iter(loader)
    assert next(it) == [b"\x00", b"\x01"]
    with pytest.raises(FileNotFoundError, match=r"3\.bin"):
        next(it)
    assert next(it) == [b"\x04", b"\x05"]
    loader.close()
