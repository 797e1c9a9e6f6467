"""The SPDL row of ``video.py``: the same random clips through SPDL's thread pipeline.

Started by ``video.py`` with the interpreter of an environment where
``spdl`` is installed (``.venv-spdl``, beside this repository's venv: its
pins differ from ours), as ``python _spdl_clips.py SETUP.json``. SETUP
holds the videos (path, label, frames, frame rate) and the clip, batch and
worker settings; the answer is one JSON line with ``clips_per_s``,
``first_batch_s`` and ``cpu_s_per_clip``, measured as ``video.py`` measures
the other loaders. Each clip is what an SPDL user writes: the packets of
its time window demuxed (from the keyframe before it), decoded, scaled to
the output size and converted to RGB by FFmpeg's filter graph, every
``stride``-th frame kept; ``concurrency`` decoding tasks on the pipeline's
thread pool, then batches of ``batch_size`` stacked.
"""

from __future__ import annotations

import json
import random
import resource
import sys
import time

import numpy as np
import spdl.io
from spdl.pipeline import PipelineBuilder


def cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime


def main() -> None:
    with open(sys.argv[1]) as file:
        setup = json.load(file)
    videos = setup["videos"]
    frames, stride, size = setup["num_frames"], setup["stride"], setup["size"]
    span = (frames - 1) * stride + 1
    filter_desc = spdl.io.get_video_filter_desc(scale_width=size, scale_height=size,
                                                scale_algo="bilinear", scale_mode=None,
                                                pix_fmt="rgb24")
    items = [video for video in videos for _ in range(setup["clips_per_video"])]

    def load_clip(video):
        path, label, count, rate = video
        first = random.randrange(count - span + 1)
        packets = spdl.io.demux_video(path, timestamp=(first / rate, (first + span) / rate))
        decoded = spdl.io.decode_packets(packets, filter_desc=filter_desc)
        clip = spdl.io.to_numpy(spdl.io.convert_frames(decoded))
        return clip[:span:stride], label

    def collate(batch):
        return np.stack([clip for clip, _ in batch]), np.array([label for _, label in batch])

    def make():
        order = random.sample(items, len(items))
        return (PipelineBuilder().add_source(order)
                .pipe(load_clip, concurrency=setup["workers"])
                .aggregate(setup["batch_size"]).pipe(collate).add_sink(2)
                .build(num_threads=setup["workers"]))

    def epoch() -> float:
        start = time.perf_counter()
        pipeline = make()
        with pipeline.auto_stop():
            for batch, _ in pipeline.get_iterator(timeout=600):
                del batch
        return len(items) / (time.perf_counter() - start)

    start = time.perf_counter()
    pipeline = make()
    with pipeline.auto_stop():
        next(iter(pipeline.get_iterator(timeout=600)))
        first_batch = time.perf_counter() - start
    cpu = cpu_seconds()
    epoch()   # warm-up, as the other loaders have
    rate = max(epoch() for _ in range(setup["epochs"]))
    per_clip = (cpu_seconds() - cpu) / (len(items) * (setup["epochs"] + 1))
    print(json.dumps({"clips_per_s": rate, "first_batch_s": first_batch,
                      "cpu_s_per_clip": per_clip, "spdl": getattr(spdl, "__version__", "unknown")}))


if __name__ == "__main__":
    main()
