"""Untrusted bodies and shards: bounded memory and time, errors naming the bound.

Peak memory is measured in a fresh client process (``ru_maxrss`` after a
warm-up, then after the hostile read), while the server runs here. Rates
are checked with drips far slower than the bound, so that a busy machine
only makes them slower still.
"""

import io
import json
import os
import subprocess
import sys
import tarfile
import threading
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataloader.sources import HttpDataset, Retry, ShardError, ShardLimits, TarDataset
from dataloader.sources._limits import DEFAULT_MAX_BYTES

pytest.importorskip("aiohttp")
from hostile_server import HostileServer

TIB = 1 << 40
MIB = 1 << 20
NO_RETRY = Retry(max_retries=0)
# A client process: a warm-up read, then the hostile one; prints the error and the peaks.
CLIENT = """
import asyncio, json, resource, sys
from dataloader.sources import HttpDataset, Retry, ShardLimits, TarDataset

def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

def item(url, **options):
    dataset = HttpDataset([url], retry=Retry(max_retries=0), **options)
    async def run():
        try:
            return await dataset[0]
        finally:
            await dataset.aclose()
    return asyncio.run(run())

base, case = sys.argv[1], sys.argv[2]
item(base + "/echo")
list(TarDataset(base + "/body/small.tar"))
baseline = peak()
try:
    if case == "endless":
        item(base + "/endless", max_bytes=int(sys.argv[3]))
    else:
        list(TarDataset(base + case, retry=Retry(max_retries=0)))
    error = None
except Exception as exc:
    error = f"{type(exc).__name__}: {exc}"
print(json.dumps({"baseline": baseline, "peak": peak(), "error": error}))
"""


@pytest.fixture(scope="module")
def server():
    server = HostileServer().start()
    server.bodies["small.tar"] = shard([("a.txt", b"a")])
    yield server
    server.stop()


def shard(members, tar_format=tarfile.USTAR_FORMAT):
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tar_format) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def declaring(size, name="000.bin", data=b"x" * 4096):
    """A member header declaring ``size`` bytes (base-256 past octal's 8 GiB), then ``data``."""
    info = tarfile.TarInfo(name)
    info.size = 0
    block = bytearray(info.tobuf(format=tarfile.GNU_FORMAT))
    block[124:136] = b"\x80" + size.to_bytes(11, "big")
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block) + data


def client(server, *args):
    result = subprocess.run([sys.executable, "-c", CLIENT, server.url, *args],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


# -- bodies -----------------------------------------------------------------------------

def test_bodies_and_members_are_bounded_by_default():
    assert DEFAULT_MAX_BYTES == 1 << 30
    assert HttpDataset([]).max_bytes == DEFAULT_MAX_BYTES
    assert ShardLimits().max_member_bytes == DEFAULT_MAX_BYTES
    assert HttpDataset([], max_bytes=None).max_bytes is None  # lifted on request


def test_an_endless_body_stops_at_max_bytes_with_bounded_memory(server):
    got = client(server, "endless", str(32 * MIB))
    assert got["error"] == (f"ValueError: GET {server.url}/endless: body exceeds "
                            f"max_bytes={32 * MIB}")
    assert got["peak"] - got["baseline"] < 100 * MIB, got


# -- members ----------------------------------------------------------------------------

@pytest.mark.parametrize("route", ["body", "chunked"])
def test_a_remote_member_declaring_a_tebibyte_is_refused_before_reading(server, route):
    server.bodies["tib.tar"] = declaring(TIB)
    got = client(server, f"/{route}/tib.tar")
    assert got["error"] == (f"ShardError: {server.url}/{route}/tib.tar: a member of {TIB} "
                            f"bytes, more than max_member_bytes={DEFAULT_MAX_BYTES} at byte 0")
    assert got["peak"] - got["baseline"] < 100 * MIB, got


def test_a_member_longer_than_the_body_is_refused_from_its_content_length(server):
    server.bodies["long.tar"] = declaring(TIB)
    limits = ShardLimits(max_member_bytes=None)
    with pytest.raises(ShardError, match=f"truncated: 4096 of {TIB} bytes at byte 0"):
        list(TarDataset(f"{server.url}/body/long.tar", limits=limits, retry=NO_RETRY))


def test_a_member_over_a_settable_bound_is_skipped_with_on_error_skip(server):
    server.bodies["two.tar"] = shard([("0.bin", b"x" * 5000), ("1.bin", b"y" * 100)])
    limits = ShardLimits(max_member_bytes=4096)
    url = f"{server.url}/body/two.tar"
    with pytest.raises(ShardError, match="a member of 5000 bytes, more than max_member_bytes=4096"):
        list(TarDataset(url, limits=limits))
    dataset = TarDataset([url, f"{server.url}/body/small.tar"], limits=limits, on_error="skip")
    assert [sample["__key__"] for sample in dataset] == ["a"]
    assert dataset.stats()["skipped_shards"] == 1


def test_directories_declaring_a_tebibyte_are_passed_over_without_memory(server):
    info = tarfile.TarInfo("d")
    info.type = tarfile.DIRTYPE
    block = bytearray(info.tobuf(format=tarfile.GNU_FORMAT))
    block[124:136] = b"\x80" + TIB.to_bytes(11, "big")
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    server.bodies["dir.tar"] = bytes(block) + b"z" * 20_000
    tracemalloc.start()
    try:
        with pytest.raises(ShardError, match=f"truncated: 20000 of {TIB} bytes at byte 0"):
            list(TarDataset(f"{server.url}/chunked/dir.tar", retry=NO_RETRY))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * MIB, peak


def fifo_shard(tmp_path, data):
    """A named pipe fed ``data`` by a thread: a shard whose size nobody knows."""
    path = tmp_path / "pipe.tar"
    os.mkfifo(path)

    def feed():
        with open(path, "wb") as pipe:
            try:
                pipe.write(data)
            except BrokenPipeError:
                pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    return path, writer


@pytest.mark.parametrize("limit", [DEFAULT_MAX_BYTES, None])
def test_a_pipe_declaring_a_tebibyte_is_a_shard_error_skipped_by_skip(tmp_path, limit):
    path, writer = fifo_shard(tmp_path, declaring(TIB))
    dataset = TarDataset(str(path), limits=ShardLimits(max_member_bytes=limit),
                         on_error="skip")
    assert list(dataset) == []
    assert dataset.stats()["skipped_shards"] == 1
    writer.join(30)
    path.unlink()
    path, writer = fifo_shard(tmp_path, declaring(TIB))
    # Without a bound, the member is refused when its memory cannot be had,
    # or, where the allocator grants it lazily, when the pipe ends early.
    message = "more than max_member_bytes" if limit else "out of memory|truncated"
    with pytest.raises(ShardError, match=message):
        list(TarDataset(str(path), limits=ShardLimits(max_member_bytes=limit)))
    writer.join(30)


# -- headers ----------------------------------------------------------------------------

def global_header(size):
    """A pax global header of about ``size`` bytes."""
    record = b" comment=" + b"a" * size + b"\n"
    length = len(record) + 1
    while len(str(length)) + len(record) != length:
        length = len(str(length)) + len(record)
    data = str(length).encode() + record
    info = tarfile.TarInfo("pax_global_header")
    info.type = tarfile.XGLTYPE
    info.size = len(data)
    return info.tobuf(format=tarfile.USTAR_FORMAT) + data + bytes(-len(data) % 512)


def test_a_chain_of_global_headers_is_bounded_in_both_parsers(server, tmp_path):
    data = b"".join(global_header(MIB) for _ in range(40)) + shard([("0.bin", b"x")])
    path = tmp_path / "chain.tar"
    path.write_bytes(data)
    server.bodies["chain.tar"] = data
    message = "metadata headers of more than max_header_bytes=16777216 bytes before one member"
    native = pytest.raises(ShardError, match=message)
    with native:
        list(TarDataset(str(path)))
    with pytest.raises(ShardError, match=message) as remote:
        list(TarDataset(f"{server.url}/body/chain.tar"))
    assert remote.value.offset == native.excinfo.value.offset
    limits = ShardLimits(max_header_bytes=2 * MIB)
    with pytest.raises(ShardError, match=f"max_header_bytes={2 * MIB} bytes"):
        list(TarDataset(str(path), limits=limits))
    ok = b"".join(global_header(1000) for _ in range(3)) + shard([("0.bin", b"x")])
    path.write_bytes(ok)
    assert [s["bin"] for s in TarDataset(str(path))] == [b"x"]


def test_a_chain_of_global_headers_keeps_the_native_reader_small(server, tmp_path):
    data = b"".join(global_header(MIB) for _ in range(200)) + shard([("0.bin", b"x")])
    (tmp_path / "long-chain.tar").write_bytes(data)
    code = (
        "import resource, sys\n"
        "from dataloader.sources import TarDataset, ShardError\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "try:\n"
        "    list(TarDataset(sys.argv[1]))\n"
        "except ShardError:\n"
        "    pass\n"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)\n"
    )
    result = subprocess.run([sys.executable, "-c", code, str(tmp_path / "long-chain.tar")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) < 100 * MIB  # was the whole chain: 200 MiB


# -- rates ------------------------------------------------------------------------------

@pytest.mark.parametrize("length", [None, str(MIB + 512)])
def test_a_dripping_http_shard_times_out_naming_min_rate(server, length):
    server.bodies["head"] = declaring(MIB, data=b"")
    query = "every=0.05&head=head" + (f"&length={length}" if length else "")
    # 1280 bytes/s against a bound of 1 MiB/s over each 0.5 s waited (see test_untrusted.py).
    limits = ShardLimits(min_rate=1 << 20, rate_window=0.5)
    dataset = TarDataset(f"{server.url}/drip?{query}", limits=limits, retry=NO_RETRY)
    with pytest.raises(TimeoutError, match=r"too slow, \d+ bytes/s over .* "
                                           r"slower than ShardLimits.min_rate=1048576"):
        list(dataset)


def test_a_dripping_object_store_shard_ends_with_the_store_timeout(server):
    # obstore's request timeout bounds a GET, body included (30 s by default); the
    # rate is checked between its chunks of 1 MiB, which a drip never completes.
    pytest.importorskip("obstore")
    server.bodies["head"] = declaring(MIB, data=b"")
    options = {"endpoint": server.url, "region": "us-east-1", "skip_signature": True,
               "client_options": {"allow_http": True, "timeout": "2s"}}
    server.default_query = {"every": "0.05", "head": "head", "length": str(MIB + 512)}
    try:
        with pytest.raises(OSError, match="s3://bucket/drip: GenericError"):
            list(TarDataset("s3://bucket/drip", store_options=options))
    finally:
        server.default_query = {}


def test_a_fast_shard_is_not_slowed_by_the_rate_bound(server):
    server.bodies["fast.tar"] = shard([(f"{n:03d}.bin", bytes(20_000)) for n in range(50)])
    # 1 MB from a loopback server: far above 64 KiB/s, however busy the machine.
    limits = ShardLimits(min_rate=1 << 16, rate_window=0.2)
    samples = list(TarDataset(f"{server.url}/body/fast.tar", limits=limits))
    assert len(samples) == 50


def test_limits_are_checked():
    with pytest.raises(ValueError, match="max_member_bytes"):
        ShardLimits(max_member_bytes=-1)
    with pytest.raises(ValueError, match="max_header_bytes"):
        ShardLimits(max_header_bytes=32 * MIB)
    with pytest.raises(ValueError, match="rate_window"):
        ShardLimits(rate_window=0)
    with pytest.raises(TypeError, match="ShardLimits"):
        TarDataset("s.tar", limits={"max_member_bytes": 1})


# -- the hostile-input hunt over HTTP --------------------------------------------------------

HUNT_LIMITS = ShardLimits(max_member_bytes=64 * 1024, max_header_bytes=8192)
SIZES = [0, 1, 511, 512, 513, 3000, 60_000]
HUGE = [70_000, 1 << 33, TIB, (1 << 62) + 1]


def outcome(samples):
    try:
        return [sorted((k, v) for k, v in s.items() if k != "__url__") for s in samples], None
    except ShardError as exc:
        return None, (exc.offset, str(exc).split(": ", 1)[1])


@st.composite
def hostile_shards(draw):
    tar_format = draw(st.sampled_from([tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT,
                                       tarfile.PAX_FORMAT]))
    names = [f"{'d/' * draw(st.integers(0, 60))}{n:03d}.{ext}"
             for n in range(draw(st.integers(1, 4))) for ext in ("bin", "cls")]
    data = bytearray(shard([(name, bytes([n % 251]) * draw(st.sampled_from(SIZES)))
                            for n, name in enumerate(names)], tar_format))
    headers = [at for at in range(0, len(data), 512) if data[at + 257:at + 262] == b"ustar"]
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.sampled_from(headers))
        change = draw(st.sampled_from(["size", "byte", "kind", "truncate"]))
        if change == "size":
            data[at + 124:at + 136] = b"\x80" + draw(st.sampled_from(HUGE)).to_bytes(11, "big")
        elif change == "byte":
            data[at + draw(st.integers(0, 511))] = draw(st.integers(0, 255))
        elif change == "kind":
            data[at + 156] = ord(draw(st.sampled_from("0257xgLK")))
        else:
            del data[draw(st.integers(0, len(data))):]
            break
        if at + 512 <= len(data) and draw(st.booleans()):  # keep the checksum valid
            data[at + 148:at + 156] = b" " * 8
            data[at + 148:at + 156] = b"%06o\0 " % sum(data[at:at + 512])
    return bytes(data)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=hostile_shards(), route=st.sampled_from(["body", "chunked"]))
def test_hostile_shards_over_http_read_as_the_local_reader_reads_them(server, tmp_path,
                                                                      data, route):
    path = tmp_path / "local.tar"
    path.write_bytes(data)
    local = outcome(TarDataset(str(path), limits=HUNT_LIMITS))
    server.bodies["hunt.tar"] = data
    tracemalloc.start()
    try:
        remote = outcome(TarDataset(f"{server.url}/{route}/hunt.tar", limits=HUNT_LIMITS,
                                    retry=NO_RETRY))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert remote == local
    assert peak < 16 * MIB, peak
