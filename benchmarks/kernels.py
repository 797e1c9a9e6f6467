"""Image kernel benchmark: decode, resize and decode+resize, ours against others.

Measures the time per image of ``dataloader.kernels`` against Pillow,
Pillow-SIMD (in its own environment), simplejpeg and OpenCV (when installed)
for a 500x375 quality-90 JPEG, a 1024x768 PNG, a resize to 224x224 of the
whole 500x375 photograph and of crops drawn as RandomResizedCrop draws them
(ours exact, as Pillow, and fast, ``exact=False``, as Decode(exact=False)
chains resize),
with one thread and with two threads (a ThreadPoolExecutor over many images;
the scaling ratio is the two-thread throughput over the one-thread
throughput).  Decode followed by a crop (CenterCrop(224),
RandomResizedCrop(224), Resize(256) + CenterCrop(224)) is timed as a native
chain, which decodes only the window, against the same transforms applied
to the whole decoded image, in the same run.  Prints a table, our speed
against Pillow-SIMD and simplejpeg and the window decode's against the whole
decode, and writes ``benchmarks/results/kernels.json``.

``--float-tail`` runs only a focused comparison instead: chains ending in
``ToFloat(), Normalize(...), ToChw()`` after a resize, whose last resize pass
writes the normalised float32 CHW output itself, against the same chains
with ``ToHwc()`` before the tail (a no-op on an HWC image that keeps the tail
a separate pass over the uint8 image, as before the fusion), each item
written into its slot of a batch buffer as the loader's fused path does; in
the same run, alternating, with the load average before and after. It
writes ``benchmarks/results/float_tail.json``.

``--warps`` runs only the affine warp (``kernels.affine``, the kernel of
``RandomRotation`` and ``RandomAffine``) against Pillow's
``Image.transform(AFFINE)`` and ``Image.rotate`` on the same 500x375 RGB
photograph, nearest and bilinear, in the same run, alternating; it prints
our speed over Pillow's and writes ``benchmarks/results/warps.json``.

``--decode`` runs only the whole-image JPEG decode, ``kernels.decode`` against
simplejpeg, on the sample set's photographs (``sample_image_folder(40,
photographs="installed")``: Debian's wallpaper photographs when installed)
in paired rounds: each round decodes every photograph once with each
library, the order alternating, and times both by the thread's CPU time and
by wall time; it prints the median and quartiles of the per-round speed
ratio and writes ``benchmarks/results/decode.json``.

The default run ends with, and ``--pillow-perf`` runs only, the operations
of Pillow-SIMD's published benchmark (``_pillow_perf.py``: resizes of a
2560x1600 photograph with each filter, Gaussian blur (Pillow's box passes,
``kernels.gaussian_box_blur``), colour conversion,
transposes) and two cases of training pipelines (RandomResizedCrop-like
crops of real photographs resized to 224x224, and the JPEG decode of 300
photographs), ours against Pillow-SIMD (and simplejpeg for the decode), on
one thread (its CPU time), alternating between the processes, the best of
the rounds; it prints our speed over each peer's per operation and writes
``benchmarks/results/pillow_perf.json``.

Pillow-SIMD replaces Pillow, so it runs in a subprocess of the interpreter
given by ``--pillow-simd`` (default: ``$PILLOW_SIMD_PYTHON``, else
``.venv-pillow-simd/bin/python``, which ``make pillow-simd`` creates); it is
left out, with a notice, when there is none.

Run: ``.venv/bin/python benchmarks/kernels.py [--quick] [--rounds N] [--pillow-simd PYTHON]``
or ``.venv/bin/python benchmarks/kernels.py --float-tail [--rounds N]``
or ``.venv/bin/python benchmarks/kernels.py --warps [--rounds N]``
or ``.venv/bin/python benchmarks/kernels.py --decode [--rounds N]``
or ``.venv/bin/python benchmarks/kernels.py --pillow-perf [--rounds N] [--pillow-simd PYTHON]``
"""

import argparse
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import load_average, one_thread_seconds, per_image_seconds
from _pillow_ops import (
    DECODE_CENTER_CROP,
    DECODE_JPEG,
    DECODE_PNG,
    DECODE_RESIZE,
    DECODE_RESIZE_CENTER_CROP,
    DECODE_RESIZED_CROP,
    RESIZE,
    RESIZE_CROPS,
    SIZE,
    crop_windows,
    crops,
    pillow_candidates,
)
from _pillow_perf import TRANSPOSES, inputs, operations
from PIL import Image as PILImage

import dataloader
from dataloader import kernels
from dataloader._images.chains import compile_chain
from dataloader._images.samples import (
    INSTALLED_PHOTOS,
    image_paths,
    sample_image_folder,
    synthetic_image,
)
from dataloader.kernels import ImageBatch
from dataloader.transforms import (
    CenterCrop,
    Compose,
    Decode,
    Normalize,
    RandomHFlip,
    RandomResizedCrop,
    Resize,
    ToChw,
    ToFloat,
    ToHwc,
)

try:
    import simplejpeg
except ImportError:
    simplejpeg = None
try:
    import cv2
except ImportError:
    cv2 = None

RESULTS = Path(__file__).parent / "results" / "kernels.json"
FLOAT_TAIL_RESULTS = Path(__file__).parent / "results" / "float_tail.json"
WARPS_RESULTS = Path(__file__).parent / "results" / "warps.json"
DECODE_RESULTS = Path(__file__).parent / "results" / "decode.json"
PILLOW_PERF_RESULTS = Path(__file__).parent / "results" / "pillow_perf.json"
TAIL = [ToFloat(), Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)), ToChw()]
PILLOW_SIMD_VENV = Path(__file__).resolve().parent.parent / ".venv-pillow-simd" / "bin" / "python"


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


# The decode of a window alone against the whole image decoded, then cut: the
# same chain on the same seeds (RandomResizedCrop draws the same windows), in
# the same run. Outside exact mode the resized crop's window is also decoded
# at a DCT scale n/8.
WHOLE = "dataloader, whole image decoded"
EXACT = "dataloader, Decode(exact=True)"
# kernels.resize in its fast mode (exact=False: Pillow-SIMD's 16-bit weights,
# within 1 of Pillow), which Decode(exact=False) chains use; "dataloader" is
# the exact default.
FAST = "dataloader, exact=False"


def window_candidates(jpeg, count):
    """{operation: {library: (function, items)}} of the decode-and-crop operations."""
    center = Compose([Decode(exact=True), CenterCrop(SIZE)])
    resized = Compose([Decode(), RandomResizedCrop(SIZE)])
    resized_exact = Compose([Decode(exact=True), RandomResizedCrop(SIZE)])
    evaluation = [Resize(256), CenterCrop(SIZE)]
    evaluation_chain = Compose([Decode(exact=True), *evaluation])
    seeds = list(range(count))
    return {
        DECODE_CENTER_CROP: {
            "dataloader": (lambda d: center(d), [jpeg]),
            WHOLE: (lambda d: CenterCrop(SIZE)(kernels.decode(d)), [jpeg]),
        },
        DECODE_RESIZED_CROP: {
            "dataloader": (lambda seed: resized(jpeg, seed=seed), seeds),
            EXACT: (lambda seed: resized_exact(jpeg, seed=seed), seeds),
            WHOLE: (lambda seed: RandomResizedCrop(SIZE)(kernels.decode(jpeg), seed=seed), seeds),
        },
        DECODE_RESIZE_CENTER_CROP: {
            "dataloader": (lambda d: evaluation_chain(d), [jpeg]),
            WHOLE: (lambda d: Compose(evaluation)(kernels.decode(d)), [jpeg]),
        },
    }


def candidates(jpeg, png, pixels, windows):
    """{operation: {library: (function, items)}}; every function takes one item."""
    crop_list = crops(pixels, windows)
    ops = {operation: {"dataloader": None, "Pillow": entry}
           for operation, entry in pillow_candidates(jpeg, png, pixels, windows).items()}
    for operation, libraries in window_candidates(jpeg, len(windows)).items():
        ops[operation].update(libraries)
    ops[DECODE_JPEG]["dataloader"] = (kernels.decode, [jpeg])
    ops[DECODE_PNG]["dataloader"] = (kernels.decode, [png])
    ops[RESIZE]["dataloader"] = (lambda a: kernels.resize(a, SIZE), [pixels])
    ops[RESIZE_CROPS]["dataloader"] = (lambda a: kernels.resize(a, SIZE), crop_list)
    ops[RESIZE][FAST] = (lambda a: kernels.resize(a, SIZE, exact=False), [pixels])
    ops[RESIZE_CROPS][FAST] = (lambda a: kernels.resize(a, SIZE, exact=False), crop_list)
    ops[DECODE_RESIZE]["dataloader"] = (lambda d: kernels.resize(kernels.decode(d), SIZE), [jpeg])
    if simplejpeg is not None:
        ops[DECODE_JPEG]["simplejpeg"] = (simplejpeg.decode_jpeg, [jpeg])
        ops[DECODE_RESIZE]["simplejpeg + Pillow"] = (
            lambda d: np.asarray(PILImage.fromarray(simplejpeg.decode_jpeg(d)).resize(
                SIZE[::-1], PILImage.Resampling.BILINEAR)), [jpeg])
    if cv2 is not None:
        def cv_decode(data):
            return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)

        def cv_resize(array):
            return cv2.resize(array, SIZE[::-1], interpolation=cv2.INTER_AREA)

        ops[DECODE_JPEG]["OpenCV"] = (cv_decode, [jpeg])
        ops[DECODE_PNG]["OpenCV"] = (cv_decode, [png])
        ops[RESIZE]["OpenCV (INTER_AREA)"] = (cv_resize, [pixels])
        ops[RESIZE_CROPS]["OpenCV (INTER_AREA)"] = (cv_resize, crop_list)
        ops[DECODE_RESIZE]["OpenCV (INTER_AREA)"] = (lambda d: cv_resize(cv_decode(d)), [jpeg])
    return ops


class PillowSimd:
    """The Pillow-SIMD process: ``measure(operation, repeats)`` times one operation there.

    ``arrays`` are saved for it to INPUTS.npz; it runs ``_pillow_simd.py
    [mode] INPUTS.npz [count]`` (see there)."""

    def __init__(self, python, arrays, count, mode=()):
        self.folder = tempfile.TemporaryDirectory()
        saved = Path(self.folder.name) / "inputs.npz"
        np.savez(saved, **arrays)
        self.process = subprocess.Popen(
            [python, str(Path(__file__).parent / "_pillow_simd.py"), *mode, str(saved),
             str(count)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.version = json.loads(self.process.stdout.readline())["version"]

    def measure(self, operation, repeats):
        self.process.stdin.write(f"{repeats}\t{operation}\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def close(self):
        self.process.stdin.close()
        self.process.wait()
        self.folder.cleanup()


def versions():
    found = {"python": platform.python_version(), "numpy": np.__version__,
             "Pillow": PILImage.__version__, "dataloader": dataloader.__version__}
    if simplejpeg is not None:
        found["simplejpeg"] = simplejpeg.__version__
    if cv2 is not None:
        found["OpenCV"] = cv2.__version__
    return found


def pillow_simd_python(option):
    """The interpreter of the Pillow-SIMD environment, or None (with a notice)."""
    python = option or os.environ.get("PILLOW_SIMD_PYTHON") or (
        str(PILLOW_SIMD_VENV) if PILLOW_SIMD_VENV.exists() else None)
    if python is None:
        print("Pillow-SIMD: no environment (make pillow-simd, or --pillow-simd PYTHON); "
              "left out", file=sys.stderr)
    return python


def ratio_lines(results):
    """Our one-thread speed over each peer's the targets name: Pillow-SIMD, simplejpeg, and
    our own whole-image decode for the windows."""
    times = {(r["operation"], r["library"]): r["ms_per_image_1_thread"] for r in results}
    ours = "dataloader"
    lines = []
    for operation, library, peer in [
            (RESIZE_CROPS, ours, "Pillow-SIMD"), (RESIZE, ours, "Pillow-SIMD"),
            (RESIZE_CROPS, FAST, "Pillow-SIMD"), (RESIZE, FAST, "Pillow-SIMD"),
            (DECODE_JPEG, ours, "simplejpeg"), (DECODE_JPEG, ours, "Pillow-SIMD"),
            (DECODE_RESIZE, ours, "Pillow-SIMD"), (DECODE_CENTER_CROP, ours, WHOLE),
            (DECODE_RESIZED_CROP, EXACT, WHOLE), (DECODE_RESIZED_CROP, ours, WHOLE),
            (DECODE_RESIZED_CROP, ours, "Pillow-SIMD"), (DECODE_RESIZE_CENTER_CROP, ours, WHOLE)]:
        if (operation, peer) in times:
            mine = times[(operation, library)]
            lines.append({"operation": operation, "library": library, "peer": peer,
                          "ours_ms": mine, "peer_ms": times[(operation, peer)],
                          "speed_vs_peer": times[(operation, peer)] / mine})
    return lines


def float_tail_chains(jpeg, pixels):
    """{operation: (head, input)}: the ops before the float tail, and what they take."""
    return {
        "RandomResizedCrop(224) + tail, 500x375 array": ([RandomResizedCrop(SIZE)], pixels),
        "Resize((224, 224)) + tail, 500x375 array": ([Resize(SIZE)], pixels),
        "decode JPEG + RandomResizedCrop(224) + tail": ([Decode(), RandomResizedCrop(SIZE)],
                                                         jpeg),
        "decode JPEG + Resize(256) + CenterCrop(224) + tail": (
            [Decode(), Resize(256), CenterCrop(SIZE)], jpeg),
        "decode JPEG + RandomResizedCrop(224) + RandomHFlip() + tail": (
            [Decode(), RandomResizedCrop(SIZE), RandomHFlip()], jpeg),
    }


def float_tail(jpeg, pixels, count, repeats, rounds):
    """Fused against unfused float tails: ms per image on 1 and 2 threads, best of rounds."""
    batch = ImageBatch(count, *SIZE, channels=3, dtype="float32")
    best = {}
    for _ in range(rounds):
        for operation, (head, data) in float_tail_chains(jpeg, pixels).items():
            for kind, ops in (("fused", head + TAIL), ("unfused", [*head, ToHwc(), *TAIL])):
                chain = compile_chain(Compose(ops))
                times = per_image_seconds(
                    lambda seed, chain=chain, data=data: chain.apply_into(
                        data, seed, batch, seed), list(range(count)), repeats)
                earlier = best.get((operation, kind), times)
                best[(operation, kind)] = [min(a, b) for a, b in zip(earlier, times, strict=True)]
    rows = []
    for operation in float_tail_chains(jpeg, pixels):
        fused, unfused = best[(operation, "fused")], best[(operation, "unfused")]
        rows.append({"operation": operation, "fused_ms": [t * 1e3 for t in fused],
                     "unfused_ms": [t * 1e3 for t in unfused],
                     "speedup": [u / f for f, u in zip(fused, unfused, strict=True)]})
    return rows


def side_record(args, load_before, rows, title, units="ms per image, 1 thread / 2 threads"):
    """A side measurement's record (versions, CPUs, rounds, the load average before and
    after, its rows), with its header line printed."""
    info = {"versions": versions(), "cpus": os.cpu_count(), "rounds": args.rounds,
            "load_average": [load_before, load_average()], "results": rows}
    print(f"{title}: {info['cpus']} CPUs, load average {load_before} -> "
          f"{info['load_average'][1]}; {units}")
    return info


def write_results(path, info):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(info, indent=2))
    print(f"written {path}")


def float_tail_main(args, pixels, jpeg):
    load_before = load_average()
    rows = float_tail(jpeg, pixels, 24, 5, args.rounds)
    info = side_record(args, load_before, rows, "float tail")
    for row in rows:
        print(f"{row['operation']:62} fused {row['fused_ms'][0]:.3f} / {row['fused_ms'][1]:.3f}"
              f"  unfused {row['unfused_ms'][0]:.3f} / {row['unfused_ms'][1]:.3f}"
              f"  speed-up {row['speedup'][0]:.2f}x / {row['speedup'][1]:.2f}x")
    write_results(FLOAT_TAIL_RESULTS, info)


def warp_cases(pixels):
    """{operation: (ours, Pillow's)}: one call each on the photograph, same matrices."""
    from dataloader._core.ops import rotation_matrix

    height, width = pixels.shape[:2]
    image = PILImage.fromarray(pixels)
    rotation, (out_h, out_w) = rotation_matrix(30.0, width / 2, height / 2, True, height, width)
    # torchvision's F.affine matrix for angle 10, translate (12, -7), scale 1.1, shear (8, 3).
    rot, sx, sy = np.radians([10.0, 8.0, 3.0])
    a, b = np.cos(rot - sy) / np.cos(sy), -np.cos(rot - sy) * np.tan(sx) / np.cos(sy) - np.sin(rot)
    c, d = np.sin(rot - sy) / np.cos(sy), -np.sin(rot - sy) * np.tan(sx) / np.cos(sy) + np.cos(rot)
    m = [v / 1.1 for v in (d, -b, 0.0, -c, a, 0.0)]
    cx, cy = width / 2 + 12, height / 2 - 7
    m[2] += m[0] * -cx + m[1] * -cy + width / 2
    m[5] += m[3] * -cx + m[4] * -cy + height / 2
    cases = {}
    for name, filter_ in (("nearest", PILImage.Resampling.NEAREST),
                          ("bilinear", PILImage.Resampling.BILINEAR)):
        cases[f"rotate 30 degrees, expand, {name}"] = (
            lambda _, n=name: kernels.affine(pixels, rotation, (out_h, out_w), interpolation=n),
            lambda _, f=filter_: image.rotate(30.0, f, expand=True))
        cases[f"affine (rotate, translate, scale, shear), {name}"] = (
            lambda _, n=name: kernels.affine(pixels, m, interpolation=n),
            lambda _, f=filter_: image.transform((width, height), PILImage.Transform.AFFINE, m,
                                                 f, fillcolor=0))
    return cases


def warps_main(args, pixels):
    load_before = load_average()
    best = {}
    for _ in range(args.rounds):
        for operation, pair in warp_cases(pixels).items():
            for library, function in zip(("dataloader", "Pillow"), pair, strict=True):
                times = per_image_seconds(function, list(range(24)), 5)
                earlier = best.get((operation, library), times)
                best[(operation, library)] = [min(x, y) for x, y in zip(earlier, times,
                                                                        strict=True)]
    rows = [{"operation": operation, "dataloader_ms": [t * 1e3 for t in best[(operation,
                                                                                "dataloader")]],
             "pillow_ms": [t * 1e3 for t in best[(operation, "Pillow")]]}
            for operation in warp_cases(pixels)]
    for row in rows:
        row["speed_vs_pillow"] = [p / o for o, p in zip(row["dataloader_ms"], row["pillow_ms"],
                                                        strict=True)]
    info = side_record(args, load_before, rows, "warps, 500x375 RGB")
    for row in rows:
        print(f"{row['operation']:52} dataloader {row['dataloader_ms'][0]:.3f} / "
              f"{row['dataloader_ms'][1]:.3f}  Pillow {row['pillow_ms'][0]:.3f} / "
              f"{row['pillow_ms'][1]:.3f}  {row['speed_vs_pillow'][0]:.2f}x / "
              f"{row['speed_vs_pillow'][1]:.2f}x Pillow's speed")
    write_results(WARPS_RESULTS, info)


def paired_decode_rounds(files, rounds):
    """{clock: {library: [us per image of each round]}}: every round decodes every file
    once with each library, the order alternating, timed by thread CPU and wall clocks."""
    libraries = {"dataloader": kernels.decode, "simplejpeg": simplejpeg.decode_jpeg}
    times = {clock: {name: [] for name in libraries} for clock in ("cpu", "wall")}
    for function in libraries.values():   # warm up
        for data in files:
            function(data)
    for index in range(rounds):
        for name in (list(libraries) if index % 2 == 0 else list(libraries)[::-1]):
            function = libraries[name]
            cpu, wall = time.thread_time_ns(), time.perf_counter_ns()
            for data in files:
                function(data)
            times["cpu"][name].append((time.thread_time_ns() - cpu) / 1e3 / len(files))
            times["wall"][name].append((time.perf_counter_ns() - wall) / 1e3 / len(files))
    return times


def decode_main(args):
    if simplejpeg is None:
        sys.exit("--decode needs simplejpeg (the bench extra)")
    load_before = load_average()
    files = [path.read_bytes() for path in image_paths(
        sample_image_folder(40, photographs="installed"))]
    rows = []
    for clock, times in paired_decode_rounds(files, 40 * args.rounds).items():
        ours, peer = times["dataloader"], times["simplejpeg"]
        ratios = [p / o for o, p in zip(ours, peer, strict=True)]
        quartiles = statistics.quantiles(ratios, n=4)
        rows.append({"clock": clock, "rounds": len(ratios),
                     "dataloader_us": {"min": min(ours), "median": statistics.median(ours)},
                     "simplejpeg_us": {"min": min(peer), "median": statistics.median(peer)},
                     "speed_vs_simplejpeg": {"median": quartiles[1], "quartiles": [
                         quartiles[0], quartiles[2]], "min_over_min": min(peer) / min(ours)}})
    info = side_record(args, load_before, rows, f"whole-image JPEG decode, {len(files)} "
                       "photographs", f"{rows[0]['rounds']} paired rounds, one thread")
    for row in rows:
        speed = row["speed_vs_simplejpeg"]
        print(f"{row['clock']:4} time per image: dataloader {row['dataloader_us']['median']:.1f} "
              f"us, simplejpeg {row['simplejpeg_us']['median']:.1f} us (medians); our speed "
              f"{speed['median']:.3f}x simplejpeg's (quartiles {speed['quartiles'][0]:.3f}-"
              f"{speed['quartiles'][1]:.3f}; fastest rounds {speed['min_over_min']:.3f}x)")
    write_results(DECODE_RESULTS, info)


def perf_source():
    """pillow-perf's 2560x1600 RGB image: an installed photograph when there is one."""
    for path in INSTALLED_PHOTOS:
        if Path(path).exists():
            with PILImage.open(path) as image:
                return np.asarray(image.convert("RGB").resize(
                    (2560, 1600), PILImage.Resampling.LANCZOS)), Path(path).name
    return photo(1600, 2560)


def ours_function(op):
    """Our way of doing a pillow-perf operation (``_pillow_perf.Operation``) to one item."""
    if op.kind in ("resize", "crops"):
        size, name = op.argument if op.kind == "resize" else (op.argument, "bilinear")
        return lambda image: kernels.resize(image, size, interpolation=name)
    if op.kind == "blur":
        # Pillow's algorithm (box blurs), as Pillow-SIMD runs: GaussianBlur, the
        # transform, is torchvision's exact Gaussian, a different computation.
        return lambda image: kernels.gaussian_box_blur(image, op.argument)
    if op.kind == "convert":
        return lambda image: kernels.convert(image, op.argument)
    if op.kind == "transpose":
        turn = dict(TRANSPOSES)[op.argument]
        if isinstance(turn, str):
            return getattr(kernels, turn)
        return lambda image: kernels.rotate90(image, turn)
    return lambda data: kernels.decode(data, mode="RGB")


def perf_rounds(data, simd, rounds):
    """{operation: {library: ms per item, the best of the rounds}}, every library measuring
    one operation in turn, ours and Pillow-SIMD's process first in alternate rounds."""
    best = {}
    for index in range(rounds):
        for op in operations():
            items = data[op.source] if op.source in ("crops", "jpegs") else [data[op.source]]
            libraries = {"dataloader": ours_function(op)}
            if op.kind == "crops" or (op.kind == "resize" and op.argument[1] == "bilinear"):
                # The fast mode differs from the exact one for bilinear only.
                size = op.argument if op.kind == "crops" else op.argument[0]
                libraries[FAST] = lambda image, size=size: kernels.resize(image, size,
                                                                         exact=False)
            if op.kind == "decode" and simplejpeg is not None:
                libraries["simplejpeg"] = simplejpeg.decode_jpeg
            repeats = 5 if len(items) > 1 else 15
            measured = {}
            if simd is not None and index % 2:
                measured["Pillow-SIMD"] = simd.measure(op.name, repeats)
            for library, function in libraries.items():
                measured[library] = one_thread_seconds(function, items, repeats) * 1e3
            if simd is not None and not index % 2:
                measured["Pillow-SIMD"] = simd.measure(op.name, repeats)
            for library, ms in measured.items():
                best.setdefault(op.name, {})[library] = min(
                    ms, best.get(op.name, {}).get(library, ms))
    return best


def pillow_perf_main(args):
    load_before = load_average()
    photos = image_paths(sample_image_folder(300, photographs="installed"))
    image, source = perf_source()
    crop_count = 100
    data = inputs(image, photos, crop_count)
    python = pillow_simd_python(args.pillow_simd)
    simd = None if python is None else PillowSimd(
        python, {"image": image, "photos": np.array([str(path) for path in photos])},
        crop_count, mode=("--pillow-perf",))
    try:
        best = perf_rounds(data, simd, args.rounds)
    finally:
        if simd is not None:
            simd.close()
    # Our speed over each peer's, for each of our variants (the default, and the fast
    # resize mode where it runs).
    rows = [{"operation": name, "ms": times,
             "speed_vs": {f"{ours} vs {peer}": times[peer] / times[ours]
                          for ours in times if ours.startswith("dataloader")
                          for peer in times if not peer.startswith("dataloader")}}
            for name, times in best.items()]
    info = side_record(args, load_before, rows, f"pillow-perf set ({source}) and photographs "
                       f"({len(photos)} JPEGs, {crop_count} crops)", "ms per item, 1 thread")
    info["versions"]["Pillow-SIMD"] = simd.version if simd is not None else None
    for row in rows:
        times = "  ".join(f"{library} {ms:.3f} ms" for library, ms in row["ms"].items())
        speeds = "  ".join(f"{pair}: {speed:.2f}x" for pair, speed in row["speed_vs"].items())
        print(f"{row['operation']}\n    {times}\n    {speeds}")
    write_results(PILLOW_PERF_RESULTS, info)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    parser.add_argument("--pillow-simd", metavar="PYTHON",
                        help="the interpreter of an environment with Pillow-SIMD installed")
    parser.add_argument("--rounds", type=int, default=None,
                        help="measure every library this many times, 5 runs each time, and "
                             "keep the best (default 5, 1 with --quick)")
    parser.add_argument("--float-tail", action="store_true",
                        help="only the fused float tail against the unfused one")
    parser.add_argument("--warps", action="store_true",
                        help="only the affine warp against Pillow's transform and rotate")
    parser.add_argument("--decode", action="store_true",
                        help="only the whole-image JPEG decode against simplejpeg's, on the "
                             "sample set's photographs, in paired rounds")
    parser.add_argument("--pillow-perf", action="store_true",
                        help="only the operations of Pillow-SIMD's benchmark and the photograph "
                             "cases, against Pillow-SIMD and simplejpeg, one thread")
    args = parser.parse_args()
    count, repeats = (16, 5) if args.quick else (24, 5)
    args.rounds = args.rounds or (1 if args.quick else 5)
    if cv2 is not None:
        cv2.setNumThreads(1)   # one thread per call: the pool provides the parallelism

    if args.pillow_perf:
        return pillow_perf_main(args)
    pixels, source = photo(375, 500)
    jpeg = encoded(pixels, "JPEG", quality=90)
    if args.float_tail:
        return float_tail_main(args, pixels, jpeg)
    if args.warps:
        return warps_main(args, pixels)
    if args.decode:
        return decode_main(args)
    load_before = load_average()
    png_pixels, _ = photo(768, 1024)
    png = encoded(png_pixels, "PNG")
    windows = crop_windows(*pixels.shape[:2], count)
    found = versions()
    python = pillow_simd_python(args.pillow_simd)
    # {(operation, library): [ms one thread, ms two threads]}, the best over rounds. In
    # each round every library, Pillow-SIMD's process included, measures one operation
    # in turn, so that load on a shared machine falls on all of them alike.
    arrays = {"jpeg": np.frombuffer(jpeg, np.uint8), "png": np.frombuffer(png, np.uint8),
              "pixels": pixels}
    simd = PillowSimd(python, arrays, count) if python is not None else None
    if simd is not None:
        found["Pillow-SIMD"] = simd.version
    best = {}
    try:
        for _ in range(args.rounds):
            for operation, libraries in candidates(jpeg, png, pixels, windows).items():
                measured = {}
                for library, (function, items) in libraries.items():
                    one, two = per_image_seconds(
                        function, (items * count)[:max(count, len(items))], repeats)
                    measured[library] = [one * 1e3, two * 1e3]
                if simd is not None:
                    measured["Pillow-SIMD"] = simd.measure(operation, repeats)
                for library, times in measured.items():
                    key = (operation, library)
                    earlier = best.get(key, times)
                    best[key] = [min(a, b) for a, b in zip(earlier, times, strict=True)]
    finally:
        if simd is not None:
            simd.close()
    order = list(dict.fromkeys(operation for operation, _ in best))
    results = [{"operation": operation, "library": library, "ms_per_image_1_thread": one,
                "ms_per_image_2_threads": two}
               for (operation, library), (one, two) in sorted(
                   best.items(), key=lambda item: order.index(item[0][0]))]
    for row in results:
        pillow = next(r for r in results
                      if r["operation"] == row["operation"] and r["library"] == "Pillow")
        row["thread_scaling"] = row["ms_per_image_1_thread"] / row["ms_per_image_2_threads"]
        row["speedup_vs_pillow"] = pillow["ms_per_image_1_thread"] / row["ms_per_image_1_thread"]

    info = {"versions": found, "cpus": os.cpu_count(), "image_source": source,
            "jpeg_bytes": len(jpeg), "png_bytes": len(png), "crops": len(windows),
            "rounds": args.rounds,
            "load_average": [load_before, load_average()], "results": results,
            "ratios": ratio_lines(results)}
    print(" ".join(f"{k} {v}" for k, v in info["versions"].items()),
          f"| {info['cpus']} CPUs | {source} image | load average {load_before} -> "
          f"{info['load_average'][1]}")
    header = f"{'operation':68} {'library':34} {'1 thread':>10} {'2 threads':>10} " \
             f"{'scaling':>8} {'vs Pillow':>9}"
    print(header)
    print("-" * len(header))
    for row in results:
        print(f"{row['operation']:68} {row['library']:34} "
              f"{row['ms_per_image_1_thread']:8.3f}ms {row['ms_per_image_2_threads']:8.3f}ms "
              f"{row['thread_scaling']:7.2f}x {row['speedup_vs_pillow']:8.2f}x")
    print()
    for line in info["ratios"]:
        print(f"{line['operation']}: {line['library']} {line['ours_ms']:.3f} ms, {line['peer']} "
              f"{line['peer_ms']:.3f} ms: {line['speed_vs_peer']:.2f}x {line['peer']}'s speed")
    write_results(RESULTS, info)
    pillow_perf_main(args)


if __name__ == "__main__":
    main()
