"""RandAugment, TrivialAugmentWide and AutoAugment against torchvision's semantics.

The reference is benchmarks/_pillow_augment.py: torchvision's op spaces and
_apply_op written out on Pillow. Each sub-op, forced through the policy op's
test hook (``only``/``value`` of its DL_OPS row), gives Pillow's bytes; the
policies' outputs are always one of the reference's candidates for their
tables, and they spread their draws over the ops."""

import importlib.util
import io
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_same_batches_on_workers
from PIL import Image as PILImage

from dataloader._core.pipeline import AUGMENT_OPS, Chain, step
from dataloader.transforms import (
    AutoAugment,
    Compose,
    RandAugment,
    RandomResizedCrop,
    ToFloat,
    TrivialAugmentWide,
)


def _load_reference():
    path = Path(__file__).parents[1] / "benchmarks" / "_pillow_augment.py"
    spec = importlib.util.spec_from_file_location("_pillow_augment", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


reference = _load_reference()
WARPS = {"ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate"}


def pil(array):
    return PILImage.fromarray(array[:, :, 0] if array.shape[2] == 1 else array)


def back(image):
    array = np.asarray(image)
    return array[:, :, None] if array.ndim == 2 else array


@pytest.fixture(scope="module")
def pictures(photos):
    """Photographs at odd sizes: {channels: image}."""
    with PILImage.open(io.BytesIO(photos["astronaut.png"])) as image:
        rgb = image.convert("RGB").resize((171, 133))
    return {3: back(rgb), 1: back(rgb.convert("L"))}


def forced(image, op, magnitude, interpolation="nearest", fill=(0, 0, 0, 0), num_ops=1):
    """The RandAugment op with every sub-op forced to ``op`` of ``magnitude``."""
    chain = Chain([step("rand_augment", num_ops=num_ops, bins=31, only=AUGMENT_OPS.index(op),
                        value=magnitude, filter=("nearest", "bilinear").index(interpolation),
                        fill=fill)], None, None)
    return back(chain.apply(image, 0))


MAGNITUDES = {
    "Identity": [0.0], "ShearX": [0.3, -0.17, 0.99], "ShearY": [-0.3, 0.21],
    "TranslateX": [45.3, -13.0, 0.6], "TranslateY": [-60.2, 32.0], "Rotate": [30.0, -135.0, 7.2],
    "Brightness": [0.9, -0.99, 0.33], "Color": [0.9, -0.5], "Contrast": [-0.9, 0.62],
    "Sharpness": [0.99, -0.7], "Posterize": [2.0, 4.0, 8.0], "Solarize": [0.0, 127.5, 255.0],
    "AutoContrast": [0.0], "Equalize": [0.0], "Invert": [0.0],
}


@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("op, magnitude", [(op, m) for op, ms in MAGNITUDES.items() for m in ms])
def test_each_sub_op_gives_pillows_bytes(pictures, op, magnitude, channels):
    image = pictures[channels]
    theirs = back(reference.OPS[op](pil(image), magnitude))
    np.testing.assert_array_equal(forced(image, op, magnitude), theirs)


@pytest.mark.parametrize("op, magnitude", [("ShearX", -0.3), ("TranslateY", 40.7),
                                           ("Rotate", 30.0), ("ShearY", 0.99)])
def test_warps_bilinear_within_one_and_fill_as_torchvision(pictures, op, magnitude):
    image = pictures[3]
    theirs = back(reference.OPS[op](pil(image), magnitude, interpolation="bilinear",
                                    fill=[10, 200, 30]))
    ours = forced(image, op, magnitude, "bilinear", (10, 200, 30, 0))
    assert np.abs(ours.astype(int) - theirs.astype(int)).max() <= 1
    nearest = back(reference.OPS[op](pil(image), magnitude, fill=[10, 200, 30]))
    np.testing.assert_array_equal(forced(image, op, magnitude, fill=(10, 200, 30, 0)), nearest)
    assert (nearest == (10, 200, 30)).all(axis=2).any()


def test_sub_ops_in_a_row_compose(pictures):
    image = pictures[3]
    theirs = pil(image)
    for _ in range(3):
        theirs = reference.OPS["Rotate"](theirs, 20.0)
    np.testing.assert_array_equal(forced(image, "Rotate", 20.0, num_ops=3), back(theirs))
    np.testing.assert_array_equal(forced(image, "Identity", 0.0, num_ops=4), image)


# --- the tables and the draws ---------------------------------------------------------------

def candidates(image, space):
    """{output bytes: op} of each (op, magnitude, sign) of ``space``: {op: (magnitudes, signed)}."""
    found = {}
    for op, (magnitudes, signed) in space.items():
        for m in magnitudes:
            for value in ({m, -m} if signed else {m}):
                found.setdefault(back(reference.OPS[op](pil(image), value)).tobytes(), op)
    return found


@pytest.fixture(scope="module")
def small():
    # Noise: no two ops give the same bytes.
    return np.random.default_rng(7).integers(0, 256, (20, 27, 3), np.uint8)


def test_rand_augment_draws_its_ops_uniformly_from_torchvisions_table(small):
    pytest.importorskip("torch")
    space = {op: ([m[9]], signed)
             for op, (m, signed) in reference.rand_augment_space(31, 20, 27).items()}
    found = candidates(small, space)
    transform = RandAugment(num_ops=1)
    counts = Counter(found.get(back(transform(small, seed=seed)).tobytes(), "none")
                     for seed in range(560))
    assert "none" not in counts
    assert set(counts) == set(space)
    assert all(20 <= n <= 65 for n in counts.values()), counts   # 40 each on average


def test_trivial_augment_wide_draws_bins_and_ops_from_torchvisions_table(small):
    pytest.importorskip("torch")
    space = reference.trivial_augment_space(31)
    found = candidates(small, space)
    transform = TrivialAugmentWide()
    counts = Counter(found.get(back(transform(small, seed=seed)).tobytes(), "none")
                     for seed in range(280))
    assert "none" not in counts
    assert set(counts) == set(space)


@pytest.mark.parametrize("policy", ["imagenet", "cifar10", "svhn"])
def test_auto_augment_applies_one_of_its_sub_policies(small, policy):
    pytest.importorskip("torch")
    space = reference.auto_augment_space(20, 27)
    found = set()
    for pair in reference.AUTO_AUGMENT_POLICIES[policy]:
        for applied in ([], [0], [1], [0, 1]):
            for signs in ((1, 1), (1, -1), (-1, 1), (-1, -1)):
                image = pil(small)
                for k in applied:
                    op, _, bin_ = pair[k]
                    value = 0.0 if bin_ is None else space[op][0][bin_]
                    image = reference.OPS[op](image, (signs[k] if space[op][1] else 1) * value)
                found.add(back(image).tobytes())
    transform = AutoAugment(policy)
    outputs = [back(transform(small, seed=seed)).tobytes() for seed in range(120)]
    assert all(out in found for out in outputs)
    assert len(set(outputs)) > 20


@pytest.mark.parametrize("transform", [RandAugment(), TrivialAugmentWide(), AutoAugment("svhn"),
                                       RandAugment(4, 20, interpolation="bilinear", fill=128)])
@pytest.mark.parametrize("shape", [(33, 47), (33, 47, 1), (33, 47, 3), (33, 47, 4)])
def test_policies_repeat_for_a_seed_on_gray_and_colour_images(transform, shape):
    image = np.random.default_rng(3).integers(0, 256, shape, np.uint8)
    outputs = [transform(image, seed=seed) for seed in range(12)]
    assert all(out.shape[:2] == image.shape[:2] and out.size == image.size for out in outputs)
    for seed in (0, 11):
        np.testing.assert_array_equal(transform(image, seed=seed), outputs[seed])
    assert len({out.tobytes() for out in outputs}) > 3


def test_the_loader_gives_the_same_batches_on_any_number_of_workers(pictures):
    items = [(np.ascontiguousarray(pictures[3][k:k + 64, k:k + 80]), k) for k in range(12)]
    chain = Compose([RandomResizedCrop(48), RandAugment(), TrivialAugmentWide(), AutoAugment(),
                     ToFloat()])
    assert_same_batches_on_workers(items, chain, batch_size=4, seed=9)


class _Policy:
    value = "cifar10"


@pytest.mark.parametrize("make,error,match", [
    (lambda: RandAugment(num_ops=-1), ValueError, "num_ops"),
    (lambda: RandAugment(num_ops=1.5), TypeError, "num_ops"),
    (lambda: RandAugment(magnitude=31), ValueError, "magnitude"),
    (lambda: RandAugment(magnitude=5, num_magnitude_bins=5), ValueError, "magnitude"),
    (lambda: RandAugment(num_magnitude_bins=1, magnitude=0), ValueError, "num_magnitude_bins"),
    (lambda: TrivialAugmentWide(num_magnitude_bins=True), TypeError, "num_magnitude_bins"),
    (lambda: RandAugment(interpolation="bicubic"), ValueError, "interpolation"),
    (lambda: TrivialAugmentWide(fill="white"), TypeError, "Fill"),
    (lambda: AutoAugment("imagenet2"), ValueError, "policy imagenet2 is not recognized"),
])
def test_arguments_are_checked(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_torchvision_enum_values_are_taken_and_two_channels_refused():
    assert AutoAugment(_Policy()).policy == "cifar10"
    with pytest.raises(ValueError, match="1, 3 or 4 channels"):
        RandAugment()(np.zeros((8, 8, 2), np.uint8))
    with pytest.raises(ValueError, match="uint8"):
        TrivialAugmentWide()(np.zeros((8, 8, 3), np.float32))
    with pytest.raises(ValueError, match="fill"):
        AutoAugment(fill=256)(np.zeros((8, 8, 3), np.uint8))
