"""The native tar reader against the Python parser: same samples, same errors, never a crash."""

import io
import os
import random
import tarfile
import threading

import pytest

from dataloader._core.tar import TarReader
from dataloader.sources import ShardError
from dataloader.sources._tar import group_samples, tar_members


def shard_bytes(tar_format, n=6, seed=0, sizes=(0, 1, 511, 512, 513, 3000)):
    """A shard exercising long names, directories, links and member sizes around blocks."""
    rng = random.Random(seed)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tar_format) as tar:
        info = tarfile.TarInfo("data")
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
        for k in range(n):
            stem = f"data/{'deep/' * (k % 3) * 12}{k:05d}"  # > 100 characters every third
            for extension in ("JPG", "cls", "seg.png"):
                data = rng.randbytes(rng.choice(sizes) + k)
                info = tarfile.TarInfo(f"{stem}.{extension}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            if k == 2:
                link = tarfile.TarInfo(f"{stem}.lnk")
                link.type = tarfile.SYMTYPE
                link.linkname = "elsewhere"
                tar.addfile(link)
                meta = tarfile.TarInfo("__meta__/x.json")
                meta.size = 2
                tar.addfile(meta, io.BytesIO(b"{}"))
    return out.getvalue()


def python_outcome(data, url="s.tar", offset=0):
    stream = io.BytesIO(data[offset:])
    got = []
    try:
        for sample, start, resume in group_samples(tar_members(stream.read, url, offset), url):
            got.append((sample, start, resume))
    except ShardError as error:
        return got, ("ShardError", error.offset, str(error))
    return got, None


def native_outcome(path, url="s.tar", offset=0, block=4096):
    got = []
    with open(path, "rb", buffering=0) as file:
        file.seek(offset)
        reader = TarReader(file.fileno(), url, offset, block)
        try:
            while (found := reader.next_sample()) is not None:
                got.append(found)
        except ShardError as error:
            return got, ("ShardError", error.offset, str(error))
    return got, None


@pytest.mark.parametrize("tar_format", [tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT,
                                        tarfile.PAX_FORMAT])
def test_the_same_samples_and_offsets_as_the_python_parser(tmp_path, tar_format):
    data = shard_bytes(tar_format)
    path = tmp_path / "s.tar"
    path.write_bytes(data)
    expected, error = python_outcome(data)
    assert error is None and len(expected) == 6
    assert {k for s, _, _ in expected for k in s} == {"__key__", "__url__", "jpg", "cls",
                                                      "seg.png"}
    for block in (2048, 4096, 1 << 20):  # headers and members across buffer refills
        assert native_outcome(path, block=block) == (expected, None)
    # Resuming at each sample's offset gives the rest of the shard.
    for n, (_, start, _) in enumerate(expected):
        assert native_outcome(path, offset=start) == (expected[n:], None)


def test_members_larger_than_the_buffer_are_read_whole(tmp_path):
    payload = os.urandom(300_000)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for key in ("a", "b"):
            for extension, data in (("bin", payload), ("txt", key.encode())):
                info = tarfile.TarInfo(f"{key}.{extension}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    path = tmp_path / "big.tar"
    path.write_bytes(out.getvalue())
    got, error = native_outcome(path, block=4096)
    assert error is None
    assert [(s["__key__"], s["bin"] == payload, s["txt"]) for s, _, _ in got] == [
        ("a", True, b"a"), ("b", True, b"b")]


def test_a_pipe_reads_as_a_file(tmp_path):
    data = shard_bytes(tarfile.PAX_FORMAT)
    read_end, write_end = os.pipe()

    def write():  # the whole shard, in small pieces
        for start in range(0, len(data), 1000):
            os.write(write_end, data[start:start + 1000])
        os.close(write_end)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        reader = TarReader(read_end, "s.tar", 0, 4096)
        got = list(iter(reader.next_sample, None))
    finally:
        writer.join()
        os.close(read_end)
    assert got == python_outcome(data)[0]


def mutations(data, rng, count):
    """Truncations, flipped bytes (headers most often) and overwritten runs."""
    headers = [offset for offset in range(0, len(data), 512)
               if data[offset + 257:offset + 262] == b"ustar"]
    for _ in range(count):
        kind = rng.randrange(3)
        if kind == 0:
            yield data[:rng.randrange(len(data))]
            continue
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            base = rng.choice(headers) if headers and rng.random() < 0.8 else 0
            at = min(base + rng.randrange(512 if base else len(data)), len(data) - 1)
            if kind == 1:
                mutated[at] = rng.randrange(256)
            else:
                run = bytes(rng.choice([0x00, 0x20, 0x30, 0x37, 0xff, rng.randrange(256)])
                            for _ in range(rng.randint(1, 12)))
                mutated[at:at + len(run)] = run
        if rng.random() < 0.5:  # keep the checksum valid so that the fields are parsed
            for offset in headers:
                block = mutated[offset:offset + 512]
                if len(block) == 512:
                    block[148:156] = b" " * 8
                    mutated[offset + 148:offset + 156] = b"%06o\0 " % (sum(block) & 0o777777)
        yield bytes(mutated[:len(data)])


@pytest.mark.parametrize("tar_format", [tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT,
                                        tarfile.PAX_FORMAT])
def test_corrupt_and_truncated_shards_agree_with_the_python_parser(tmp_path, tar_format):
    data = shard_bytes(tar_format, n=4, sizes=(1, 700))
    rng = random.Random(tar_format)
    path = tmp_path / "s.tar"
    errors = 0
    for mutated in mutations(data, rng, 400):
        path.write_bytes(mutated)
        expected = python_outcome(mutated)
        got = native_outcome(path, block=rng.choice([2048, 4096, 1 << 16]))
        assert got == expected, (len(mutated), expected[1], got[1])
        errors += expected[1] is not None
    assert errors > 100  # the mutations do reach the error paths


def test_random_bytes_never_crash(tmp_path):
    rng = random.Random(7)
    path = tmp_path / "noise.tar"
    for n in range(200):
        block = bytearray(rng.randbytes(rng.choice([512, 1024, 3000])))
        if n % 2:  # a valid checksum, so that the reader goes on to the size and kind
            block[148:156] = b" " * 8
            block[148:156] = b"%06o\0 " % (sum(block[:512]) & 0o777777)
        path.write_bytes(bytes(block))
        assert native_outcome(path) == python_outcome(bytes(block))


def test_errors_name_the_shard_and_offset(tmp_path):
    data = shard_bytes(tarfile.USTAR_FORMAT)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        member = next(m for m in tar.getmembers() if m.isfile() and m.size > 200)
    path = tmp_path / "cut.tar"
    path.write_bytes(data[:member.offset_data + 100])  # inside the member's data
    got, error = native_outcome(path, url="cut.tar")
    assert error == ("ShardError", member.offset,
                     f"cut.tar: truncated: 100 of {member.size} bytes at byte {member.offset}")
    assert got == python_outcome(data[:member.offset_data + 100], url="cut.tar")[0]


def test_bad_arguments():
    with pytest.raises(ValueError, match="fd"):
        TarReader(-1, "x.tar")
    with pytest.raises(TypeError):
        TarReader(0, None)
