"""A clip transform's first crop done at decode, against the chain it stands for and PyAV."""

import fractions
import json
import re
import shutil

import numpy as np
import pytest

from dataloader import ClipCollator, ClipSampler, DataLoader, VideoFolder
from dataloader._images.chains import compile_chain
from dataloader._media.clips import clip_seed
from dataloader._media.video import decode_video, source_box
from dataloader.transforms import (
    CenterCrop,
    ColorJitter,
    Compose,
    Crop,
    RandomCrop,
    RandomHFlip,
    RandomResizedCrop,
    Resize,
)

# PyAV, the reference (not installed beside a free-threaded build).
av = pytest.importorskip("av")

NAMES = ["h264_bframes.mp4", "vp9.webm", "hevc.mkv", "vfr.mkv"]
WORKERS = [(0, "auto"), (2, "thread"), (2, "process")]
WORKER_IDS = ["direct", "threads", "processes"]
PYAV_FILTERS = {"nearest": "POINT", "bilinear": "BILINEAR", "bicubic": "BICUBIC"}
# The 75 frames of 120x208, three evenly spaced clips of 4 frames 2 apart.
FIRST_FRAMES = [11, 34, 57]


@pytest.fixture(scope="module")
def root(media, tmp_path_factory):
    root = tmp_path_factory.mktemp("videos")
    for label, names in {"a": NAMES[:2], "b": NAMES[2:]}.items():
        (root / label).mkdir()
        for name in names:
            shutil.copy(media[name], root / label / name)
    return root


def pyav_frames(path):
    with av.open(str(path)) as container:
        return list(container.decode(video=0))


def pyav_crop_resize(frame, box, size, interpolation="bilinear"):
    """``frame`` cut to ``box`` by FFmpeg's crop filter (its start on the chroma grid,
    as the crop filter places a subsampled window) and resized by PyAV's reformat."""
    top, left, height, width = box
    graph = av.filter.Graph()
    source = graph.add_buffer(width=frame.width, height=frame.height, format=frame.format,
                              time_base=fractions.Fraction(1, 1000))
    crop = graph.add("crop", f"w={width}:h={height}:x={left & ~1}:y={top & ~1}:exact=1")
    sink = graph.add("buffersink")
    source.link_to(crop)
    crop.link_to(sink)
    graph.configure()
    graph.push(frame)
    return graph.pull().reformat(width=size[1], height=size[0], format="rgb24",
                                 interpolation=PYAV_FILTERS[interpolation]).to_ndarray()


CHAINS = {
    "resized_crop": [RandomResizedCrop((40, 56)), RandomHFlip(), ColorJitter(0.4, 0.4)],
    "resized_crop_bicubic": [RandomResizedCrop(24, scale=(0.2, 0.6), interpolation="bicubic")],
    "random_crop": [RandomCrop((50, 70)), RandomHFlip()],
    "center_crop": [CenterCrop((61, 99))],
    "crop": [Crop(3, 5, 40, 41), RandomHFlip(p=0.5)],
}


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_the_window_and_the_rest_of_the_chain_are_the_whole_chains_draws(name):
    first, *others = CHAINS[name]
    chain = compile_chain(Compose([first, *others]))
    rest = compile_chain(Compose(others)) if others else None
    rng = np.random.default_rng(1)
    for height, width in [(120, 208), (77, 61)]:
        image = rng.integers(0, 256, (height, width, 3), np.uint8)
        for seed in [0, 1, 2**63 + 5, *rng.integers(0, 2**62, 10).tolist()]:
            try:
                whole = np.asarray(chain.apply(image, seed))
            except ValueError as error:   # a RandomCrop larger than the image
                with pytest.raises(ValueError, match=re.escape(str(error))):
                    chain.lead_window(height, width, 3, seed)
                continue
            window = chain.lead_window(height, width, 3, seed)
            if window is None:   # a CenterCrop larger than the image pads: left to the chain
                assert (height, width, name) == (77, 61, "center_crop")
                continue
            top, left, box_h, box_w, out_h, out_w, filter_code, rest_seed = window
            cut = [Crop(top, left, box_h, box_w)]
            if filter_code >= 0:
                cut.append(Resize((out_h, out_w), interpolation=first.interpolation))
            part = np.asarray(compile_chain(Compose(cut)).apply(image, 0))
            if rest is not None:
                part = np.asarray(rest.apply(part, rest_seed))
            np.testing.assert_array_equal(part, whole, err_msg=f"seed {seed}")


@pytest.mark.parametrize("interpolation", ["bilinear", "bicubic"])
@pytest.mark.parametrize("size", [None, (90, 150)], ids=["stream_size", "resized"])
def test_fused_clips_are_pyavs_frames_cropped_then_resized(root, size, interpolation):
    crop = RandomResizedCrop((40, 56), interpolation=interpolation)
    folder = VideoFolder(root, ClipSampler(4, stride=2, clips_per_video=3, random=False),
                         size=size, transform=crop)
    chain = compile_chain(crop)
    # Seed 0's first epoch (as folder[i] outside a loader): a video's three clips a batch.
    loader = DataLoader(folder, batch_size=3, seed=0, num_workers=2, worker_type="thread",
                        collate_fn=ClipCollator("NTHWC"))
    for video, ((path, label), (clips, targets)) in enumerate(
            zip(folder.samples, loader, strict=True)):
        frames = pyav_frames(path)
        stream_size = (frames[0].height, frames[0].width)
        frame_size = stream_size if size is None else size
        assert targets.tolist() == [label] * 3 and clips.shape == (3, 4, 40, 56, 3)
        for which, first in enumerate(FIRST_FRAMES):
            index = video * 3 + which
            clip = clips[which]
            np.testing.assert_array_equal(clip, folder[index][0])   # outside a loader
            window = chain.lead_window(*frame_size, 3, clip_seed(0, 0, index))
            box = source_box(window[:4], frame_size, stream_size)
            expected = np.stack([pyav_crop_resize(frames[k], box, (40, 56), interpolation)
                                 for k in range(first, first + 8, 2)])
            np.testing.assert_array_equal(clip, expected, err_msg=f"{path} clip {which}")


def test_a_crop_without_resize_is_pyavs_frame_cut_at_the_chroma_grid(root):
    folder = VideoFolder(root, ClipSampler(4, stride=2, clips_per_video=3, random=False),
                         transform=Compose([RandomCrop((50, 71))]))
    path = folder.samples[0][0]
    frames = pyav_frames(path)
    rgb = np.stack([frame.to_ndarray(format="rgb24") for frame in frames])
    # Where the transform alone puts the window: a frame whose pixels are their coordinates.
    rows, cols = np.indices(rgb.shape[1:3])
    probe = np.stack([rows, cols, np.zeros_like(rows)], axis=-1).astype(np.uint8)[None]
    odd = 0
    for which, first in enumerate(FIRST_FRAMES):
        seed = clip_seed(0, 0, which)
        top, left = folder.transform.transform.apply(probe, seed)[0, 0, 0, :2].tolist()
        odd += top % 2 + left % 2
        top, left = top & ~1, left & ~1
        np.testing.assert_array_equal(folder[which][0],
                                      rgb[first:first + 8:2, top:top + 50, left:left + 71])
    assert odd > 0   # some window was moved to the chroma grid


def test_decode_videos_crop_starts_on_the_chroma_grid(media):
    path = media["h264_bframes.mp4"]
    rgb = decode_video(path, [9])
    for top, left, width in [(11, 23, 101), (10, 22, 100), (1, 1, 207)]:
        cut = rgb[:, top & ~1:(top & ~1) + 64, left & ~1:(left & ~1) + width]
        np.testing.assert_array_equal(decode_video(path, [9], crop=(top, left, 64, width)), cut)


def test_a_window_past_the_frame_is_left_to_the_chain(root):
    # CenterCrop larger than the 120x208 frames pads: the chain does it on whole frames.
    transform = Compose([CenterCrop((130, 100)), RandomHFlip()])
    folder = VideoFolder(root, ClipSampler(4, stride=2, random=False), transform=transform)
    whole = decode_video(folder.samples[0][0], range(34, 42, 2))   # the middle clip
    expected = np.asarray(folder.transform.transform.apply(whole, clip_seed(0, 0, 0)))
    np.testing.assert_array_equal(folder[0][0], expected)
    assert (expected[:, :5] == 0).all()


def epochs_of(loader, epochs=2):
    """Each epoch's batches, as a training loop takes them: each dropped before the next."""
    result = []
    for _ in range(epochs):
        batches = []
        for clips, labels in loader:
            batches.append((clips.copy(), np.asarray(labels).copy()))
            del clips, labels
        result.append(batches)
    return result


@pytest.mark.parametrize("layout", ["NTCHW", "NTHWC", None])
@pytest.mark.parametrize("workers", WORKERS, ids=WORKER_IDS)
def test_fused_clips_follow_the_seed_on_every_worker_kind_and_resume(root, workers, layout):
    num_workers, worker_type = workers
    transform = Compose([RandomResizedCrop(32), RandomHFlip()])
    folder = VideoFolder(root, ClipSampler(4, stride=3, clips_per_video=3), transform=transform)
    collate = None if layout is None else ClipCollator(layout)

    def make(**kwargs):
        return DataLoader(folder, batch_size=4, shuffle=True, seed=11, collate_fn=collate,
                          **kwargs)

    # The direct loader's clips (each checked against PyAV's above) are the reference.
    expected = epochs_of(make())
    got = epochs_of(make(num_workers=num_workers, worker_type=worker_type))
    for epoch in range(2):
        for (clips, labels), (want, want_labels) in zip(got[epoch], expected[epoch], strict=True):
            shape = (4, 3, 32, 32) if layout == "NTCHW" else (4, 32, 32, 3)
            assert clips.shape[1:] == shape
            np.testing.assert_array_equal(clips, want)
            np.testing.assert_array_equal(labels, want_labels)
    assert not np.array_equal(expected[0][0][0], expected[1][0][0])   # a new draw each epoch

    # Saved after two batches, resumed twice: the same clips follow.
    loader = make(num_workers=num_workers, worker_type=worker_type)
    it = iter(loader)
    for step in range(3):
        np.testing.assert_array_equal(next(it)[0], expected[0][step][0])
        if step in (0, 1):
            state = json.loads(json.dumps(loader.state_dict()))
            loader = make(num_workers=num_workers, worker_type=worker_type)
            loader.load_state_dict(state)
            it = iter(loader)
    assert [batch for batch, _ in it] == []
