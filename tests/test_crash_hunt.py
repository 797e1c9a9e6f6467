"""The crash hunt: every public transform and kernel, on anything, in a child process.

Hypothesis draws constructor arguments and inputs for each public name of
``dataloader.transforms`` and ``dataloader.kernels`` (and the loader paths
that run native chains): empty, 1x1 and very large images, every numpy
dtype, 2-D and 4-D arrays, non-contiguous, reversed, broadcast and read-only
views, NaN and infinity, ints past C's range, probabilities outside [0, 1],
backwards ranges, fills no dtype can hold, truncated and random bytes. Each
case runs in a long-lived child (``crash_hunt_worker.py``); the contract is
a result or a ``ValueError``/``TypeError``. A death by signal, a hang, any
other exception, or an empty image returned, fails the test with the case;
the child is restarted for the next one.

Example counts come from the hypothesis profile (``tests/conftest.py``):
modest under ``make test``, many more under ``make soak``.
"""

import functools
import math
import pickle
import re
import select
import signal
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from conftest import encode, natural_image
from crash_hunt_worker import ARRAY, BATCH, COLLATOR, IMAGE, TRANSFORM
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataloader import kernels, transforms
from dataloader._core.image import MAX_SIDE
from dataloader._media.samples import sample_audio, sample_video

WORKER = Path(__file__).with_name("crash_hunt_worker.py")
# Seconds one case may take before it counts as a hang (the machine may be busy).
CASE_TIMEOUT = 120

# Public names with nothing to hunt: an abstract base (each subclass has its
# own strategy) and a record with no code of its own.
EXEMPT = {
    "transforms.Transform": "abstract base class; every subclass is hunted",
    "kernels.ImageInfo": "a frozen record returned by image_info, with no code",
    "kernels.StreamInfo": "a frozen record returned by media_info, with no code",
    "transforms.BatchTransform": "abstract base class of the batch transforms",
    "transforms.MixUp": "numpy and torch operations on a collated batch, no native code",
    "transforms.CutMix": "numpy and torch operations on a collated batch, no native code",
    "transforms.RandomChoice": "chooses a batch transform, no native code",
    "transforms.RandomHorizontalFlip": "the same class as RandomHFlip, hunted under that name",
    "transforms.RandomVerticalFlip": "the same class as RandomVFlip, hunted under that name",
}


# --- the child process -----------------------------------------------------

class Child:
    """One long-lived worker process; ``run`` restarts it after a death."""

    def __init__(self):
        self.process = None
        self.stderr = None

    def start(self):
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the child
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.stderr, cwd=WORKER.parent)
        self._read(CASE_TIMEOUT)  # the ready signal: imports done

    def _read(self, timeout):
        stdout = self.process.stdout
        ready, _, _ = select.select([stdout], [], [], timeout)
        if not ready:
            return None
        header = stdout.read(8)
        if len(header) < 8:
            return None
        size = struct.unpack("<Q", header)[0]
        return pickle.loads(stdout.read(size)) if size else ("ready", "")

    def run(self, case):
        """``(outcome, detail)``: outcome is ok, rejected, error, crashed or hung."""
        if self.process is None or self.process.poll() is not None:
            self.start()
        frame = pickle.dumps(case)
        try:
            self.process.stdin.write(struct.pack("<Q", len(frame)) + frame)
            self.process.stdin.flush()
        except BrokenPipeError:
            pass
        reply = self._read(CASE_TIMEOUT)
        if reply is not None:
            return reply
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
            return "hung", f"no answer in {CASE_TIMEOUT} s"
        code = self.process.wait()
        self.stderr.seek(0)
        trace = self.stderr.read().decode(errors="replace")[-4000:]
        self.process = None
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        return "crashed", f"the process died ({how})\n{trace}"

    def close(self):
        if self.process is not None and self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait(30)


@pytest.fixture(scope="module")
def child():
    worker = Child()
    yield worker
    worker.close()


# --- values ----------------------------------------------------------------

NAN, INF = math.nan, math.inf
# Ints past every limit: the decode limit, C's int, int64, uint64.
BAD_INTS = [-1, 0, MAX_SIDE + 1, 2**31 - 1, 2**31, -(2**31) - 1, 2**63, -(2**63) - 1, 2**64]
ODD = [None, 1.5, NAN, INF, -INF, True, "8", b"8", 1j, (), [], {}]
ODD_FLOATS = [0.0, -0.0, 1.0, -1.0, 1e-300, 1e300, 3.5e38, NAN, INF, -INF]


def ints(low=0, high=16):
    """Mostly valid ints, sometimes a boundary, a numpy int or another type."""
    return st.one_of(
        st.integers(low, high), st.integers(low, high),
        st.integers(low, high).map(np.int64),
        st.sampled_from(BAD_INTS + [MAX_SIDE]), st.sampled_from(ODD))


def reals(low=-2.0, high=2.0):
    return st.one_of(st.floats(low, high), st.floats(low, high),
                     st.sampled_from(ODD_FLOATS), st.sampled_from(ODD))


def sizes(high=16):
    return st.one_of(ints(1, high), st.tuples(ints(1, high), ints(1, high)),
                     st.lists(ints(1, high), max_size=3))


def pairs(low, high):
    ordered = st.tuples(st.floats(low, high), st.floats(low, high)).map(sorted).map(tuple)
    return st.one_of(ordered, ordered, st.tuples(reals(low, high), reals(low, high)),
                     st.sampled_from([(high, low), (0.0, 0.0), (NAN, 1.0), [0.5], 0.5, "ab"]))


def choices(valid):
    return st.one_of(st.sampled_from(valid), st.sampled_from(valid),
                     st.sampled_from(["", "other", None, 0, b"center", ["RGB"]]))


def fills():
    return st.one_of(st.integers(0, 255), st.integers(-1, 300),
                     st.lists(st.integers(0, 300), min_size=1, max_size=5),
                     st.sampled_from([1.5, NAN, INF, 1e39, -1e39, "red", None, (), [NAN]]),
                     st.floats(-1e3, 1e3))


# --- arrays ----------------------------------------------------------------

DTYPES = [np.uint8, np.float32, np.bool_, np.int8, np.int16, np.uint16, np.int32, np.uint32,
          np.int64, np.uint64, np.float16, np.float64, np.longdouble, np.complex64,
          np.complex128, "M8[s]", "m8[s]", "U2", "S2", object, "V4"]
SIDES = [1, 2, 3, 4, 0, 5, 8, 13]
# Sides only ever reached by broadcasting (no memory): at, past and far past the limit.
LARGE_SIDES = [MAX_SIDE, MAX_SIDE + 1, 2**31 + 1]
SAMPLES = [0, 255, 1, 127, 254, 256, -1, 0.5, NAN, INF, -INF, 1e30]


@st.composite
def array_specs(draw, dtypes=None, ndims=(2, 3, 3, 2, 4, 1, 0), channels=True):
    """A recipe for an array: contents, then slices, axis swaps, broadcasts."""
    dtype = np.dtype(draw(st.sampled_from(dtypes or [np.uint8, np.float32] * 4 + DTYPES)))
    ndim = draw(st.sampled_from(ndims))
    shape = [draw(st.sampled_from(SIDES)) for _ in range(ndim)]
    if channels and ndim == 3 and draw(st.booleans()):
        shape[2] = draw(st.integers(1, 4))
    large = draw(st.integers(0, 9)) == 0 and ndim > 0
    axis = draw(st.integers(0, ndim - 1)) if large else None
    steps = [draw(st.sampled_from([1, 1, 2, -1])) for _ in range(ndim)]
    base_shape = [1 if d == axis else side * abs(step)
                  for d, (side, step) in enumerate(zip(shape, steps, strict=True))]
    if dtype.kind in "biufc":
        values = draw(st.lists(st.sampled_from(SAMPLES), min_size=1, max_size=4))
        with np.errstate(all="ignore"):
            base = np.resize(np.array(values, np.float64), base_shape).astype(dtype)
    else:
        base = np.zeros(base_shape, dtype)
    ops = [("slice", tuple(steps))]
    if large:
        shape[axis] = draw(st.sampled_from(LARGE_SIDES))
        ops.append(("broadcast", tuple(shape)))
    if ndim >= 2 and draw(st.integers(0, 4)) == 0:
        ops.append(("swapaxes", 0, 1))
    if not large and draw(st.integers(0, 9)) == 0:
        ops.append(("fortran",))
    if draw(st.integers(0, 9)) == 0:
        ops.append(("readonly",))
    return (ARRAY, base, tuple(ops))


def image_specs():
    """Mostly images the kernels accept, sometimes anything."""
    return st.one_of(array_specs(dtypes=[np.uint8, np.float32], ndims=(2, 3, 3)),
                     array_specs(dtypes=[np.uint8], ndims=(3,)),
                     array_specs())


def _encoded():
    photo = natural_image(12, 9, 3)
    files = [encode(photo, "PNG"), encode(photo, "JPEG"), encode(photo, "WEBP"),
             encode(photo[:, :, 0], "PNG"), encode(photo, "GIF"), encode(photo, "BMP"),
             encode(natural_image(1, 1, 4), "PNG"), encode(natural_image(1, 200, 3), "JPEG")]
    return files + [data[: len(data) // 2] for data in files] + [data[:12] for data in files]


ENCODED = _encoded()


def _encoded_file(index):
    return ENCODED[index]


def _as_uint8_array(data):
    return (ARRAY, np.frombuffer(data, np.uint8), ())


def encoded_specs():
    # Files by index: hypothesis then shows short strategy reprs.
    files = st.integers(0, len(ENCODED) - 1).map(_encoded_file)
    return st.one_of(files, files.map(bytearray), st.binary(max_size=64),
                     files.map(_as_uint8_array))


@functools.cache
def _media_files():
    """A sample video and audio file (made once, by the ffmpeg command)."""
    folder = Path(tempfile.mkdtemp())
    return [sample_video(folder).read_bytes(), sample_audio(folder).read_bytes()]


def _media_file(index, cut):
    data = _media_files()[index]
    return data[:len(data) - cut]


def media_specs():
    """Video and audio bytes: whole, cut short, or any encoded bytes."""
    whole = st.integers(0, 1).map(lambda index: _media_file(index, 0))
    cut = st.builds(_media_file, st.integers(0, 1), st.integers(1, 100_000))
    return st.one_of(whole, cut, encoded_specs())


def inputs():
    """What a transform or kernel may be handed."""
    return st.one_of(
        image_specs(), image_specs(), encoded_specs(),
        st.tuples(st.just(IMAGE), array_specs(dtypes=[np.uint8, np.float32], ndims=(2, 3)),
                  st.sampled_from(["HWC", "CHW"])),
        st.tuples(st.just(BATCH), array_specs(dtypes=[np.uint8, np.float32], ndims=(4,)),
                  st.sampled_from(["NHWC", "NCHW"])),
        st.sampled_from(ODD))


def outs():
    return st.one_of(st.none(), st.none(), array_specs(dtypes=[np.uint8, np.float32]))


def seeds():
    return st.one_of(st.integers(0, 2**64 - 1), st.sampled_from([-1, 2**64, None, 1.5, "0"]))


# --- cases -----------------------------------------------------------------

def _case(kind, name, args, kwargs, call=None, required=None):
    return st.tuples(st.just(kind), st.just(name), st.tuples(*args),
                     st.fixed_dictionaries(required or {}, optional=kwargs),
                     st.none() if call is None else call)


TRANSFORM_ARGS = {
    "CenterCrop": ([sizes()], {}),
    "Crop": ([ints(0, 8), ints(0, 8), ints(1, 8), ints(1, 8)], {}),
    "Decode": ([], {"mode": choices([None, "L", "RGB", "RGBA"]), "max_width": ints(1, 64),
                    "max_height": ints(1, 64), "max_bytes": ints(1, 2**16), "exact": ints(0, 1)}),
    "HFlip": ([], {}),
    "Normalize": ([st.lists(reals(), max_size=5), st.lists(reals(), max_size=5)], {}),
    "Pad": ([st.one_of(ints(0, 4), st.lists(ints(0, 4), max_size=5))],
            {"fill": fills(), "mode": choices(["constant", "edge", "reflect", "symmetric"])}),
    "PadTo": ([ints(1, 16), ints(1, 16)], {"fill": fills(), "anchor": choices(
        ["top-left", "center", "bottom-right", "top", "left"])}),
    "RandomCrop": ([sizes()], {"padding": st.one_of(st.none(), ints(0, 4),
                                                     st.lists(ints(0, 4), max_size=5))}),
    "RandomHFlip": ([], {"p": reals(0.0, 1.0)}),
    "RandomVFlip": ([], {"p": reals(0.0, 1.0)}),
    "RandomRotation": ([st.one_of(reals(-720.0, 720.0), pairs(-720.0, 720.0))], {
        "interpolation": choices(["nearest", "bilinear", "bicubic"]),
        "expand": st.one_of(st.booleans(), st.sampled_from(ODD)), "fill": fills(),
        "center": st.one_of(st.none(), st.tuples(reals(-50.0, 50.0), reals(-50.0, 50.0)),
                            st.sampled_from(ODD))}),
    "RandomAffine": ([st.one_of(reals(-360.0, 360.0), pairs(-360.0, 360.0))], {
        "translate": st.one_of(st.none(), pairs(0.0, 1.5)),
        "scale": st.one_of(st.none(), pairs(0.0, 3.0)),
        "shear": st.one_of(st.none(), reals(-89.0, 89.0), pairs(-89.0, 89.0),
                           st.lists(reals(-89.0, 89.0), max_size=5)),
        "interpolation": choices(["nearest", "bilinear", "lanczos"]), "fill": fills(),
        "center": st.one_of(st.none(), st.tuples(reals(-50.0, 50.0), reals(-50.0, 50.0)))}),
    "RandAugment": ([], {
        "num_ops": ints(-1, 4), "magnitude": ints(-1, 40), "num_magnitude_bins": ints(0, 40),
        "interpolation": choices(["nearest", "bilinear", "bicubic"]), "fill": fills()}),
    "TrivialAugmentWide": ([], {
        "num_magnitude_bins": ints(0, 40), "interpolation": choices(["nearest", "bilinear"]),
        "fill": fills()}),
    "AutoAugment": ([], {
        "policy": choices(["imagenet", "cifar10", "svhn", "IMAGENET"]),
        "interpolation": choices(["nearest", "bilinear"]), "fill": fills()}),
    "RandomErasing": ([], {
        "p": reals(0.0, 1.0), "scale": pairs(0.0, 1.5), "ratio": pairs(0.0, 20.0),
        "value": st.one_of(reals(), st.lists(reals(), max_size=5),
                           st.sampled_from(["random", "noise"])),
        "inplace": st.one_of(st.booleans(), st.sampled_from(ODD))}),
    "RandomResizedCrop": ([sizes()], {"scale": pairs(0.0, 1.5), "ratio": pairs(0.0, 20.0),
                                      "interpolation": choices(["bilinear", "nearest",
                                                                "bicubic", "lanczos"])}),
    "Resize": ([sizes()], {"max_size": st.one_of(st.none(), ints(1, 32)),
                           "interpolation": choices(["bilinear", "nearest", "lanczos"]),
                           "antialias": st.one_of(st.booleans(), st.sampled_from(ODD))}),
    "Rotate90": ([], {"k": ints(-9, 9)}),
    "ToChw": ([], {}),
    "ToTensor": ([], {}),
    "ToFloat": ([], {}),
    "ToGray": ([], {}),
    "ToHwc": ([], {}),
    "ToRgb": ([], {}),
    "ToRgba": ([], {}),
    "VFlip": ([], {}),
    "ColorJitter": ([], {name: st.one_of(reals(-0.6, 2.0), pairs(-0.6, 2.0))
                         for name in ("brightness", "contrast", "saturation", "hue")}),
    "Grayscale": ([], {"num_output_channels": ints(0, 4)}),
    "RandomGrayscale": ([], {"p": reals(0.0, 1.0)}),
    "GaussianBlur": ([st.one_of(ints(1, 9), st.tuples(ints(1, 9), ints(1, 9)),
                                st.lists(ints(1, 9), max_size=3))],
                     {"sigma": st.one_of(reals(0.0, 5.0), pairs(0.0, 5.0))}),
    "RandomPosterize": ([ints(0, 9)], {"p": reals(0.0, 1.0)}),
    "RandomSolarize": ([reals(-10.0, 300.0)], {"p": reals(0.0, 1.0)}),
    "RandomAdjustSharpness": ([reals(-1.0, 5.0)], {"p": reals(0.0, 1.0)}),
    "RandomAutocontrast": ([], {"p": reals(0.0, 1.0)}),
    "RandomEqualize": ([], {"p": reals(0.0, 1.0)}),
    "RandomInvert": ([], {"p": reals(0.0, 1.0)}),
}


def transform_specs():
    """A transform as the worker builds it (construction errors happen there)."""
    return st.one_of(*[
        st.tuples(st.just(TRANSFORM), st.just(name), st.tuples(*args),
                  st.fixed_dictionaries({}, optional=kwargs))
        for name, (args, kwargs) in TRANSFORM_ARGS.items()])


def transform_case(name):
    args, kwargs = TRANSFORM_ARGS[name]
    call = st.tuples(st.tuples(inputs()), st.fixed_dictionaries({"seed": seeds()}))
    return _case("transforms", name, args, kwargs, call)


def _chain_input():
    """A chain that starts by decoding gets bytes; others get images."""
    return st.one_of(encoded_specs(), image_specs())


STRATEGIES = {f"transforms.{name}": transform_case(name) for name in TRANSFORM_ARGS}
STRATEGIES["transforms.Compose"] = _case(
    "transforms", "Compose",
    [st.one_of(
        st.lists(transform_specs(), max_size=5),
        st.tuples(st.just((TRANSFORM, "Decode", (), {})), transform_specs(),
                  transform_specs()).map(list),
        transform_specs(), st.sampled_from(ODD), st.lists(st.sampled_from(ODD), max_size=2))],
    {}, st.tuples(st.tuples(_chain_input()), st.fixed_dictionaries({"seed": seeds()})))

KERNEL_ARGS = {
    "convert": ([image_specs(), choices(["L", "LA", "RGB", "RGBA"])], {"out": outs()}),
    "affine": ([image_specs(), st.one_of(st.lists(reals(-3.0, 3.0), min_size=6, max_size=6),
                                         st.lists(reals(), max_size=7), st.sampled_from(ODD))],
               {"size": st.one_of(st.none(), sizes()), "fill": fills(), "out": outs(),
                "interpolation": choices(["nearest", "bilinear", "bicubic"])}),
    "box_blur": ([image_specs(), st.one_of(reals(0.0, 40.0),
                                           st.tuples(reals(0.0, 40.0), reals(0.0, 40.0)),
                                           st.sampled_from([1e6, 1e6 + 1, (1, 2, 3), [1.0]]))],
                 {"passes": ints(1, 4), "out": outs()}),
    "gaussian_box_blur": ([image_specs(), st.one_of(reals(0.0, 40.0),
                                                    st.tuples(reals(0.0, 40.0),
                                                              reals(0.0, 40.0)),
                                                    st.sampled_from([1e6, (0.0, 1e6), "2"]))],
                          {"passes": ints(1, 4), "out": outs()}),
    "crop": ([image_specs(), ints(0, 8), ints(0, 8), ints(1, 8), ints(1, 8)], {"out": outs()}),
    "decode": ([encoded_specs()], {
        "mode": choices([None, "L", "RGB", "RGBA"]), "out": outs(),
        "min_size": st.one_of(st.none(), sizes()), "max_width": ints(1, 64),
        "max_height": ints(1, 64), "max_bytes": ints(1, 2**16)}),
    "hflip": ([image_specs()], {"out": outs()}),
    "image_info": ([st.one_of(encoded_specs(), st.sampled_from(ODD))], {}),
    "normalize": ([image_specs(), st.lists(reals(), max_size=5), st.lists(reals(), max_size=5)],
                  {"layout": choices(["HWC", "CHW", "NHWC", "NCHW"]), "out": outs()}),
    "pad": ([image_specs(), st.one_of(ints(0, 4), st.lists(ints(0, 4), max_size=5))],
            {"fill": fills(), "padding_mode": choices(["constant", "edge", "reflect",
                                                       "symmetric"]), "out": outs()}),
    "pad_to": ([image_specs(), ints(1, 16), ints(1, 16)],
               {"anchor": choices(["top-left", "center", "bottom"]), "fill": fills(),
                "out": outs()}),
    "resize": ([image_specs(), sizes()], {
        "interpolation": choices(["bilinear", "nearest", "bicubic", "lanczos"]),
        "antialias": st.one_of(st.booleans(), st.sampled_from(ODD)), "out": outs()}),
    "rotate90": ([image_specs(), ints(-9, 9)], {"out": outs()}),
    "stack": ([st.lists(image_specs(), max_size=3)], {"out": outs()}),
    "to_chw": ([image_specs()], {"out": outs()}),
    "to_float": ([image_specs()], {"out": outs()}),
    "to_hwc": ([image_specs()], {"out": outs()}),
    "vflip": ([image_specs()], {"out": outs()}),
    "Image": ([ints(1, 8), ints(1, 8)], {"channels": ints(1, 4),
                                         "dtype": choices(["uint8", "float32"]),
                                         "layout": choices(["HWC", "CHW"])}),
    # A batch size past the limit, but never 16384 valid images of 16384 rows:
    # a valid request larger than the machine is numpy's and torch's MemoryError.
    "ImageBatch": ([st.one_of(st.integers(0, 4), st.sampled_from([-1, MAX_SIDE + 1, 2**31, 1.5])),
                    ints(1, 8), ints(1, 8)], {
        "channels": ints(1, 4), "dtype": choices(["uint8", "float32"]),
        "layout": choices(["NCHW", "NHWC"])}),
    "Image.from_array": ([inputs()], {"layout": choices(["HWC", "CHW"])}),
    # Frame numbers within the sample video's 50 (past them is IndexError, as numpy's).
    "decode_video": ([media_specs(), st.one_of(st.lists(st.integers(0, 49), max_size=4),
                                               st.sampled_from(ODD))], {
        "size": st.one_of(st.none(), sizes()),
        "crop": st.one_of(st.none(), st.lists(ints(0, 130), min_size=4, max_size=4),
                          st.sampled_from(ODD)),
        "interpolation": choices(["nearest", "bilinear", "bicubic", "area"]),
        "threads": ints(0, 4)}),
    "decode_audio": ([media_specs()], {
        "sample_rate": ints(1, 96000), "channels": ints(1, 8), "start": reals(0.0, 3.0),
        "end": st.one_of(st.none(), reals(0.0, 3.0))}),
    "media_info": ([media_specs()], {}),
    "Clip": ([ints(0, 8)], {"start": reals(), "stride": ints(0, 4),
                            "fps": st.one_of(st.none(), reals(0.0, 60.0))}),
    "Timestamps": ([st.one_of(st.lists(reals(), max_size=3), st.sampled_from(ODD))], {}),
    "ImageBatch.from_array": ([inputs()], {"layout": choices(["NCHW", "NHWC"])}),
}
for _name, (_args, _kwargs) in KERNEL_ARGS.items():
    STRATEGIES[f"kernels.{_name}"] = _case("kernels", _name, _args, _kwargs)


def _items():
    labelled = st.tuples(inputs(), st.integers(0, 9))
    return st.one_of(st.lists(inputs(), max_size=3), st.lists(labelled, max_size=3))


STRATEGIES["dataloader.ImageCollator"] = _case(
    "dataloader", "ImageCollator", [],
    {"layout": choices(["NCHW", "NHWC"]), "dtype": choices([None, "uint8", "float32"]),
     "pool_capacity": ints(0, 8)},
    st.tuples(st.tuples(_items()), st.just({})))
# Native chains on the loader's workers (threads outside the interpreter).
STRATEGIES["dataloader.DataLoader"] = _case(
    "dataloader", "DataLoader",
    [st.one_of(st.lists(_chain_input(), min_size=1, max_size=4),
               st.lists(st.tuples(_chain_input(), st.integers(0, 9)), min_size=1, max_size=4),
               st.lists(st.sampled_from([(), []]), min_size=1, max_size=2))],
    {"batch_size": st.integers(1, 3), "num_workers": st.sampled_from([0, 2]),
     "item_concurrency": st.sampled_from([1, 2]),
     # With a fixed output shape, each item's chain writes into its batch slot.
     "collate_fn": st.tuples(st.just(COLLATOR), st.fixed_dictionaries({}, optional={
         "layout": st.sampled_from(["NCHW", "NHWC"]),
         "dtype": st.sampled_from([None, "uint8", "float32"])}))},
    required={"transform": st.one_of(transform_specs(), st.tuples(
        st.just(TRANSFORM), st.just("Compose"),
        st.tuples(st.lists(transform_specs(), max_size=4)), st.just({})))})


# --- the tests -------------------------------------------------------------

def public_names():
    names = {f"transforms.{name}" for name in transforms.__all__}
    names |= {f"kernels.{name}" for name in kernels.__all__}
    names |= {f"dataloader.{name}" for name in ("ImageCollator",)}
    return names


def test_every_public_transform_and_kernel_has_a_strategy():
    missing = public_names() - set(STRATEGIES) - set(EXEMPT)
    assert not missing, f"no crash-hunt strategy for {sorted(missing)}"
    stale = (set(STRATEGIES) | set(EXEMPT)) - public_names() - {
        "dataloader.DataLoader", "kernels.Image.from_array", "kernels.ImageBatch.from_array"}
    assert not stale, f"strategies for names that are not public: {sorted(stale)}"


def summary(spec):
    """A short readable form of a case: arrays by recipe, bytes by size and head."""
    if isinstance(spec, (bytes, bytearray)):
        return f"<{type(spec).__name__} of {len(spec)}: {bytes(spec[:12])!r}...>"
    if isinstance(spec, np.ndarray):
        return f"<{spec.dtype} array of shape {spec.shape}: {spec.ravel()[:4].tolist()}...>"
    if isinstance(spec, tuple) and spec and spec[0] == ARRAY:
        return f"array(base={summary(spec[1])}, ops={spec[2]!r})"
    if isinstance(spec, (list, tuple)):
        items = ", ".join(summary(item) for item in spec)
        return f"[{items}]" if isinstance(spec, list) else f"({items})"
    if isinstance(spec, dict):
        return "{" + ", ".join(f"{key!r}: {summary(value)}" for key, value in spec.items()) + "}"
    return repr(spec)


def describe(case):
    kind, name, args, kwargs, call = case
    text = f"{kind}.{name}(*{summary(args)}, **{summary(kwargs)})"
    return text + (f" called with {summary(call)}" if call is not None else "")


# Each case has CASE_TIMEOUT; the soak profile's examples and shrinking a
# finding (a new child per crash) need more than the suite's default.
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("name", sorted(STRATEGIES))
@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_input_crashes_the_process(child, name, data):
    """A result, or ValueError/TypeError: never a signal, a hang or another exception."""
    case = data.draw(STRATEGIES[name], label="case")
    outcome, detail = child.run(case)
    if outcome in ("crashed", "hung", "error"):
        pytest.fail(f"{outcome}: {describe(case)}\n{detail}")


# --- what the hunt and the first users found -------------------------------

def _array(shape, dtype=np.uint8):
    return (ARRAY, np.zeros(shape, dtype), ())


def _call(kind, name, args=(), kwargs=None, call_args=(), call_kwargs=None):
    call = None if call_args is None else (tuple(call_args), call_kwargs or {"seed": 0})
    return (kind, name, tuple(args), kwargs or {}, call)


# Each once killed the process, hung, or returned an image made from nothing:
# (case, what the message must name). Every one must now be a ValueError.
REGRESSIONS = {
    "Resize(8) on an empty image (SIGFPE)": (
        _call("transforms", "Resize", [8], call_args=[_array((0, 5, 3))]), r"shape \(0, 5, 3\)"),
    "Resize(8) on an empty image on the loader's workers (SIGFPE)": (
        ("dataloader", "DataLoader", ([_array((4, 4, 3)), _array((0, 5, 3))] * 2,),
         {"batch_size": 2, "num_workers": 2, "transform": (TRANSFORM, "Resize", (8,), {})},
         None), r"shape \(0, 5, 3\)"),
    "RandomResizedCrop(4) on an image of width 0 (SIGSEGV)": (
        _call("transforms", "RandomResizedCrop", [4], call_args=[_array((6, 0, 3))]),
        r"shape \(6, 0, 3\)"),
    "Resize((h, w)) on an empty image (an image made from nothing)": (
        _call("transforms", "Resize", [(4, 6)], call_args=[_array((0, 0, 3))]),
        r"shape \(0, 0, 3\)"),
    "CenterCrop on an empty image (an image made from nothing)": (
        _call("transforms", "CenterCrop", [3], call_args=[_array((5, 0))]), r"shape \(5, 0\)"),
    "Image(0, 0)": (_call("kernels", "Image", [0, 0], call_args=None), r"shape \(0, 0, 3\)"),
    "Resize(8) to a side no int holds": (
        _call("transforms", "Resize", [8], call_args=[
            (ARRAY, np.zeros((1, 1, 1), np.uint8), (("broadcast", (1, 2**31 + 1, 1)),))]),
        r"shape \(1, 2147483649, 1\)"),
    "Chain seeds outside uint64 (OverflowError)": (
        _call("transforms", "HFlip", call_args=[_array((1, 1))], call_kwargs={"seed": -1}),
        "seed must be an int in 0..18446744073709551615"),
    "Pad(2**31) (OverflowError)": (
        _call("transforms", "Pad", [2**31], call_args=None), "padding must be an int in 0..16384"),
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_what_once_crashed_is_a_value_error(child, name):
    case, message = REGRESSIONS[name]
    outcome, detail = child.run(case)
    assert outcome == "rejected", f"{outcome}: {describe(case)}\n{detail}"
    assert detail.startswith("ValueError: "), detail
    assert re.search(message, detail), detail
