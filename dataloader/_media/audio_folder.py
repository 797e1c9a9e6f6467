"""``AudioFolder``: audio files in one subfolder per class, read as windows of samples.

A :class:`WindowSampler` says which windows: ``windows_per_file`` windows
of ``seconds`` from each file, at random places (training) or evenly
spaced (evaluation). As ``VideoFolder`` does, the folder is a
``TransformingDataset`` whose window decoder the loader binds to its seed
and each epoch (``_loading/plugins.py``), so a random window is a function
of ``(seed, epoch, index)``: the same whichever worker decodes it,
different each epoch, and repeated exactly by a resumed epoch.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np

from dataloader._datasets.class_folders import scan_class_folders
from dataloader._images.arguments import check_bool, check_int, check_real
from dataloader._media.audio import MAX_CHANNELS, MAX_SAMPLE_RATE
from dataloader._media.info import AUDIO_EXTENSIONS
from dataloader._media.source import MediaSource, open_media
from dataloader._sampling.seeding import item_seed

__all__ = ["AudioFolder", "WindowSampler", "decode_window"]

# The longest window, in seconds (a day): beyond it a window is a mistake.
MAX_WINDOW_SECONDS = 86_400.0


@dataclasses.dataclass(frozen=True)
class WindowSampler:
    """Which windows an :class:`AudioFolder` reads from each file.

    Parameters
    ----------
    seconds : float
        The length of a window.
    windows_per_file : int
        Windows read from each file: the folder has this many items per file.
    random : bool
        True: each window starts at a random time, drawn from ``(seed, epoch,
        index)``; False: the windows of a file start evenly spaced, at the
        middles of ``windows_per_file`` equal parts of the possible starts.
        A file shorter than a window is padded with zeros at its end.

    Examples
    --------
    >>> from dataloader import WindowSampler
    >>> sampler = WindowSampler(1.0, windows_per_file=2, random=False)
    >>> [sampler.start(k, 0.0, duration=5.0) for k in range(2)]   # 4 s of possible starts
    [1.0, 3.0]
    """

    seconds: float
    windows_per_file: int = 1
    random: bool = True

    def __post_init__(self) -> None:
        seconds = check_real("seconds", self.seconds)
        if not 0 < seconds <= MAX_WINDOW_SECONDS:
            raise ValueError(f"seconds must be in (0, {MAX_WINDOW_SECONDS:g}], got {seconds}")
        check_int("windows_per_file", self.windows_per_file, 1, 1 << 20)
        check_bool("random", self.random)

    def place(self, which: int, draw: float) -> float:
        """Where window ``which`` (0 to windows_per_file - 1) of a file starts: 0 at the
        first possible start, 1 at the last; ``draw`` in [0, 1) places a random window."""
        return draw if self.random else (which + 0.5) / self.windows_per_file

    def start(self, which: int, draw: float, duration: float) -> float:
        """When window ``which`` of a file of ``duration`` seconds starts."""
        return self.place(which, draw) * max(duration - self.seconds, 0.0)


def decode_window(source: MediaSource, start: float | None, seconds: float, sample_rate: int,
                  channels: int | None = None, draw: float = 0.0) -> np.ndarray:
    """``seconds`` of a file's audio from ``start`` as float32 ``(channels, n)``, ``n``
    being ``round(seconds * sample_rate)`` exactly (zeros after the end of the stream).

    ``start=None`` places the window at ``draw`` (0 to 1) of the possible starts,
    from the duration the file declares (read in the same opening).
    """
    count = round(seconds * sample_rate)
    with open_media(source) as media:
        index = media.best_stream("audio")
        if index < 0:
            raise ValueError(f"cannot decode audio {media.name}: the file has no audio stream")
        stream = media.streams()[index]
        if start is None:
            duration = stream["duration"]
            start = draw * max((duration or 0.0) - seconds, 0.0)
        wanted = stream["channels"] if channels is None else channels
        samples = media.decode_audio(index, sample_rate, wanted, start, start + seconds)
    if samples.shape[1] == count:
        return samples
    window = np.zeros((samples.shape[0], count), np.float32)
    kept = min(count, samples.shape[1])
    window[:, :kept] = samples[:, :kept]
    return window


@dataclasses.dataclass(frozen=True)
class WindowDecoder:
    """An :class:`AudioFolder`'s transform: ``(path, class_index)`` to ``(samples,
    class_index)``, bound to each epoch by the loader."""

    sampler: WindowSampler
    sample_rate: int
    channels: int | None = None

    def bind_epoch(self, seed: int, epoch: int):
        sampler = self.sampler

        def decode(index: int, item: tuple[str, int]) -> tuple[np.ndarray, int]:
            path, target = item
            draw = np.random.default_rng(item_seed(seed, epoch, index)).random()
            place = sampler.place(index % sampler.windows_per_file, draw)
            return decode_window(path, None, sampler.seconds, self.sample_rate, self.channels,
                                 place), target

        return decode


class AudioFolder:
    """Audio files in one subfolder per class, as windows: items are ``(samples,
    class_index)`` with ``samples`` float32 ``(channels, n)``, ``n = round(seconds *
    sample_rate)``.

    Item ``i`` is window ``i % windows_per_file`` of file ``i // windows_per_file``
    (``samples`` lists the files). Each window is decoded and resampled by
    ``decode_audio`` (libswresample); a window past a file's end is padded
    with zeros. Batches of the default collation are ``(B, channels, n)``.
    Outside a loader, ``folder[i]`` is the window of seed 0 and epoch 0.

    Parameters
    ----------
    root : path
    sampler : WindowSampler
    sample_rate : int
        Samples per second of every window.
    channels : int, optional
        Channels of every window (1: mono, 2: stereo, ..., mixed as
        libswresample mixes); each file's own count by default.
    extensions : tuple of str
        File name suffixes (case-insensitive) that count as audio.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from dataloader import AudioFolder, DataLoader, WindowSampler
    >>> from dataloader._media.samples import sample_audio
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> for name in ("speech", "music"):
    ...     (root / name).mkdir()
    ...     path = sample_audio(root / name)
    >>> folder = AudioFolder(root, WindowSampler(0.5, windows_per_file=3), sample_rate=16000,
    ...                      channels=1)
    >>> len(folder), folder.classes
    (6, ['music', 'speech'])
    >>> windows, labels = next(iter(DataLoader(folder, batch_size=4, shuffle=True, seed=0)))
    >>> windows.shape, windows.dtype
    ((4, 1, 8000), dtype('float32'))
    """

    def __init__(self, root: str | os.PathLike, sampler: WindowSampler, *, sample_rate: int,
                 channels: int | None = None,
                 extensions: tuple[str, ...] = AUDIO_EXTENSIONS) -> None:
        if not isinstance(sampler, WindowSampler):
            raise TypeError(f"sampler must be a WindowSampler, got {type(sampler).__name__}")
        sample_rate = check_int("sample_rate", sample_rate, 1, MAX_SAMPLE_RATE)
        if channels is not None:
            channels = check_int("channels", channels, 1, MAX_CHANNELS)
        self.root = Path(root)
        found = scan_class_folders(self.root, extensions, "audio")
        self.classes, self.class_to_idx, self.samples = (
            found.classes, found.class_to_idx, found.samples)
        self.sampler = sampler
        self.transform = WindowDecoder(sampler, sample_rate, channels)

    def __len__(self) -> int:
        return len(self.samples) * self.sampler.windows_per_file

    def raw_item(self, index: int) -> tuple[str, int]:
        """Item ``index`` before the transform: its file's path and class index."""
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} is out of range for {len(self)} windows")
        return self.samples[index // self.sampler.windows_per_file]

    def __getitem__(self, index: int) -> tuple[np.ndarray, int]:
        return self.transform.bind_epoch(0, 0)(index, self.raw_item(index))

    def __repr__(self) -> str:
        return (f"AudioFolder(root={str(self.root)!r}, {len(self.samples)} files, "
                f"{len(self.classes)} classes, {self.sampler})")
