"""Image kernel benchmark: decode, resize and decode+resize, ours against others.

Measures the time per image of ``dataloader.kernels`` against Pillow (and
simplejpeg and OpenCV when installed) for a 500x375 quality-90 JPEG, a
1024x768 PNG and a resize to 224x224, with one thread and with two threads
(a ThreadPoolExecutor over many images; the scaling ratio is the two-thread
throughput over the one-thread throughput).  Prints a table and writes
``benchmarks/results/kernels.json``.

Run: ``.venv/bin/python benchmarks/kernels.py [--quick]``
"""

import argparse
import io
import json
import os
import platform
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from PIL import Image as PILImage

import dataloader
from dataloader import kernels
from dataloader._images.samples import synthetic_image

try:
    import simplejpeg
except ImportError:
    simplejpeg = None
try:
    import cv2
except ImportError:
    cv2 = None

RESULTS = Path(__file__).parent / "results" / "kernels.json"
SIZE = (224, 224)


def photo(height, width):
    """A real photograph scaled to (height, width) when scikit-image is installed."""
    try:
        from skimage import data

        source = PILImage.fromarray(data.chelsea()).convert("RGB")
        return np.asarray(source.resize((width, height), PILImage.Resampling.LANCZOS)), "photo"
    except ImportError:
        return synthetic_image(height, width), "synthetic"


def encoded(array, fmt, **options):
    buffer = io.BytesIO()
    PILImage.fromarray(array).save(buffer, fmt, **options)
    return buffer.getvalue()


def candidates(jpeg, png, pixels):
    """{operation: {library: (function, argument)}}; every function takes one argument."""
    pil_pixels = PILImage.fromarray(pixels)

    def pil_decode(data):
        with PILImage.open(io.BytesIO(data)) as image:
            return np.asarray(image.convert("RGB"))

    def pil_decode_resize(data):
        with PILImage.open(io.BytesIO(data)) as image:
            return np.asarray(image.convert("RGB").resize(SIZE[::-1], PILImage.Resampling.BILINEAR))

    ops = {
        "decode JPEG 500x375": {
            "dataloader": (kernels.decode, jpeg),
            "Pillow": (pil_decode, jpeg),
        },
        "decode PNG 1024x768": {
            "dataloader": (kernels.decode, png),
            "Pillow": (pil_decode, png),
        },
        "resize 500x375 -> 224x224 (bilinear, antialiased)": {
            "dataloader": (lambda a: kernels.resize(a, SIZE), pixels),
            "Pillow": (lambda im: im.resize(SIZE[::-1], PILImage.Resampling.BILINEAR), pil_pixels),
        },
        "decode JPEG + resize to 224x224": {
            "dataloader": (lambda d: kernels.resize(kernels.decode(d), SIZE), jpeg),
            "Pillow": (pil_decode_resize, jpeg),
        },
    }
    if simplejpeg is not None:
        ops["decode JPEG 500x375"]["simplejpeg"] = (simplejpeg.decode_jpeg, jpeg)
        ops["decode JPEG + resize to 224x224"]["simplejpeg + Pillow"] = (
            lambda d: np.asarray(PILImage.fromarray(simplejpeg.decode_jpeg(d)).resize(
                SIZE[::-1], PILImage.Resampling.BILINEAR)), jpeg)
    if cv2 is not None:
        def cv_decode(data):
            return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)

        ops["decode JPEG 500x375"]["OpenCV"] = (cv_decode, jpeg)
        ops["decode PNG 1024x768"]["OpenCV"] = (cv_decode, png)
        ops["resize 500x375 -> 224x224 (bilinear, antialiased)"]["OpenCV (INTER_AREA)"] = (
            lambda a: cv2.resize(a, SIZE[::-1], interpolation=cv2.INTER_AREA), pixels)
        ops["decode JPEG + resize to 224x224"]["OpenCV (INTER_AREA)"] = (
            lambda d: cv2.resize(cv_decode(d), SIZE[::-1], interpolation=cv2.INTER_AREA), jpeg)
    return ops


def per_image_seconds(function, argument, count, repeats):
    """Seconds per image on one thread and on two, each the best of ``repeats`` runs.

    The two are measured alternately, in short runs, so that both see the same
    conditions on a shared machine and the best runs are the least disturbed.
    """
    items = [argument] * count
    best = {1: float("inf"), 2: float("inf")}
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(function, items[:4]))   # warm up both threads
        for _ in range(repeats):
            start = time.perf_counter()
            for item in items:
                function(item)
            best[1] = min(best[1], (time.perf_counter() - start) / count)
            start = time.perf_counter()
            list(pool.map(function, items, chunksize=count // 2))
            best[2] = min(best[2], (time.perf_counter() - start) / count)
    return best[1], best[2]


def versions():
    found = {"python": platform.python_version(), "numpy": np.__version__,
             "Pillow": PILImage.__version__, "dataloader": dataloader.__version__}
    if simplejpeg is not None:
        found["simplejpeg"] = simplejpeg.__version__
    if cv2 is not None:
        found["OpenCV"] = cv2.__version__
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    args = parser.parse_args()
    count, repeats = (16, 5) if args.quick else (24, 25)
    if cv2 is not None:
        cv2.setNumThreads(1)   # one thread per call: the pool provides the parallelism

    pixels, source = photo(375, 500)
    jpeg = encoded(pixels, "JPEG", quality=90)
    png_pixels, _ = photo(768, 1024)
    png = encoded(png_pixels, "PNG")
    results = []
    for operation, libraries in candidates(jpeg, png, pixels).items():
        for library, (function, argument) in libraries.items():
            one, two = per_image_seconds(function, argument, count, repeats)
            results.append({"operation": operation, "library": library,
                            "ms_per_image_1_thread": one * 1e3,
                            "ms_per_image_2_threads": two * 1e3,
                            "thread_scaling": one / two})
    for row in results:
        pillow = next(r for r in results
                      if r["operation"] == row["operation"] and r["library"] == "Pillow")
        row["speedup_vs_pillow"] = pillow["ms_per_image_1_thread"] / row["ms_per_image_1_thread"]

    info = {"versions": versions(), "cpus": os.cpu_count(), "image_source": source,
            "jpeg_bytes": len(jpeg), "png_bytes": len(png), "results": results}
    print(" ".join(f"{k} {v}" for k, v in info["versions"].items()),
          f"| {info['cpus']} CPUs | {source} image")
    header = f"{'operation':52} {'library':22} {'1 thread':>10} {'2 threads':>10} " \
             f"{'scaling':>8} {'vs Pillow':>9}"
    print(header)
    print("-" * len(header))
    for row in results:
        print(f"{row['operation']:52} {row['library']:22} "
              f"{row['ms_per_image_1_thread']:8.3f}ms {row['ms_per_image_2_threads']:8.3f}ms "
              f"{row['thread_scaling']:7.2f}x {row['speedup_vs_pillow']:8.2f}x")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(info, indent=2))
    print(f"written {RESULTS}")


if __name__ == "__main__":
    main()
