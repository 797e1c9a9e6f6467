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


# -- every header type, against tarfile's reading of the same bytes ------------


def info(name, data=b"", kind=tarfile.REGTYPE, **fields):
    member = tarfile.TarInfo(name)
    member.size, member.type = len(data), kind
    for field, value in fields.items():
        setattr(member, field, value)
    return member, data


def written(tar_format, members, **options):
    """``members`` ((TarInfo, data) pairs) archived by tarfile in ``tar_format``."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tar_format, **options) as tar:
        for member, data in members:
            tar.addfile(member, io.BytesIO(data) if member.isfile() else None)
    return out.getvalue()


def members_every_format_holds(tar_format):
    long_dir = "/".join(["directory"] * 12)  # 119 characters: ustar's prefix, L or pax
    members = [
        info("empty.txt"),
        info("sizes/511.bin", (bytes(range(256)) * 2)[:511]),
        info("sizes/512.bin", b"\x01" * 512),
        info("sizes/513.bin", b"\x02" * 513),
        info(f"{long_dir}/deep.bin", b"deep"),
        info("contiguous.bin", b"type 7, a regular file", tarfile.CONTTYPE),
        info("a-directory", kind=tarfile.DIRTYPE),
        info("link", kind=tarfile.SYMTYPE, linkname="target"),
        info("hard", kind=tarfile.LNKTYPE, linkname="empty.txt"),
        info("fifo", kind=tarfile.FIFOTYPE),
        info("après/naïve.txt", b"a non-ASCII name, in UTF-8"),
        info("after-the-others.txt", b"last"),
    ]
    if tar_format != tarfile.USTAR_FORMAT:  # beyond 100 bytes: GNU L and K, pax records
        members.append(info("n" * 140 + ".bin", b"long basename"))
        members.append(info("long-link", kind=tarfile.SYMTYPE, linkname="t" * 120))
        members.append(info("l" * 120, kind=tarfile.SYMTYPE, linkname="t" * 120))
        members.append(info("after-long-links.txt", b"after"))
    if tar_format == tarfile.GNU_FORMAT:  # a uid too large for octal: base-256
        members.append(info("big-uid.txt", b"uid", uid=8**8))
    return members


def with_checksum(header, signed=False):
    """``header`` with its checksum set (summing signed bytes, as some old writers did)."""
    header = bytearray(header)
    header[148:156] = b" " * 8
    total = sum(byte - 256 if signed and byte > 127 else byte for byte in header)
    header[148:156] = b"%06o\0 " % total
    return bytes(header)


def v7_archive(members, signed=False):
    """A 7th Edition archive: no magic, no prefix, regular files as type NUL or '0'."""
    out = bytearray()
    for name, data, kind in members:
        header = bytearray(512)
        header[0:len(name)] = name
        header[100:108] = b"000644 \0"
        header[108:116] = header[116:124] = b"000000 \0"
        header[124:136] = b"%011o " % len(data)
        header[136:148] = b"%011o " % 1_000_000_000
        header[156:157] = kind
        out += with_checksum(header, signed) + data + bytes(-len(data) % 512)
    return bytes(out + bytes(1024))


def patched_headers(data, patch):
    """``data`` with ``patch(header)`` applied to each header of a regular member."""
    data = bytearray(data)
    with tarfile.open(fileobj=io.BytesIO(bytes(data))) as tar:
        offsets = [m.offset_data - 512 for m in tar.getmembers() if m.isfile()]
    for offset in offsets:
        data[offset:offset + 512] = with_checksum(patch(bytearray(data[offset:offset + 512])))
    return bytes(data)


def tarfile_members(data):
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return [(m.name, tar.extractfile(m).read()) for m in tar.getmembers() if m.isfile()]


def python_members(data, offset=0):
    return list(tar_members(io.BytesIO(data[offset:]).read, "s.tar", offset))


def native_members(path, offset=0, block=4096):
    with open(path, "rb", buffering=0) as file:
        file.seek(offset)
        reader = TarReader(file.fileno(), "s.tar", offset, block)
        return list(iter(reader.next_member, None))


def assert_read_as(tmp_path, data, expected):
    """Both readers give ``expected`` ((name, data) of each regular member), and each
    member's offset reads that member first."""
    path = tmp_path / "s.tar"
    path.write_bytes(data)
    found = python_members(data)
    assert [(name, body) for name, body, _ in found] == expected
    for block in (1024, 1 << 16):
        assert native_members(path, block=block) == found
    for n, (_, _, start) in enumerate(found):
        assert python_members(data, start) == found[n:]
        assert native_members(path, start) == found[n:]


@pytest.mark.parametrize("tar_format", [tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT,
                                        tarfile.PAX_FORMAT], ids=["ustar", "gnu", "pax"])
def test_each_format_tarfile_writes_reads_as_tarfile_reads_it(tmp_path, tar_format):
    data = written(tar_format, members_every_format_holds(tar_format))
    expected = tarfile_members(data)
    assert len(expected) >= 8 and "contiguous.bin" in dict(expected)
    assert_read_as(tmp_path, data, expected)


def test_pax_global_headers_are_passed_over(tmp_path):
    data = written(tarfile.PAX_FORMAT, [info("a.txt", b"a"), info("b.txt", b"b")],
                   pax_headers={"comment": "a global header first"})
    assert data[156:157] == b"g"
    assert_read_as(tmp_path, data, [("a.txt", b"a"), ("b.txt", b"b")])


def test_v7_headers_without_magic(tmp_path):
    members = [(b"first.txt", b"v7, type NUL", b"\0"), (b"second.bin", b"x" * 700, b"0"),
               (b"empty", b"", b"\0"), (b"third.txt", b"t" * 512, b"0")]
    data = v7_archive(members)
    assert data[257:263] == bytes(6)
    expected = tarfile_members(data)
    assert expected == [(name.decode(), body) for name, body, _ in members]
    assert_read_as(tmp_path, data, expected)


def test_v7_headers_with_a_checksum_of_signed_bytes(tmp_path):
    # A Latin-1 name: bytes above 127, which signed-char writers summed as negative.
    members = [(b"caf\xe9.txt", b"latin-1 name", b"0"), (b"plain.txt", b"ascii", b"\0")]
    data = v7_archive(members, signed=True)
    expected = tarfile_members(data)
    assert [body for _, body in expected] == [b"latin-1 name", b"ascii"]
    assert_read_as(tmp_path, data, expected)


def test_old_gnu_headers_have_no_prefix_field(tmp_path):
    # GNU's old format keeps access and change times where ustar has its prefix:
    # GNU tar (-G) writes them. The name is the name field alone (tarfile itself
    # would prepend the times).
    def times(header):
        assert header[257:265] == b"ustar  \0"
        header[345:357] = b"%011o\0" % 1_700_000_000
        header[357:369] = b"%011o\0" % 1_700_000_001
        return header

    data = patched_headers(written(tarfile.GNU_FORMAT, [info("a.txt", b"a"),
                                                        info("dir/b.bin", b"b" * 600)]), times)
    assert_read_as(tmp_path, data, [("a.txt", b"a"), ("dir/b.bin", b"b" * 600)])


def test_gnu_base_256_sizes(tmp_path):
    def base_256(header):
        size = int(header[124:136].rstrip(b"\0 "), 8)
        header[124:136] = b"\x80" + size.to_bytes(11, "big")
        return header

    original = written(tarfile.GNU_FORMAT, [info("a.bin", b"a" * 700), info("b.txt", b"bee")])
    data = patched_headers(original, base_256)
    assert data != original
    expected = tarfile_members(data)
    assert expected == [("a.bin", b"a" * 700), ("b.txt", b"bee")]
    assert_read_as(tmp_path, data, expected)
