"""Runs the Pillow operations of ``kernels.py`` under Pillow-SIMD, in its own environment.

Started by ``kernels.py`` with the Pillow-SIMD environment's interpreter
(``make pillow-simd`` creates it): ``python _pillow_simd.py INPUTS.npz
COUNT``. It prints the Pillow-SIMD version as a JSON line, then answers each
request line ``REPEATS<tab>OPERATION`` on stdin with a JSON line: the
milliseconds per image of that operation on one thread and on two. Asking
one operation at a time lets ``kernels.py`` alternate between its own
measurements and these, so that both see the same load on a shared machine.
"""

import json
import sys

import numpy as np
from _common import per_image_seconds
from _pillow_ops import crop_windows, pillow_candidates
from PIL import Image as PILImage


def main() -> None:
    path, count = sys.argv[1], int(sys.argv[2])
    with np.load(path) as inputs:
        jpeg, png = inputs["jpeg"].tobytes(), inputs["png"].tobytes()
        pixels = inputs["pixels"]
    operations = pillow_candidates(jpeg, png, pixels, crop_windows(*pixels.shape[:2], count))
    print(json.dumps({"version": PILImage.__version__}), flush=True)
    for line in sys.stdin:
        repeats, operation = line.rstrip("\n").split("\t")
        function, items = operations[operation]
        one, two = per_image_seconds(function, (items * count)[:max(count, len(items))],
                                     int(repeats))
        print(json.dumps([one * 1e3, two * 1e3]), flush=True)


if __name__ == "__main__":
    main()
