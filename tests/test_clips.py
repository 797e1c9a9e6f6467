"""ClipTransform and ClipCollator: one draw per clip, pooled (B, T, ...) batches, straight
into their slots in a loader on every worker kind."""

import functools
import shutil
import threading
import time

import numpy as np
import pytest

from dataloader import ClipCollator, ClipSampler, ClipTransform, DataLoader, VideoFolder
from dataloader._media.clips import ClipSlots
from dataloader.kernels import decode_video
from dataloader.transforms import (
    CenterCrop,
    ColorJitter,
    Compose,
    Normalize,
    RandomHFlip,
    RandomResizedCrop,
    Resize,
    ToChw,
    ToFloat,
    ToRgb,
)

WORKERS = [(0, "auto"), (2, "thread"), (2, "process")]
WORKER_IDS = ["direct", "threads", "processes"]
SIZE = (48, 80)
AUGMENT = Compose([RandomResizedCrop((32, 40), scale=(0.3, 1.0)), RandomHFlip(),
                   ColorJitter(0.4, 0.4, 0.4)])


def random_clip(frames=6, height=40, width=56, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (frames, height, width, 3), np.uint8)


@pytest.fixture(scope="module")
def root(media, tmp_path_factory):
    """Two classes of two videos each (75 frames of 120x208)."""
    root = tmp_path_factory.mktemp("clip-videos")
    for name, videos in {"a": ["h264_bframes.mp4", "vp9.webm"],
                         "b": ["hevc.mkv", "vfr.mkv"]}.items():
        (root / name).mkdir()
        for video in videos:
            shutil.copy(media[video], root / name / video)
    return root


@pytest.mark.parametrize("seed", [0, 1, 2**63 + 5])
def test_every_frame_gets_the_draw_the_image_chain_makes_for_the_clips_seed(seed):
    clip = random_clip()
    out = ClipTransform(AUGMENT)(clip, seed=seed)
    assert out.shape == (6, 32, 40, 3) and out.dtype == np.uint8
    for t, frame in enumerate(clip):
        np.testing.assert_array_equal(out[t], AUGMENT(frame, seed=seed))


def test_one_draw_per_clip_differs_between_clips():
    clip = random_clip()
    clip[:] = clip[0]
    draws = [ClipTransform(AUGMENT)(clip, seed=seed) for seed in range(6)]
    for out in draws:
        assert (out == out[0]).all()   # equal frames stay equal: one draw for the clip
    assert len({out.tobytes() for out in draws}) > 1


def test_a_chain_whose_size_follows_the_frames_and_a_float_tail():
    clip = random_clip(frames=3, height=30, width=44)
    out = ClipTransform(RandomHFlip())(clip, seed=4)
    assert out.shape == clip.shape
    np.testing.assert_array_equal(out[2], RandomHFlip()(clip[2], seed=4))
    chain = Compose([Resize(20), CenterCrop(16), ToFloat(), Normalize([0.5] * 3, [0.2] * 3)])
    out = ClipTransform(chain)(clip, seed=1)
    assert out.shape == (3, 16, 16, 3) and out.dtype == np.float32
    np.testing.assert_allclose(out[1], chain(clip[1], seed=1))


def test_bound_to_an_epoch_a_clip_transform_follows_seed_epoch_and_index():
    transform = ClipTransform(AUGMENT)
    clip = random_clip()
    bound = transform.bind_epoch(3, 1)
    got, label = bound(5, (clip, 9))
    assert label == 9
    np.testing.assert_array_equal(got, bound(5, clip))
    assert not np.array_equal(got, transform.bind_epoch(3, 2)(5, clip))


def test_clip_transform_arguments():
    with pytest.raises(ValueError, match="ends in CHW"):
        ClipTransform(Compose([Resize((8, 8)), ToRgb(), ToChw()]))
    with pytest.raises(ValueError, match="ends in CHW"):   # found by the first frame
        ClipTransform(Compose([Resize((8, 8)), ToChw()]))(random_clip(), seed=0)
    with pytest.raises(TypeError, match=r"takes a dataloader\.transforms Transform"):
        ClipTransform(lambda clip: clip)
    with pytest.raises(ValueError, match=r"\(T, H, W, C\)"):
        ClipTransform(RandomHFlip())(np.zeros((4, 4, 3), np.uint8), seed=0)
    with pytest.raises(ValueError, match="uint8 clips"):
        ClipTransform(RandomHFlip())(np.zeros((1, 4, 4, 3), np.float32), seed=0)


@pytest.mark.parametrize("layout", ["NTCHW", "NTHWC"])
@pytest.mark.parametrize("dtype", [None, "float32"])
def test_the_collator_stacks_clips_in_its_layout(layout, dtype):
    clips = [random_clip(frames=4, height=6, width=10, seed=i) for i in range(3)]
    collator = ClipCollator(layout, dtype=dtype)
    batch, labels = collator([(clip, i) for i, clip in enumerate(clips)])
    expected = np.stack(clips)
    if layout == "NTCHW":
        expected = expected.transpose(0, 1, 4, 2, 3)
    if dtype == "float32":
        expected = expected.astype(np.float32) / np.float32(255)
    assert batch.dtype == expected.dtype and batch.flags.c_contiguous
    np.testing.assert_array_equal(batch, expected)
    assert labels.tolist() == [0, 1, 2]


def test_the_collator_reuses_its_memory_and_names_bad_items():
    collator = ClipCollator("NTHWC")
    clips = [random_clip(frames=2, height=4, width=4, seed=i) for i in range(2)]
    first = collator(clips)
    address = first.ctypes.data
    del first
    assert collator(clips).ctypes.data == address   # the batch's memory came back to the pool
    with pytest.raises(ValueError, match="item 1 is a uint8 clip of shape"):
        collator([clips[0], random_clip(frames=3, height=4, width=4)])
    with pytest.raises(ValueError, match="cannot store float32 clips as uint8"):
        ClipCollator(dtype="uint8")([np.zeros((1, 2, 2, 3), np.float32)])
    with pytest.raises(ValueError, match="empty batch"):
        collator([])
    with pytest.raises(ValueError, match="layout"):
        ClipCollator("NCHW")


def test_decode_video_into_a_given_array(media):
    path = media["h264_bframes.mp4"]
    expected = decode_video(path, [5, 3, 5], size=SIZE)
    out = np.empty((3, *SIZE, 3), np.uint8)
    assert decode_video(path, [5, 3, 5], size=SIZE, out=out) is out
    np.testing.assert_array_equal(out, expected)
    with pytest.raises(ValueError, match=r"out must be a writable C-contiguous uint8 array"):
        decode_video(path, [1, 2], size=SIZE, out=np.empty((3, *SIZE, 3), np.uint8))


def collate_plainly(layout, items):
    """ClipCollator's collation with no assembler: each clip made, then copied in."""
    return ClipCollator(layout)(items)


def epochs_of(loader, count=2):
    """``count`` epochs' batches, copied, each batch dropped before the next."""
    return [[clips.copy() for clips, _ in loader] for _ in range(count)]


@pytest.mark.parametrize("workers", WORKERS, ids=WORKER_IDS)
@pytest.mark.parametrize(("layout", "transform"), [
    ("NTHWC", None), ("NTCHW", None), ("NTCHW", AUGMENT), ("NTHWC", AUGMENT)])
def test_clips_go_straight_into_pooled_batches_on_every_worker_kind(root, workers, layout,
                                                                    transform):
    num_workers, worker_type = workers
    folder = VideoFolder(root, ClipSampler(4, stride=2, clips_per_video=2), size=SIZE,
                         transform=transform)
    collator = ClipCollator(layout)
    assert collator.assembler(folder.transform.bind_epoch(0, 0)) is not None

    def loader(collate_fn, num_workers=0, worker_type="auto"):
        return DataLoader(folder, batch_size=3, shuffle=True, seed=11, num_workers=num_workers,
                          worker_type=worker_type, collate_fn=collate_fn)

    expected = epochs_of(loader(functools.partial(collate_plainly, layout)))
    assembled = loader(collator, num_workers, worker_type)
    held = []
    for epoch in range(2):   # the second epoch reuses the first's memory
        for step, (clips, labels) in enumerate(assembled):
            assert clips.shape[:2] == (len(labels), 4)
            np.testing.assert_array_equal(clips, expected[epoch][step])
            if step == 1:
                held.append((clips, expected[epoch][step]))   # kept across the epoch boundary
    for clips, kept in held:
        np.testing.assert_array_equal(clips, kept)


def test_an_unsized_folder_collates_without_an_assembler(root):
    folder = VideoFolder(root, ClipSampler(3), size=40)   # the shorter side: sizes could vary
    assert ClipCollator().assembler(folder.transform.bind_epoch(0, 0)) is None
    clips, _ = next(iter(DataLoader(folder, batch_size=4, collate_fn=ClipCollator())))
    assert clips.shape == (4, 3, 3, 40, 69)


def test_an_epochs_first_batch_is_decoded_into_its_slots_by_every_worker(root, monkeypatch):
    """The first batch of each epoch (and of a resumed one) is shared out item by item
    among the worker threads, each clip decoded straight into its slot: the same batches
    as collating the clips, the memory reused once a batch is dropped."""
    putting_threads = set()
    put = ClipSlots.put

    def put_and_record(self, position, index, item):
        putting_threads.add(threading.get_ident())
        time.sleep(0.05)   # long enough for the other worker to claim the next item
        put(self, position, index, item)

    monkeypatch.setattr(ClipSlots, "put", put_and_record)
    folder = VideoFolder(root, ClipSampler(4, stride=2, clips_per_video=3), size=SIZE)

    def loader(collate_fn, num_workers=0):
        return DataLoader(folder, batch_size=4, shuffle=True, seed=5, num_workers=num_workers,
                          worker_type="thread", collate_fn=collate_fn)

    expected = epochs_of(loader(functools.partial(collate_plainly, "NTHWC")), 3)
    assert not putting_threads   # no worker thread, no slots: the plain collation
    threads = loader(ClipCollator("NTHWC"), 2)
    held = []
    for epoch in range(2):
        for step, (clips, _) in enumerate(threads):
            np.testing.assert_array_equal(clips, expected[epoch][step])
            if step == 0:
                held.append((clips, expected[epoch][step]))
        assert len(putting_threads) == 2, epoch   # both workers decoded into the first batch
        putting_threads.clear()
    it = iter(threads)   # the third epoch, saved after a batch and resumed
    np.testing.assert_array_equal(next(it)[0], expected[2][0])
    putting_threads.clear()
    resumed = loader(ClipCollator("NTHWC"), 2)
    resumed.load_state_dict(threads.state_dict())
    for step, (clips, _) in enumerate(resumed, start=1):
        np.testing.assert_array_equal(clips, expected[2][step])
    assert len(putting_threads) == 2   # the resumed epoch's first batch is shared out too
    for clips, kept in held:
        np.testing.assert_array_equal(clips, kept)


@pytest.mark.parametrize("workers", WORKERS, ids=WORKER_IDS)
def test_a_file_that_is_no_video_fails_its_batches_alike_on_every_worker_kind(root, tmp_path,
                                                                             workers):
    """Its clips fail the first batch and the next with the error of their lowest item,
    the same on every kind of worker, and the batches after them load."""
    shutil.copytree(root, tmp_path / "videos")
    (tmp_path / "videos" / "a" / "vp9.webm").write_bytes(b"not a video" * 100)
    folder = VideoFolder(tmp_path / "videos", ClipSampler(4, clips_per_video=2), size=SIZE)

    def outcomes(num_workers, worker_type):
        loader = DataLoader(folder, batch_size=3, seed=0, num_workers=num_workers,
                            worker_type=worker_type, collate_fn=ClipCollator("NTHWC"))
        it, seen = iter(loader), []
        for _ in range(len(loader)):
            try:
                clips, labels = next(it)
            except ValueError as exc:
                seen.append((type(exc), str(exc)))
            else:
                seen.append((clips.copy(), labels.tolist()))
        return seen

    expected, got = outcomes(0, "auto"), outcomes(*workers)
    assert [type(outcome[0]) for outcome in expected] == [type, type, np.ndarray]
    assert "vp9.webm" in expected[0][1] and expected[0] == expected[1]
    assert got[:2] == expected[:2]
    np.testing.assert_array_equal(got[2][0], expected[2][0])
    assert got[2][1] == expected[2][1]


@pytest.mark.parametrize("workers", WORKERS, ids=WORKER_IDS)
def test_clips_of_a_file_that_is_no_video_are_skipped_alike_on_every_worker_kind(root, tmp_path,
                                                                               workers):
    """With on_error="skip" the first batch (shared out among the workers) and the next
    leave out the failing clips, as the direct path does: no slot is left unwritten."""
    shutil.copytree(root, tmp_path / "videos")
    (tmp_path / "videos" / "a" / "vp9.webm").write_bytes(b"not a video" * 100)
    folder = VideoFolder(tmp_path / "videos", ClipSampler(4, clips_per_video=2), size=SIZE)

    def batches(num_workers, worker_type):
        loader = DataLoader(folder, batch_size=3, seed=0, num_workers=num_workers,
                            worker_type=worker_type, collate_fn=ClipCollator("NTHWC"),
                            on_error="skip")
        return [(clips.copy(), labels.tolist()) for clips, labels in loader]

    expected, got = batches(0, "auto"), batches(*workers)
    assert [labels for _, labels in expected] == [[0, 0], [1, 1], [1, 1]]   # items 2, 3 left out
    assert len(got) == len(expected)
    for (clips, labels), (reference, reference_labels) in zip(got, expected, strict=True):
        np.testing.assert_array_equal(clips, reference)
        assert labels == reference_labels
