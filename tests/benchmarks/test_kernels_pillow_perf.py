"""The pillow-perf operations of benchmarks/kernels.py do the same work on both sides:
ours (dataloader.kernels) and Pillow's (what Pillow-SIMD runs), on the same inputs."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from dataloader._images.samples import image_paths, sample_image_folder, synthetic_image

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def kernels_script():
    """benchmarks/kernels.py as a module (its siblings import as top-level modules)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location("_benchmark_kernels",
                                                      BENCHMARKS / "kernels.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module, sys.modules["_pillow_perf"]
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.fixture(scope="module")
def data(kernels_script, tmp_path_factory):
    """The benchmark's inputs, from a smaller source image and 3 photographs."""
    _, perf = kernels_script
    root = sample_image_folder(3, tmp_path_factory.mktemp("perf") / "set", n_classes=1, seed=2)
    return perf.inputs(synthetic_image(*perf.SOURCE_SIZE), image_paths(root), 3)


def pillow_result(perf, op, data):
    function = perf.pillow_function(op)
    return [np.asarray(function(item)) for item in perf.pillow_items(op.source, data[op.source])]


def ours_result(script, op, data):
    items = data[op.source] if op.source in ("crops", "jpegs") else [data[op.source]]
    return [np.asarray(script.ours_function(op)(item)) for item in items]


def test_every_operation_gives_pillows_pixels(kernels_script, data):
    script, perf = kernels_script
    for op in perf.operations():
        ours, theirs = ours_result(script, op, data), pillow_result(perf, op, data)
        assert len(ours) == len(theirs) > 0, op.name
        for mine, reference in zip(ours, theirs, strict=True):
            mine = mine.reshape(reference.shape)
            # Every operation, the blur's box passes included, gives Pillow's bytes.
            np.testing.assert_array_equal(mine, reference, err_msg=op.name)


def test_crops_are_drawn_as_random_resized_crop_draws_them(kernels_script):
    _, perf = kernels_script
    for seed in range(50):
        top, left, h, w = perf.crop_window(375, 500, seed)
        assert 0.08 * 375 * 500 * 0.98 <= h * w <= 375 * 500
        assert 0 <= top <= 375 - h and 0 <= left <= 500 - w
        assert 3 / 4 * 0.9 <= w / h <= 4 / 3 * 1.1
