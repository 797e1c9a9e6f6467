"""TarDataset and TarWriter: grouping, sharding, shuffling, resume, errors, remote shards."""

import io
import json
import tarfile
from pathlib import Path

import pytest

from dataloader import DataLoader
from dataloader.sources import ShardError, TarDataset, TarWriter


def make_shard(path, samples, tar_format=tarfile.PAX_FORMAT, extra=()):
    """A tar of ``samples`` ([(key, {ext: bytes})]) plus ``extra`` (name, bytes) members."""
    with tarfile.open(path, "w", format=tar_format) as tar:
        for name, data in extra:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for key, members in samples:
            for extension, data in members.items():
                info = tarfile.TarInfo(f"{key}.{extension}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return str(path)


def samples_of(shard, count, size=700):
    """``count`` samples whose bytes say which shard and key they are."""
    return [
        (f"{shard:02d}{n:04d}", {"jpg": f"image {shard} {n} ".encode() * (size // 16),
                                 "cls": str(n % 7).encode()})
        for n in range(count)
    ]


@pytest.fixture
def shards(tmp_path):
    """Five shards of 4..8 samples, as paths."""
    return [make_shard(tmp_path / f"train-{s:02d}.tar", samples_of(s, 4 + s)) for s in range(5)]


def keys(samples):
    return [sample["__key__"] for sample in samples]


def every_key():
    return [key for s in range(5) for key, _ in samples_of(s, 4 + s)]


def test_samples_are_grouped_by_key_with_lowercased_extensions(tmp_path):
    path = make_shard(tmp_path / "a.tar", [("x/000", {"JPG": b"1", "seg.png": b"2"}),
                                           ("x/001", {"cls": b"3"})],
                      extra=[("__meta__", b"{}"), ("README", b"no extension")])
    samples = list(TarDataset(path))
    assert samples == [
        {"__key__": "x/000", "__url__": path, "jpg": b"1", "seg.png": b"2"},
        {"__key__": "x/001", "__url__": path, "cls": b"3"},
    ]


@pytest.mark.parametrize("tar_format", [tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT,
                                        tarfile.PAX_FORMAT])
def test_long_names_and_large_members_in_every_format(tmp_path, tar_format):
    deep = "d" * 60 + "/" + "e" * 60 + "/k"  # beyond 100 bytes: prefix, L or pax path
    big = bytes(range(256)) * 4001
    path = make_shard(tmp_path / "a.tar", [(deep, {"bin": big}), ("k2", {"txt": b""})],
                      tar_format=tar_format)
    samples = list(TarDataset(path))
    assert [(s["__key__"], s.get("bin"), s.get("txt")) for s in samples] == [
        (deep, big, None), ("k2", None, b"")]


def test_brace_pattern_reads_every_shard_in_order(tmp_path, shards):
    dataset = TarDataset(str(tmp_path / "train-{00..04}.tar"))
    assert dataset.shards == shards
    assert keys(dataset) == every_key()


def test_workers_and_ranks_read_every_sample_exactly_once(shards):
    seen = []
    for rank in range(2):
        dataset = TarDataset(shards).shard(rank=rank, world_size=2)
        with DataLoader(dataset, batch_size=3, num_workers=2,
                        collate_fn=keys) as loader:
            seen += [key for batch in loader for key in batch]
    assert sorted(seen) == sorted(every_key())


def test_shuffles_are_seeded_permutations_new_each_epoch(shards):
    def epoch_keys(seed, epoch):
        dataset = TarDataset(shards, shuffle_buffer=6, shuffle_shards=True, seed=seed)
        dataset.set_epoch(epoch)
        return keys(dataset)

    first = epoch_keys(1, 0)
    assert sorted(first) == sorted(every_key())
    assert first != every_key()
    assert epoch_keys(1, 0) == first
    assert epoch_keys(1, 1) != first
    assert epoch_keys(2, 0) != first


@pytest.mark.parametrize("buffer", [0, 5])
@pytest.mark.parametrize("stop", [1, 6, 9, 29])
def test_an_iterator_resumes_exactly_from_its_state(shards, buffer, stop):
    dataset = TarDataset(shards, shuffle_buffer=buffer, shuffle_shards=True, seed=3)
    whole = keys(dataset)
    iterator = iter(dataset)
    head = [next(iterator)["__key__"] for _ in range(stop)]
    state = json.loads(json.dumps(iterator.state_dict()))
    resumed = iter(TarDataset(shards, shuffle_buffer=buffer, shuffle_shards=True, seed=3))
    resumed.load_state_dict(state)
    assert head + keys(resumed) == whole


def test_a_loader_resumes_mid_epoch_with_workers(shards):
    def loader():
        dataset = TarDataset(shards, shuffle_buffer=4, shuffle_shards=True, seed=5)
        return DataLoader(dataset, batch_size=2, num_workers=2, collate_fn=keys)

    with loader() as first:
        iterator = iter(first)
        head = [next(iterator) for _ in range(4)]
        state = first.state_dict()
        rest_uninterrupted = list(iterator)
    with loader() as second:
        second.load_state_dict(state)
        rest = list(second)
    # Batches arrive in arrival order across workers: compare as sets per run.
    assert sorted(map(tuple, rest)) == sorted(map(tuple, rest_uninterrupted))
    assert sorted(k for b in head + rest for k in b) == sorted(every_key())


def test_memory_is_one_member_not_the_shard(tmp_path):
    # A shard streamed from a pipe-like reader never holds more than a member.
    path = make_shard(tmp_path / "a.tar", samples_of(0, 50, size=20000))
    reads = []
    import dataloader.sources._shards as shards_module

    original = shards_module.open_shard

    def spying(location, offset, options):
        stream = original(location, offset, options)
        read = stream.read

        class Spy:
            def read(self, n):
                reads.append(n)
                return read(n)

            def close(self):
                stream.close()

        return Spy()

    import dataloader.sources._tar_dataset as module

    module.open_shard = spying
    try:
        assert len(list(TarDataset(path))) == 50
    finally:
        module.open_shard = original
    assert max(reads) < 20000


def corrupt(path, offset, data):
    with open(path, "r+b") as file:
        file.seek(offset)
        file.write(data)


def test_a_bad_checksum_raises_naming_the_shard_and_offset(shards):
    with tarfile.open(shards[1]) as tar:
        member_offsets = [info.offset for info in tar.getmembers()]
    corrupt(shards[1], member_offsets[4] + 10, b"\xff")
    with pytest.raises(ShardError, match=r"train-01\.tar: bad header checksum at byte "
                       + str(member_offsets[4])) as caught:
        list(TarDataset(shards))
    assert caught.value.offset == member_offsets[4]
    assert isinstance(caught.value, ValueError)


def test_a_truncated_shard_raises_or_is_skipped_and_counted(shards):
    with open(shards[2], "r+b") as file:
        file.truncate(3000)
    with pytest.raises(ShardError, match=r"train-02\.tar: truncated"):
        list(TarDataset(shards))
    dataset = TarDataset(shards, on_error="skip")
    got = keys(dataset)
    assert set(got) < set(every_key())
    assert [k for k in every_key() if not k.startswith("02")] == [
        k for k in got if not k.startswith("02")]
    assert dataset.stats() == {"samples": len(got), "shards": 4, "skipped_shards": 1}


def test_a_missing_shard_is_an_os_error_or_skipped(shards, tmp_path):
    listed = shards[:1] + [str(tmp_path / "gone.tar")]
    with pytest.raises(FileNotFoundError):
        list(TarDataset(listed))
    dataset = TarDataset(listed, on_error="skip")
    assert keys(dataset) == keys(TarDataset(shards[:1]))
    assert dataset.stats()["skipped_shards"] == 1


def test_bad_arguments_name_themselves(shards):
    for kwargs, pattern in [({"shuffle_buffer": -1}, "shuffle_buffer"),
                            ({"seed": -2}, "seed"), ({"on_error": "ignore"}, "on_error")]:
        with pytest.raises(ValueError, match=pattern):
            TarDataset(shards, **kwargs)
    with pytest.raises(TypeError, match="shards"):
        TarDataset(42)
    with pytest.raises(ValueError, match="world_size=9"):
        TarDataset(shards).shard(rank=0, world_size=9)
    with pytest.raises(ValueError, match="ftp"):
        list(TarDataset(["ftp://host/a.tar"]))


def test_writer_round_trips_and_splits_by_size(tmp_path):
    samples = [{"__key__": f"{n:04d}", "jpg": bytes([n]) * 3000, "cls": n, "txt": "é"}
               for n in range(10)]
    with TarWriter(str(tmp_path / "w-{:03d}.tar"), shard_size=20_000) as writer:
        for sample in samples:
            writer.write(sample)
    assert len(writer.shards) == 4  # 3 samples of 5.6 KB per 20 KB shard
    read = list(TarDataset(writer.shards))
    assert [(s["__key__"], s["jpg"], int(s["cls"]), s["txt"].decode()) for s in read] == [
        (s["__key__"], s["jpg"], s["cls"], s["txt"]) for s in samples]
    with tarfile.open(writer.shards[0]) as tar:  # a standard tar, members in order
        assert tar.getnames()[:3] == ["0000.jpg", "0000.cls", "0000.txt"]


def test_writer_rejects_bad_samples(tmp_path):
    writer = TarWriter(str(tmp_path / "w.tar"))
    with pytest.raises(ValueError, match="__key__"):
        writer.write({"__key__": "a.b", "x": b""})
    with pytest.raises(TypeError, match=r"sample\['x'\]"):
        writer.write({"__key__": "a", "x": 1.5})
    with pytest.raises(ValueError, match="shard_size"):
        TarWriter(str(tmp_path / "w.tar"), shard_size=100)
    writer.close()


def test_http_shards_stream_and_resume_with_range(http_server, shards):
    for n, path in enumerate(shards):
        http_server.bodies[f"/s/{n}.tar"] = Path(path).read_bytes()
    pattern = f"{http_server.url}/s/{{0..4}}.tar"
    assert keys(TarDataset(pattern)) == every_key()
    iterator = iter(TarDataset(pattern, shuffle_buffer=3, seed=1))
    head = [next(iterator)["__key__"] for _ in range(7)]
    resumed = iter(TarDataset(pattern, shuffle_buffer=3, seed=1))
    resumed.load_state_dict(iterator.state_dict())
    # The buffered samples were read again from their offsets.
    assert any("Range" in headers for headers in http_server.headers.values())
    assert head + keys(resumed) == keys(TarDataset(pattern, shuffle_buffer=3, seed=1))


def test_http_404_and_retried_503(http_server, shards):
    from dataloader.sources import Retry

    http_server.bodies["/s/0.tar"] = Path(shards[0]).read_bytes()
    http_server.script("/s/0.tar", 503, 503)
    fast = Retry(max_retries=3, initial_backoff=0.01, max_backoff=0.05)
    assert keys(TarDataset(f"{http_server.url}/s/0.tar", retry=fast)) == keys(
        TarDataset(shards[0]))
    assert http_server.requests["/s/0.tar"] == 3
    with pytest.raises(FileNotFoundError, match="HTTP 404"):
        list(TarDataset(f"{http_server.url}/s/9.tar"))


def test_same_samples_as_webdataset(shards, tmp_path):
    wds = pytest.importorskip("webdataset")
    extra = make_shard(tmp_path / "odd.tar", [("a/b.c", {"X.Y": b"1"}), ("a/b", {"z": b"2"})],
                       extra=[("__meta__", b"m"), ("noext", b"n")])
    for listed in (shards, [extra]):
        ours = list(TarDataset(listed))
        theirs = list(wds.WebDataset(listed, shardshuffle=False))
        assert [{k: v for k, v in s.items() if not k.startswith("__local")} for s in theirs] \
            == ours


def test_s3_shards_stream_and_resume(shards):
    reason = "not installable on this interpreter (no free-threaded build)"
    boto3 = pytest.importorskip("boto3", reason=reason)
    pytest.importorskip("obstore", reason=reason)
    server_module = pytest.importorskip("moto.server", reason=reason)
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{port}"
        credentials = {"access_key_id": "testing", "secret_access_key": "dl-test-secret"}
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                              aws_access_key_id="testing",
                              aws_secret_access_key="dl-test-secret")
        client.create_bucket(Bucket="shards")
        for n, path in enumerate(shards):
            client.put_object(Bucket="shards", Key=f"train/{n}.tar", Body=Path(path).read_bytes())
        options = {"endpoint": endpoint, "region": "us-east-1",
                   "client_options": {"allow_http": True}, **credentials}

        def dataset():
            return TarDataset("s3://shards/train/{0..4}.tar", shuffle_buffer=4, seed=2,
                              store_options=options)

        whole = keys(dataset())
        assert sorted(whole) == sorted(every_key())
        iterator = iter(dataset())
        head = [next(iterator)["__key__"] for _ in range(11)]
        resumed = iter(dataset())
        resumed.load_state_dict(iterator.state_dict())
        assert head + keys(resumed) == whole
        with pytest.raises(FileNotFoundError):
            list(TarDataset("s3://shards/train/9.tar", store_options=options))
    finally:
        server.stop()


def test_a_native_chain_decodes_shard_images_on_the_fused_path(tmp_path, photos):
    np = pytest.importorskip("numpy")
    from dataloader import ImageCollator
    from dataloader.transforms import (
        Compose,
        Decode,
        Normalize,
        RandomHFlip,
        RandomResizedCrop,
        ToChw,
        ToFloat,
    )

    jpegs = [data for name, data in sorted(photos.items()) if name.endswith(".jpg")] * 3
    with TarWriter(str(tmp_path / "img-{:02d}.tar"), shard_size=400_000) as writer:
        for n, data in enumerate(jpegs):
            writer.write({"__key__": f"{n:04d}", "jpg": data, "cls": n % 4})
    train = Compose([Decode("RGB"), RandomResizedCrop(24), RandomHFlip(), ToFloat(),
                     Normalize([0.5, 0.5, 0.5], [0.25, 0.25, 0.25]), ToChw()])
    reference = DataLoader([(data, n % 4) for n, data in enumerate(jpegs)], batch_size=4,
                           transform=train, collate_fn=ImageCollator(), seed=7)
    stream = DataLoader(TarDataset(writer.shards, fields=("jpg;png", "cls")), batch_size=4,
                        transform=train, collate_fn=ImageCollator(), seed=7)
    expected, got = list(reference), list(stream)
    assert len(got) == len(expected) == 3
    for (images, labels), (want_images, want_labels) in zip(got, expected, strict=True):
        assert np.asarray(images).shape[1:] == (3, 24, 24)
        np.testing.assert_array_equal(np.asarray(images), np.asarray(want_images))
        assert labels.tolist() == want_labels.tolist()


def test_fields_are_decoded_and_missing_ones_named(tmp_path):
    with TarWriter(str(tmp_path / "f.tar")) as writer:
        writer.write({"__key__": "a", "png": b"P", "cls": 3, "txt": "hé", "json": '{"k": [1]}'})
    sample = next(iter(TarDataset(writer.shards, fields=("jpg;png", "cls", "txt", "json"))))
    assert sample == (b"P", 3, "hé", {"k": [1]})
    with pytest.raises(ValueError, match=r"sample 'a' has no member 'seg'"):
        list(TarDataset(writer.shards, fields=("seg",)))
    with pytest.raises(TypeError, match="fields"):
        TarDataset(writer.shards, fields="jpg")
