"""Random video clips: ours vs torch's DataLoader over PyAV, in one run.

Random 16-frame clips (every other frame) resized to 224x224, from 720p
H.264 files with B-frames (camera pans over real photographs, made by
``dataloader._media.samples`` into ``.cache/``), batches of 8, 2 workers:

* ours: ``VideoFolder`` with a random ``ClipSampler`` in our ``DataLoader``
  (worker threads; each clip decoded without the GIL, resized by libswscale
  at decode, the decoder's own threads off);
* the peer: a torch ``DataLoader`` (2 worker processes) over a dataset that
  does what a PyAV user writes: open, seek to the keyframe before the
  clip, decode to its first frame, keep every other frame, each
  ``reformat``-ed to 224x224 RGB, stacked (PyAV's own threading defaults);
* SPDL 0.8's thread pipeline (``_spdl_clips.py``, 2 decoding tasks), when
  an environment with ``spdl`` exists (``make spdl`` makes ``.venv-spdl``;
  its pins are not ours), else the row is left out.

Ours collates with ``ClipCollator("NTHWC")``: each clip decoded straight
into its slot of a pooled batch. Clips per second over the best of the
epochs after a warm-up one, the time to the first batch of a new loader,
and the CPU time per clip (all threads and worker processes), each the
best of ``--rounds`` rounds of the two loaders in turn. Then the
memory: the peak resident memory a fresh process of ours adds over an
epoch, per clip in flight (the batches being made or waiting, and the one
the consumer holds), against a clip's output bytes. Run ``python
benchmarks/video.py``; results, with the load average, go to
``benchmarks/results/video.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from dataloader import ClipCollator, ClipSampler, DataLoader, VideoFolder
from dataloader._cli.measure import print_table, write_json
from dataloader._media.samples import encode, pan_arguments, pattern_input, photographs
from dataloader.kernels import media_info

RESULTS = Path(__file__).parent / "results"
CACHE = Path(__file__).parent.parent / ".cache" / "bench-videos-photos"
SPDL_PYTHON = Path(__file__).parent.parent / ".venv-spdl" / "bin" / "python"
NUM_FRAMES, STRIDE, SIZE = 16, 2, 224
BATCH_SIZE, NUM_WORKERS, PREFETCH_FACTOR = 8, 2, 2


def make_videos(count: int, seconds: float) -> Path:
    """``count`` 720p H.264 videos in two class folders (kept in .cache/ once made), each
    a pan over another photograph (``testsrc2`` where none is installed)."""
    photos = photographs()
    for index in range(count):
        folder = CACHE / f"class_{index % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"video_{index}.mp4"
        source = (pan_arguments(photos[index % len(photos)], 720, 1280, 30, seconds) if photos
                  else pattern_input(720, 1280, 30, seconds))
        if not path.exists():
            encode([*source, "-c:v", "libx264", "-preset", "veryfast", "-bf", "3", "-g", "60",
                    "-pix_fmt", "yuv420p"], path)
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


def best(rounds: list[dict[str, float]]) -> dict[str, float]:
    """Each figure's best over the rounds: the one the machine's other work disturbed least."""
    return {"clips_per_s": max(r["clips_per_s"] for r in rounds),
            "first_batch_s": min(r["first_batch_s"] for r in rounds),
            "cpu_s_per_clip": min(r["cpu_s_per_clip"] for r in rounds)}


def our_loader(folder: VideoFolder) -> DataLoader:
    return DataLoader(folder, batch_size=BATCH_SIZE, shuffle=True, seed=0,
                      num_workers=NUM_WORKERS, worker_type="thread",
                      prefetch_factor=PREFETCH_FACTOR, collate_fn=ClipCollator("NTHWC"))


def crop_makes(root: Path, clips_per_video: int) -> dict:
    """``--crop``: random 224x224 crops (``RandomResizedCrop`` then ``RandomHFlip``) of the
    clips' 720p frames, done at decode (the folder's transform) and on decoded frames
    (the same chain as the loader's transform over whole decoded frames)."""
    from dataloader import ClipTransform
    from dataloader.transforms import Compose, RandomHFlip, RandomResizedCrop

    chain = Compose([RandomResizedCrop(SIZE), RandomHFlip()])
    sampler = ClipSampler(NUM_FRAMES, stride=STRIDE, clips_per_video=clips_per_video)
    fused = VideoFolder(root, sampler, transform=chain)
    whole = VideoFolder(root, sampler)

    def loader(folder: VideoFolder, transform: ClipTransform | None = None) -> DataLoader:
        return DataLoader(folder, batch_size=BATCH_SIZE, shuffle=True, seed=0,
                          num_workers=NUM_WORKERS, worker_type="thread",
                          prefetch_factor=PREFETCH_FACTOR, transform=transform,
                          collate_fn=ClipCollator("NTHWC"))

    return {"crop at decode": lambda: loader(fused),
            "crop of decoded frames": lambda: loader(whole, ClipTransform(chain))}


def spdl_row(folder: VideoFolder, clips_per_video: int, epochs: int) -> dict | None:
    """SPDL's figures from ``_spdl_clips.py`` in its own environment, or None without it."""
    if not SPDL_PYTHON.exists():
        print(f"no SPDL row: {SPDL_PYTHON} does not exist (make spdl)")
        return None
    videos = []
    for path, label in folder.samples:
        stream = next(s for s in media_info(path) if s.kind == "video")
        videos.append([path, label, stream.frames, stream.frame_rate])
    setup = {"videos": videos, "num_frames": NUM_FRAMES, "stride": STRIDE, "size": SIZE,
             "clips_per_video": clips_per_video, "batch_size": BATCH_SIZE,
             "workers": NUM_WORKERS, "epochs": epochs}
    with tempfile.NamedTemporaryFile("w", suffix=".json") as file:
        json.dump(setup, file)
        file.flush()
        done = subprocess.run([str(SPDL_PYTHON), str(Path(__file__).parent / "_spdl_clips.py"),
                               file.name], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def peak_memory(root: Path, clips_per_video: int) -> dict[str, float]:
    """One epoch of ours in a fresh process (``--memory-child``): its peak resident
    memory over what it held before the loader, per clip in flight."""
    done = subprocess.run([sys.executable, __file__, "--memory-child", str(root),
                           "--clips-per-video", str(clips_per_video)],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def memory_child(root: Path, clips_per_video: int) -> None:
    folder = VideoFolder(root, ClipSampler(NUM_FRAMES, stride=STRIDE,
                                           clips_per_video=clips_per_video), size=(SIZE, SIZE))
    folder[0]   # the libraries loaded and touched before the baseline
    gc.collect()
    before = _status_bytes("VmRSS")
    with open("/proc/self/clear_refs", "w") as file:   # the peak starts again from here
        file.write("5")
    for batch, _ in our_loader(folder):
        del batch
    peak = _status_bytes("VmHWM")
    in_flight = (NUM_WORKERS * PREFETCH_FACTOR + 1) * BATCH_SIZE
    clip_bytes = NUM_FRAMES * SIZE * SIZE * 3
    print(json.dumps({"peak_extra_bytes": peak - before, "clips_in_flight": in_flight,
                      "clip_bytes": clip_bytes,
                      "per_clip_over_clip_bytes": (peak - before) / in_flight / clip_bytes}))


def _status_bytes(field: str) -> int:
    """A memory figure of this process from /proc/self/status (Linux)."""
    with open("/proc/self/status") as file:
        for line in file:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--videos", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clips-per-video", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--crop", action="store_true",
                        help="also random crops, done at decode and on decoded frames")
    parser.add_argument("--memory-child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(args.memory_child, args.clips_per_video)
        return

    import torch.utils.data

    root = make_videos(args.videos, args.seconds)
    folder = VideoFolder(root, ClipSampler(NUM_FRAMES, stride=STRIDE,
                                           clips_per_video=args.clips_per_video),
                         size=(SIZE, SIZE))
    clips = len(folder)
    peer_dataset = PyAVClips(folder, args.clips_per_video)
    makes = {"ours": lambda: our_loader(folder),
             "torch_pyav": lambda: torch.utils.data.DataLoader(
                 peer_dataset, batch_size=BATCH_SIZE, shuffle=True, num_workers=NUM_WORKERS,
                 persistent_workers=True)}
    # Rounds in turn, so that both loaders see the same load on a shared machine.
    rounds = [{name: measure(make, clips, args.epochs) for name, make in makes.items()}
              for _ in range(args.rounds)]
    ours, peer = (best([round_[name] for round_ in rounds]) for name in makes)
    spdl = spdl_row(folder, args.clips_per_video, args.epochs)
    memory = peak_memory(root, args.clips_per_video)
    load = os.getloadavg()
    print(f"{clips} random clips of {NUM_FRAMES} frames (stride {STRIDE}) at {SIZE}x{SIZE} "
          f"from {args.videos} 720p H.264 videos, {NUM_WORKERS} workers; "
          f"load average {load[0]:.2f} {load[1]:.2f}")
    figures = ["clips_per_s", "first_batch_s", "cpu_s_per_clip"]
    rows = [["ours", *(ours[name] for name in figures)],
            ["torch + PyAV", *(peer[name] for name in figures)],
            ["ours / torch + PyAV", *(ours[name] / peer[name] for name in figures)]]
    if spdl is not None:
        rows += [[f"SPDL {spdl['spdl']}", *(spdl[name] for name in figures)],
                 ["ours / SPDL", *(ours[name] / spdl[name] for name in figures)]]
    print_table(["loader", "clips/s", "first batch s", "CPU s/clip"], rows)
    print(f"peak memory per clip in flight: {memory['per_clip_over_clip_bytes']:.2f}x the "
          f"clip's {memory['clip_bytes'] / 2**20:.1f} MiB ({memory['clips_in_flight']} clips in "
          f"flight, {memory['peak_extra_bytes'] / 2**20:.0f} MiB over the baseline)")
    crops = None
    if args.crop:
        crop_makes_ = crop_makes(root, args.clips_per_video)
        crop_rounds = [{name: measure(make, clips, args.epochs)
                        for name, make in crop_makes_.items()} for _ in range(args.rounds)]
        crops = {name: best([round_[name] for round_ in crop_rounds]) for name in crop_makes_}
        fused, whole = crops.values()
        print(f"random crops to {SIZE}x{SIZE} and flips; load average "
              f"{os.getloadavg()[0]:.2f}")
        print_table(["loader", "clips/s", "first batch s", "CPU s/clip"],
                    [[name, *(row[figure] for figure in figures)] for name, row in crops.items()]
                    + [["at decode / on frames", *(fused[f] / whole[f] for f in figures)]])
    write_json(RESULTS, "video", {"ours": ours, "torch_pyav": peer, "spdl": spdl,
                                  "memory": memory, "clips": clips, "crops": crops,
                                  "load_average": load})


if __name__ == "__main__":
    main()
