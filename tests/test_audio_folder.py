"""AudioFolder and WindowSampler: the windows chosen, on every worker kind, resumed."""

import json
import shutil

import numpy as np
import pytest

from dataloader import AudioFolder, DataLoader, WindowSampler
from dataloader.kernels import decode_audio

WORKERS = [(0, "auto"), (2, "thread"), (2, "process")]
WORKER_IDS = ["direct", "threads", "processes"]
RATE = 16000


@pytest.fixture(scope="module")
def root(media, tmp_path_factory):
    """Two classes: three 3-second files of two tones, in three codecs."""
    root = tmp_path_factory.mktemp("audio")
    for name, files in {"a": ["tones.m4a", "tones.wav"], "b": ["tones.ogg"]}.items():
        (root / name).mkdir()
        for file in files:
            shutil.copy(media[file], root / name / file)
    (root / "b" / "notes.txt").write_text("not audio")
    return root


def test_the_folder_lists_files_by_class(root):
    folder = AudioFolder(root, WindowSampler(0.5, windows_per_file=2), sample_rate=RATE)
    assert folder.classes == ["a", "b"] and len(folder) == 6
    assert [(path.rsplit("/", 1)[1], label) for path, label in folder.samples] == [
        ("tones.m4a", 0), ("tones.wav", 0), ("tones.ogg", 1)]


def test_evenly_spaced_windows_are_decode_audios_samples_there(root):
    # 3 s files, 1 s windows: 2 s of possible starts, three parts -> 1/3, 1, 5/3 s.
    folder = AudioFolder(root, WindowSampler(1.0, windows_per_file=3, random=False),
                         sample_rate=RATE, channels=1)
    for index in range(len(folder)):
        samples, label = folder[index]
        path, expected_label = folder.samples[index // 3]
        start = [1 / 3, 1.0, 5 / 3][index % 3]
        assert label == expected_label and samples.shape == (1, RATE)
        expected = decode_audio(path, sample_rate=RATE, channels=1, start=start, end=start + 1)
        np.testing.assert_array_equal(samples, expected[:, :RATE])


def test_a_file_shorter_than_a_window_is_padded_with_zeros(root):
    folder = AudioFolder(root, WindowSampler(4.0, random=False), sample_rate=8000)
    samples, _ = folder[1]   # tones.wav: 3 s of stereo
    assert samples.shape == (2, 32000)
    whole = decode_audio(folder.samples[1][0], sample_rate=8000)
    np.testing.assert_array_equal(samples[:, :whole.shape[1]], whole)
    assert not samples[:, whole.shape[1]:].any() and whole.shape[1] < 32000


def windows_of(loader):
    """An epoch's windows and labels, each batch dropped before the next."""
    windows, labels = [], []
    for batch, targets in loader:
        windows.append(np.array(batch))
        labels.append(np.asarray(targets))
    return np.concatenate(windows), np.concatenate(labels)


@pytest.mark.parametrize("workers", WORKERS, ids=WORKER_IDS)
def test_random_windows_follow_the_seed_on_every_worker_kind(root, workers):
    num_workers, worker_type = workers
    folder = AudioFolder(root, WindowSampler(0.25, windows_per_file=3), sample_rate=RATE,
                         channels=2)

    def loader(seed):
        return DataLoader(folder, batch_size=4, shuffle=True, seed=seed,
                          num_workers=num_workers, worker_type=worker_type)

    direct = DataLoader(folder, batch_size=4, shuffle=True, seed=5)
    expected = [windows_of(direct), windows_of(direct)]   # epochs 0 and 1
    same = loader(5)
    for epoch in range(2):
        windows, labels = windows_of(same)
        assert windows.shape == (9, 2, 4000) and windows.dtype == np.float32
        np.testing.assert_array_equal(windows, expected[epoch][0])
        np.testing.assert_array_equal(labels, expected[epoch][1])
    assert not np.array_equal(expected[0][0], expected[1][0])   # each epoch draws anew
    assert not np.array_equal(windows_of(loader(6))[0], expected[0][0])


@pytest.mark.parametrize("workers", WORKERS, ids=WORKER_IDS)
def test_a_resumed_loader_repeats_the_windows_it_would_have_given(root, workers):
    num_workers, worker_type = workers
    folder = AudioFolder(root, WindowSampler(0.2, windows_per_file=4), sample_rate=RATE,
                         channels=1)

    def make():
        return DataLoader(folder, batch_size=2, shuffle=True, seed=3, num_workers=num_workers,
                          worker_type=worker_type)

    whole = make()
    epochs = [[np.array(batch) for batch, _ in whole] for _ in range(2)]
    loader = make()
    it = iter(loader)
    for step in range(4):   # several steps, then saved and resumed twice
        np.testing.assert_array_equal(next(it)[0], epochs[0][step])
        if step in (1, 3):
            state = json.loads(json.dumps(loader.state_dict()))
            loader = make()
            loader.load_state_dict(state)
            it = iter(loader)
    for got, expected in zip((np.array(batch) for batch, _ in it), epochs[0][4:], strict=True):
        np.testing.assert_array_equal(got, expected)
    for got, expected in zip((batch for batch, _ in loader), epochs[1], strict=True):
        np.testing.assert_array_equal(got, expected)


def test_bad_arguments_raise_errors_naming_them(root, tmp_path):
    with pytest.raises(ValueError, match="seconds must be in"):
        WindowSampler(0)
    with pytest.raises(ValueError, match="windows_per_file"):
        WindowSampler(1.0, windows_per_file=0)
    with pytest.raises(TypeError, match="random must be a bool"):
        WindowSampler(1.0, random=1)
    with pytest.raises(TypeError, match="sampler must be a WindowSampler"):
        AudioFolder(root, 1.0, sample_rate=RATE)
    with pytest.raises(ValueError, match="sample_rate"):
        AudioFolder(root, WindowSampler(1.0), sample_rate=0)
    with pytest.raises(ValueError, match="channels"):
        AudioFolder(root, WindowSampler(1.0), sample_rate=RATE, channels=0)
    with pytest.raises(FileNotFoundError, match="audio folder not found"):
        AudioFolder(tmp_path / "missing", WindowSampler(1.0), sample_rate=RATE)
    with pytest.raises(IndexError, match="index 3 is out of range for 3 windows"):
        AudioFolder(root, WindowSampler(1.0), sample_rate=RATE)[3]
