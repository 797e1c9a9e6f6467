"""Runs the Pillow operations of ``kernels.py`` under Pillow-SIMD, in its own environment.

Started by ``kernels.py`` with the Pillow-SIMD environment's interpreter
(``make pillow-simd`` creates it): ``python _pillow_simd.py INPUTS.npz
COUNT REPEATS``. Prints one JSON object: the Pillow-SIMD version and, per
operation, the milliseconds per image on one thread and on two.
"""

import json
import sys

import numpy as np
from _common import per_image_seconds
from _pillow_ops import crops, pillow_candidates
from PIL import Image as PILImage


def main() -> None:
    path, count, repeats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with np.load(path) as inputs:
        jpeg, png = inputs["jpeg"].tobytes(), inputs["png"].tobytes()
        pixels = inputs["pixels"]
    results = {}
    for operation, (function, items) in pillow_candidates(
            jpeg, png, pixels, crops(pixels, count)).items():
        one, two = per_image_seconds(function, (items * count)[:max(count, len(items))], repeats)
        results[operation] = [one * 1e3, two * 1e3]
    print(json.dumps({"version": PILImage.__version__, "results": results}))


if __name__ == "__main__":
    main()
