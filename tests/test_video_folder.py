"""VideoFolder and ClipSampler: the clips chosen, on every worker kind, resumed."""

import json
import shutil

import numpy as np
import pytest

from dataloader import ClipSampler, DataLoader, VideoFolder

# PyAV, the reference (not installed beside a free-threaded build).
av = pytest.importorskip("av")

WORKERS = [(0, "auto"), (2, "thread"), (2, "process")]
WORKER_IDS = ["direct", "threads", "processes"]
SIZE = (48, 80)


@pytest.fixture(scope="module")
def root(media, tmp_path_factory):
    """Two classes of two videos each (75 frames of 120x208)."""
    root = tmp_path_factory.mktemp("videos")
    for name, videos in {"a": ["h264_bframes.mp4", "vp9.webm"],
                         "b": ["hevc.mkv", "vfr.mkv"]}.items():
        (root / name).mkdir()
        for video in videos:
            shutil.copy(media[video], root / name / video)
    (root / "b" / "notes.txt").write_text("not a video")
    return root


def pyav_frames(path, numbers):
    """Frames ``numbers`` of a video as PyAV decodes and resizes them."""
    with av.open(str(path)) as container:
        frames = list(container.decode(video=0))
    return np.stack([frames[i].reformat(width=SIZE[1], height=SIZE[0], format="rgb24")
                     .to_ndarray() for i in numbers])


def test_the_folder_lists_videos_by_class(root):
    folder = VideoFolder(root, ClipSampler(4, clips_per_video=3), size=SIZE)
    assert folder.classes == ["a", "b"] and len(folder) == 12
    assert [(path.rsplit("/", 1)[1], label) for path, label in folder.samples] == [
        ("h264_bframes.mp4", 0), ("vp9.webm", 0), ("hevc.mkv", 1), ("vfr.mkv", 1)]


def test_evenly_spaced_clips_are_pyavs_frames_at_those_places(root):
    # 75 frames, clips spanning 7: 69 possible starts, three parts of 23 -> 11, 34, 57.
    folder = VideoFolder(root, ClipSampler(4, stride=2, clips_per_video=3, random=False),
                         size=SIZE)
    for index, first in enumerate([11, 34, 57] * 4):
        clip, label = folder[index]
        path, expected_label = folder.samples[index // 3]
        assert label == expected_label and clip.shape == (4, *SIZE, 3)
        np.testing.assert_array_equal(clip, pyav_frames(path, range(first, first + 8, 2)))


def test_a_video_shorter_than_a_clip_repeats_its_last_frame(root):
    folder = VideoFolder(root, ClipSampler(40, stride=2, random=False), size=SIZE)
    clip, _ = folder[0]
    expected = np.minimum(np.arange(0, 80, 2), 74)
    np.testing.assert_array_equal(clip, pyav_frames(folder.samples[0][0], expected))


def clips_of(loader):
    """Every epoch's clips and labels, each batch dropped before the next."""
    clips, labels = [], []
    for batch, targets in loader:
        clips.append(batch.copy())
        labels.append(np.asarray(targets))
    return np.concatenate(clips), np.concatenate(labels)


@pytest.mark.parametrize("workers", WORKERS, ids=WORKER_IDS)
def test_random_clips_follow_the_seed_on_every_worker_kind(root, workers):
    num_workers, worker_type = workers
    folder = VideoFolder(root, ClipSampler(4, stride=3, clips_per_video=2), size=SIZE)

    def loader(seed):
        return DataLoader(folder, batch_size=3, shuffle=True, seed=seed,
                          num_workers=num_workers, worker_type=worker_type)

    direct = DataLoader(folder, batch_size=3, shuffle=True, seed=7)
    expected = [clips_of(direct), clips_of(direct)]   # epochs 0 and 1
    same = loader(7)
    for epoch in range(2):
        clips, labels = clips_of(same)
        assert clips.shape == (8, 4, *SIZE, 3)
        np.testing.assert_array_equal(clips, expected[epoch][0])
        np.testing.assert_array_equal(labels, expected[epoch][1])
    assert not np.array_equal(expected[0][0], expected[1][0])   # each epoch draws anew
    assert not np.array_equal(clips_of(loader(8))[0], expected[0][0])


@pytest.mark.parametrize("workers", WORKERS, ids=WORKER_IDS)
def test_a_resumed_loader_repeats_the_clips_it_would_have_given(root, workers):
    num_workers, worker_type = workers
    folder = VideoFolder(root, ClipSampler(3, stride=4, clips_per_video=3), size=SIZE)

    def make():
        return DataLoader(folder, batch_size=2, shuffle=True, seed=3, num_workers=num_workers,
                          worker_type=worker_type)

    whole = make()
    epochs = [[batch.copy() for batch, _ in whole] for _ in range(2)]
    loader = make()
    it = iter(loader)
    for step in range(4):   # several steps, then saved and resumed twice
        np.testing.assert_array_equal(next(it)[0], epochs[0][step])
        if step in (1, 3):
            state = json.loads(json.dumps(loader.state_dict()))
            loader = make()
            loader.load_state_dict(state)
            it = iter(loader)
    rest = [batch.copy() for batch, _ in it]
    for got, expected in zip(rest, epochs[0][4:], strict=True):
        np.testing.assert_array_equal(got, expected)
    for got, expected in zip((batch for batch, _ in loader), epochs[1], strict=True):
        np.testing.assert_array_equal(got, expected)


def test_bad_arguments_raise_errors_naming_them(root, tmp_path):
    with pytest.raises(ValueError, match="num_frames"):
        ClipSampler(0)
    with pytest.raises(TypeError, match="random must be a bool"):
        ClipSampler(4, random="yes")
    with pytest.raises(TypeError, match="sampler must be a ClipSampler"):
        VideoFolder(root, 16)
    with pytest.raises(FileNotFoundError, match="video folder not found"):
        VideoFolder(tmp_path / "missing", ClipSampler(4))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no videos"):
        VideoFolder(tmp_path, ClipSampler(4))
    with pytest.raises(IndexError, match="index 12 is out of range for 12 clips"):
        VideoFolder(root, ClipSampler(4, clips_per_video=3))[12]
