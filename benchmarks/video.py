"""Random video clips: ours vs torch's DataLoader over PyAV, in one run.

Random 16-frame clips (every other frame) resized to 224x224, from 720p
H.264 files with B-frames (ffmpeg's moving ``testsrc2`` pattern, made by
``dataloader._media.samples`` into ``.cache/``), batches of 8, 2 workers:

* ours: ``VideoFolder`` with a random ``ClipSampler`` in our ``DataLoader``
  (worker threads; each clip decoded without the GIL, resized by libswscale
  at decode, the decoder's own threads off);
* the peer: a torch ``DataLoader`` (2 worker processes) over a dataset that
  does what a PyAV user writes: open, seek to the keyframe before the
  clip, decode to its first frame, keep every other frame, each
  ``reformat``-ed to 224x224 RGB, stacked (PyAV's own threading defaults).

Clips per second over the best of the epochs after a warm-up one, the
time to the first batch of a new loader, and the CPU time per clip (all
threads and worker processes). Run ``python benchmarks/video.py``;
results, with the load average, go to ``benchmarks/results/video.json``.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import resource
import time
from pathlib import Path

import numpy as np

from dataloader import ClipSampler, DataLoader, VideoFolder
from dataloader._cli.measure import print_table, write_json
from dataloader._media.samples import encode, pattern_input

RESULTS = Path(__file__).parent / "results"
CACHE = Path(__file__).parent.parent / ".cache" / "bench-videos"
NUM_FRAMES, STRIDE, SIZE = 16, 2, 224
BATCH_SIZE, NUM_WORKERS = 8, 2


def make_videos(count: int, seconds: float) -> Path:
    """``count`` 720p H.264 videos in two class folders (kept in .cache/ once made)."""
    for index in range(count):
        folder = CACHE / f"class_{index % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"video_{index}.mp4"
        if not path.exists():
            encode([*pattern_input(720, 1280, 30, seconds), "-c:v", "libx264", "-preset",
                    "veryfast", "-bf", "3", "-g", "60", "-pix_fmt", "yuv420p"], path)
    return CACHE


class PyAVClips:
    """The peer's dataset: random clips decoded and resized by PyAV."""

    def __init__(self, folder: VideoFolder, clips_per_video: int):
        import av

        self.samples = folder.samples
        self.clips_per_video = clips_per_video
        self.frames = []
        for path, _ in self.samples:
            with av.open(path) as container:
                self.frames.append(container.streams.video[0].frames)

    def __len__(self) -> int:
        return len(self.samples) * self.clips_per_video

    def __getitem__(self, index: int):
        import av
        import torch

        video = index // self.clips_per_video
        path, label = self.samples[video]
        span = (NUM_FRAMES - 1) * STRIDE + 1
        first = random.randrange(self.frames[video] - span + 1)
        with av.open(path) as container:
            stream = container.streams.video[0]
            rate = stream.average_rate
            target = int(first / rate / stream.time_base) + (stream.start_time or 0)
            container.seek(target, backward=True, stream=stream)
            kept = []
            for frame in container.decode(stream):
                if frame.pts < target:
                    continue
                kept.append(frame)
                if len(kept) == span:
                    break
        clip = np.stack([frame.reformat(width=SIZE, height=SIZE, format="rgb24").to_ndarray()
                         for frame in kept[::STRIDE]])
        return torch.from_numpy(clip), label


def epoch_rate(loader, clips: int) -> float:
    start = time.perf_counter()
    for batch, _ in loader:
        del batch
    return clips / (time.perf_counter() - start)


def first_batch_seconds(make) -> float:
    start = time.perf_counter()
    loader = make()
    next(iter(loader))
    seconds = time.perf_counter() - start
    if hasattr(loader, "close"):
        loader.close()
    return seconds


def cpu_seconds() -> float:
    """CPU time of this process's threads and of its finished child processes."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def measure(make, clips: int, epochs: int) -> dict[str, float]:
    """The best epoch's rate after a warm-up one, the first batch of a new loader,
    and the CPU time per clip over every epoch: the figure a loaded machine
    disturbs least (the peer's worker processes are ended first, to be counted)."""
    first = first_batch_seconds(make)
    cpu = cpu_seconds()
    loader = make()
    epoch_rate(loader, clips)   # warm-up: workers started, files in the page cache
    rate = max(epoch_rate(loader, clips) for _ in range(epochs))
    del loader
    gc.collect()
    return {"clips_per_s": rate, "first_batch_s": first,
            "cpu_s_per_clip": (cpu_seconds() - cpu) / (clips * (epochs + 1))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--videos", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clips-per-video", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()

    import torch.utils.data

    root = make_videos(args.videos, args.seconds)
    folder = VideoFolder(root, ClipSampler(NUM_FRAMES, stride=STRIDE,
                                           clips_per_video=args.clips_per_video),
                         size=(SIZE, SIZE))
    clips = len(folder)
    ours = measure(lambda: DataLoader(folder, batch_size=BATCH_SIZE, shuffle=True, seed=0,
                                      num_workers=NUM_WORKERS, worker_type="thread"),
                   clips, args.epochs)
    peer_dataset = PyAVClips(folder, args.clips_per_video)
    peer = measure(lambda: torch.utils.data.DataLoader(
        peer_dataset, batch_size=BATCH_SIZE, shuffle=True, num_workers=NUM_WORKERS,
        persistent_workers=True), clips, args.epochs)
    load = os.getloadavg()
    print(f"{clips} random clips of {NUM_FRAMES} frames (stride {STRIDE}) at {SIZE}x{SIZE} "
          f"from {args.videos} 720p H.264 videos, {NUM_WORKERS} workers; "
          f"load average {load[0]:.2f} {load[1]:.2f}")
    figures = ["clips_per_s", "first_batch_s", "cpu_s_per_clip"]
    print_table(["loader", "clips/s", "first batch s", "CPU s/clip"], [
        ["ours", *(ours[name] for name in figures)],
        ["torch + PyAV", *(peer[name] for name in figures)],
        ["ratio", *(ours[name] / peer[name] for name in figures)],
    ])
    write_json(RESULTS, "video", {"ours": ours, "torch_pyav": peer, "clips": clips,
                                  "load_average": load})


if __name__ == "__main__":
    main()
