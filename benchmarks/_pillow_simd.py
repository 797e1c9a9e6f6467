"""Runs the Pillow operations of ``kernels.py`` under Pillow-SIMD, in its own environment.

Started by ``kernels.py`` with the Pillow-SIMD environment's interpreter
(``make pillow-simd`` creates it), in one of two ways:

- ``python _pillow_simd.py INPUTS.npz COUNT``: the operations of
  ``_pillow_ops.py``; each answer is the milliseconds per image on one
  thread and on two;
- ``python _pillow_simd.py --pillow-perf INPUTS.npz CROPS``: the operations
  of ``_pillow_perf.py`` on the image and the photographs (their paths)
  INPUTS.npz holds, the first CROPS of them cropped; each answer is the
  milliseconds per item on one thread.

It prints the Pillow-SIMD version as a JSON line, then answers each request
line ``REPEATS<tab>OPERATION`` on stdin with a JSON line. Asking one
operation at a time lets ``kernels.py`` alternate between its own
measurements and these, so that both see the same load on a shared machine.
"""

import json
import sys
from pathlib import Path

import numpy as np
from _common import one_thread_seconds, per_image_seconds
from _pillow_ops import crop_windows, pillow_candidates
from _pillow_perf import inputs, operations, pillow_function, pillow_items
from PIL import Image as PILImage


def pillow_ops_answers(path, count):
    """{operation: function of the repeats giving the answer} of _pillow_ops.py's set."""
    with np.load(path) as data:
        jpeg, png = data["jpeg"].tobytes(), data["png"].tobytes()
        pixels = data["pixels"]
    ops = pillow_candidates(jpeg, png, pixels, crop_windows(*pixels.shape[:2], count))

    def answer(function, items, repeats):
        one, two = per_image_seconds(function, (items * count)[:max(count, len(items))], repeats)
        return [one * 1e3, two * 1e3]

    return {name: lambda repeats, entry=entry: answer(*entry, repeats)
            for name, entry in ops.items()}


def pillow_perf_answers(path, crop_count):
    """{operation: function of the repeats giving the answer} of _pillow_perf.py's set."""
    with np.load(path) as saved:
        image, photos = saved["image"], [Path(name) for name in saved["photos"]]
    data = inputs(image, photos, crop_count)
    answers = {}
    for op in operations():
        function, items = pillow_function(op), pillow_items(op.source, data[op.source])
        answers[op.name] = lambda repeats, f=function, items=items: (
            one_thread_seconds(f, items, repeats) * 1e3)
    return answers


def main() -> None:
    if sys.argv[1] == "--pillow-perf":
        answers = pillow_perf_answers(sys.argv[2], int(sys.argv[3]))
    else:
        answers = pillow_ops_answers(sys.argv[1], int(sys.argv[2]))
    print(json.dumps({"version": PILImage.__version__}), flush=True)
    for line in sys.stdin:
        repeats, operation = line.rstrip("\n").split("\t")
        print(json.dumps(answers[operation](int(repeats))), flush=True)


if __name__ == "__main__":
    main()
