"""A chain's float tail (ToFloat, Normalize, ToChw) written by its last resize pass.

The fused chain must give what the same chain gives when its tail runs as a
separate pass over the uint8 image (a second chain, applied to the first
one's output): every value op maps each sample on its own.
"""

import numpy as np
import pytest
from conftest import encode, natural_image

from dataloader import DataLoader, ImageCollator
from dataloader._core.resize import vectorised
from dataloader.transforms import (
    CenterCrop,
    Compose,
    Crop,
    Decode,
    HFlip,
    Normalize,
    RandomHFlip,
    RandomResizedCrop,
    Resize,
    ToChw,
    ToFloat,
    ToGray,
    ToHwc,
    ToRgba,
    VFlip,
)

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
FILTERS = ["nearest", "bilinear", "bicubic", "lanczos"]
TAILS = {
    "float-normalize-chw": [ToFloat(), Normalize(MEAN, STD), ToChw()],
    "normalize-chw": [Normalize(MEAN, STD), ToChw()],
    "float-chw": [ToFloat(), ToChw()],
    "float": [ToFloat()],
    "normalize": [Normalize(MEAN, STD)],
    "chw-float-normalize": [ToChw(), ToFloat(), Normalize(MEAN, STD)],
    "twice": [ToFloat(), Normalize(MEAN, STD), Normalize(0.5, 2.0), ToChw()],
    "hflip-float-normalize-chw": [HFlip(), ToFloat(), Normalize(MEAN, STD), ToChw()],
    "vflip-hflip-float": [VFlip(), ToFloat(), HFlip()],
    "flipped-back": [RandomHFlip(p=1.0), Normalize(MEAN, STD), HFlip(), VFlip(), ToChw()],
    "no-flip": [RandomHFlip(p=0.0), ToFloat(), ToChw()],
}
# Sizes that shrink or grow both sides or one side each (the two orders of
# the passes), and below, sizes that keep one side or both.
SIZES = [(64, 90), (23, 31), (40, 17), (120, 150), (30, 100), (100, 30)]


def pixels(data):
    return np.asarray(data)


def assert_tail_equal(head, tail, data, seed):
    """The chain head + tail against head, then tail as a second pass, and against the
    chain with ToHwc() before the tail (a no-op on HWC that keeps the tail a pass of its own)."""
    fused = pixels(Compose(head + tail)(data, seed=seed))
    unfused = pixels(Compose(tail)(np.array(pixels(Compose(head)(data, seed=seed)))))
    assert fused.dtype == unfused.dtype == np.float32 and fused.shape == unfused.shape
    np.testing.assert_array_equal(fused, unfused)
    np.testing.assert_array_equal(fused, pixels(Compose([*head, ToHwc(), *tail])(data, seed=seed)))


@pytest.fixture(params=[True, False], ids=["vectorised", "portable"])
def passes(request):
    previous = vectorised()
    vectorised(request.param)
    yield
    vectorised(previous)


@pytest.mark.parametrize("tail", TAILS, ids=list(TAILS))
@pytest.mark.parametrize("interpolation", FILTERS)
def test_a_resizes_float_tail_equals_the_separate_pass(passes, interpolation, tail):
    image = natural_image(57, 71, seed=3)
    for size in SIZES + [(57, 40), 57]:
        assert_tail_equal([Resize(size, interpolation=interpolation)], TAILS[tail], image, 0)


@pytest.mark.parametrize("interpolation", FILTERS)
def test_a_random_resized_crops_float_tail_equals_the_separate_pass(passes, interpolation):
    image = natural_image(61, 83, seed=5)
    for size in (32, (48, 20), 100):
        head = [RandomResizedCrop(size, interpolation=interpolation)]
        for seed in range(6):
            assert_tail_equal(head, TAILS["float-normalize-chw"], image, seed)


@pytest.mark.parametrize("interpolation", FILTERS)
def test_a_random_flip_in_the_tail_flips_the_items_it_draws(passes, interpolation):
    """torchvision's training chain: the draw is the chain's, with or without the fusion."""
    image = natural_image(61, 83, seed=5)
    data = encode(image, "JPEG", quality=90)
    tail = [RandomHFlip(), ToFloat(), Normalize(MEAN, STD), ToChw()]
    flipped = set()
    for source in (image, data):
        head = [Decode("RGB")] if source is data else []
        head.append(RandomResizedCrop(32, interpolation=interpolation))
        for seed in range(12):
            fused = pixels(Compose(head + tail)(source, seed=seed))
            unfused = pixels(Compose([*head, ToHwc(), *tail])(source, seed=seed))
            np.testing.assert_array_equal(fused, unfused)
            plain = pixels(Compose([*head, ToHwc(), *tail[1:]])(source, seed=seed))
            flipped.add(bool(np.array_equal(fused, plain[:, :, ::-1])))
            assert np.array_equal(fused, plain) or np.array_equal(fused, plain[:, :, ::-1])
    assert flipped == {True, False}


@pytest.mark.parametrize("interpolation", FILTERS)
@pytest.mark.parametrize("exact", [True, False], ids=["exact", "scaled"])
def test_a_decodes_resampling_writes_the_float_tail(passes, interpolation, exact):
    """The JPEG decode doing a RandomResizedCrop's or a Resize's work, then the tail."""
    data = encode(natural_image(160, 210, seed=9), "JPEG", quality=90)
    heads = [[Decode("RGB", exact=exact), RandomResizedCrop(24, interpolation=interpolation)],
             [Decode("RGB", exact=exact), Resize(30, interpolation=interpolation),
              CenterCrop(24)],
             [Decode("RGB", exact=exact), Resize((20, 36), interpolation=interpolation)],
             [Decode("RGB", exact=exact), Crop(10, 20, 100, 90),
              Resize(28, interpolation=interpolation)]]
    for head in heads:
        for seed in range(4):
            for tail in TAILS.values():
                assert_tail_equal(head, tail, data, seed)


@pytest.mark.parametrize("convert, channels", [(ToGray(), 1), (ToRgba(), 4)],
                         ids=["gray", "rgba"])
def test_every_channel_count_gets_its_own_table(convert, channels):
    image = natural_image(45, 52, seed=1)
    tail = [ToFloat(), Normalize((0.1, 0.2, 0.3, 0.4)[:channels], (0.5, 0.25, 0.2, 0.1)[:channels]),
            ToChw()]
    for interpolation in FILTERS:
        assert_tail_equal([convert, Resize((30, 41), interpolation=interpolation)], tail, image, 0)


def test_a_loader_batch_of_a_fused_chain_equals_the_separate_pass():
    data = [encode(natural_image(50 + 9 * i, 70 - 4 * i, seed=i), "JPEG", quality=90)
            for i in range(6)]
    head = [Decode("RGB"), RandomResizedCrop(32)]
    tail = TAILS["float-normalize-chw"]
    loader = DataLoader(data, batch_size=6, seed=2, transform=Compose(head + tail),
                        collate_fn=ImageCollator())
    batch = np.asarray(next(iter(loader)))
    bound = Compose(head).bind_epoch(loader.seed, 0)
    for index, item in enumerate(data):
        expected = pixels(Compose(tail)(np.array(pixels(bound(index, item)))))
        np.testing.assert_array_equal(batch[index], expected)
