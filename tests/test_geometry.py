"""Warps, random geometry and erasing: against Pillow (torchvision's PIL backend), checks, seeds."""

import io
import math

import numpy as np
import pytest
from conftest import natural_image
from PIL import Image as PILImage

from dataloader import kernels
from dataloader.transforms import (
    CenterCrop,
    Compose,
    Crop,
    Decode,
    Normalize,
    RandomAffine,
    RandomCrop,
    RandomErasing,
    RandomResizedCrop,
    RandomRotation,
    RandomVFlip,
    Resize,
    ToChw,
    ToFloat,
)

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
PIL_FILTERS = {"nearest": PILImage.Resampling.NEAREST, "bilinear": PILImage.Resampling.BILINEAR}


def pil(array):
    return PILImage.fromarray(array[:, :, 0] if array.shape[2] == 1 else array)


def back(image):
    array = np.asarray(image)
    return array[:, :, None] if array.ndim == 2 else array


def inverse_affine_matrix(center, angle, translate, scale, shear):
    """torchvision's _get_inverse_affine_matrix (functional.py), as F.affine calls it for PIL."""
    rot, sx, sy = math.radians(angle), math.radians(shear[0]), math.radians(shear[1])
    cx, cy = center
    tx, ty = translate
    a = math.cos(rot - sy) / math.cos(sy)
    b = -math.cos(rot - sy) * math.tan(sx) / math.cos(sy) - math.sin(rot)
    c = math.sin(rot - sy) / math.cos(sy)
    d = -math.sin(rot - sy) * math.tan(sx) / math.cos(sy) + math.cos(rot)
    matrix = [x / scale for x in [d, -b, 0.0, -c, a, 0.0]]
    matrix[2] += matrix[0] * (-cx - tx) + matrix[1] * (-cy - ty)
    matrix[5] += matrix[3] * (-cx - tx) + matrix[4] * (-cy - ty)
    matrix[2] += cx
    matrix[5] += cy
    return matrix


def assert_close(ours, theirs, bound):
    assert ours.shape == theirs.shape
    difference = np.abs(ours.astype(int) - theirs.astype(int))
    assert difference.max() <= bound, f"max difference {difference.max()}"


def photo(photos, name, channels):
    image = PILImage.open(io.BytesIO(photos[name]))
    image = image.convert({1: "L", 3: "RGB", 4: "RGBA"}[channels])
    if channels == 4:  # an alpha ramp, so premultiplication matters
        alpha = np.linspace(0, 255, image.width * image.height).reshape(image.height, -1)
        image.putalpha(PILImage.fromarray(alpha.astype(np.uint8)))
    return back(image.resize((image.width // 3, image.height // 3)))


# --- the kernel against Pillow --------------------------------------------------------------

@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("interpolation", ["nearest", "bilinear"])
@pytest.mark.parametrize("angle, translate, scale, shear", [
    (0.0, (0, 0), 1.0, (0.0, 0.0)), (30.0, (3, -5), 1.0, (0.0, 0.0)),
    (-47.5, (0, 0), 0.8, (10.0, -4.0)), (90.0, (7, 2), 1.3, (0.0, 20.0)),
    (180.0, (0, 0), 1.0, (0.0, 0.0)), (12.0, (-11, 9), 0.55, (-30.0, 15.0))])
def test_affine_matches_pillow_transform_on_photographs(photos, channels, interpolation, angle,
                                                        translate, scale, shear):
    image = photo(photos, "astronaut.png", channels)
    h, w = image.shape[:2]
    matrix = inverse_affine_matrix((w * 0.5, h * 0.5), angle, translate, scale, shear)
    fill = (10, 200, 30, 255)[:channels]
    ours = kernels.affine(image, matrix, interpolation=interpolation, fill=fill)
    theirs = back(pil(image).transform((w, h), PILImage.Transform.AFFINE, matrix,
                                       PIL_FILTERS[interpolation], fillcolor=fill))
    assert_close(ours, theirs, 0 if interpolation == "nearest" else 1)


@pytest.mark.parametrize("size", [(1, 1), (1, 9), (13, 2), (31, 47)])
def test_affine_matches_pillow_on_odd_sizes_strides_and_output_sizes(size):
    image = natural_image(*size)[:, ::-1]  # a negative stride, copied by the argument check
    matrix = inverse_affine_matrix((size[1] * 0.5, size[0] * 0.5), 33.0, (1, 1), 0.7, (5, 5))
    for interpolation in ("nearest", "bilinear"):
        ours = kernels.affine(image, matrix, (size[0] + 3, size[1] + 5),
                              interpolation=interpolation)
        theirs = back(pil(np.ascontiguousarray(image)).transform(
            (size[1] + 5, size[0] + 3), PILImage.Transform.AFFINE, matrix,
            PIL_FILTERS[interpolation], fillcolor=(0, 0, 0)))
        assert_close(ours, theirs, 0 if interpolation == "nearest" else 1)


def test_affine_refuses_what_it_cannot_warp():
    with pytest.raises(ValueError, match="interpolation"):
        kernels.affine(natural_image(4, 4), (1, 0, 0, 0, 1, 0), interpolation="bicubic")
    with pytest.raises(TypeError, match="6 numbers"):
        kernels.affine(natural_image(4, 4), (1, 0, 0))
    with pytest.raises(ValueError, match="channels"):
        kernels.affine(np.zeros((4, 4, 2), np.uint8), (1, 0, 0, 0, 1, 0))
    with pytest.raises(ValueError, match="fill"):
        kernels.affine(natural_image(4, 4), (1, 0, 0, 0, 1, 0), fill=300)


# --- RandomRotation and RandomAffine against Pillow, with fixed draws -----------------------

@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("interpolation", ["nearest", "bilinear"])
@pytest.mark.parametrize("angle, expand, center", [
    (0.0, False, None), (90.0, False, None), (90.0, True, None), (-30.0, True, None),
    (45.0, False, (10.0, 20.5)), (137.0, True, (3, 4)), (270.0, True, None), (200.0, False, None)])
def test_random_rotation_matches_pillow_rotate(photos, channels, interpolation, angle, expand,
                                               center):
    image = photo(photos, "chelsea.png", channels)
    fill = (255, 0, 128, 200)[:channels]
    ours = RandomRotation((angle, angle), interpolation, expand, center, fill)(image, seed=0)
    theirs = back(pil(image).rotate(angle, PIL_FILTERS[interpolation], expand, center,
                                    fillcolor=fill))
    assert_close(ours, theirs, 0 if interpolation == "nearest" else 1)


@pytest.mark.parametrize("interpolation", ["nearest", "bilinear"])
@pytest.mark.parametrize("angle, scale, shear, center", [
    (25.0, 1.2, (8.0, 0.0), None), (-70.0, 0.75, (-12.0, 6.0), (40.0, 30.0)),
    (0.0, 1.0, (0.0, 0.0), None)])
def test_random_affine_matches_torchvisions_pil_affine(photos, interpolation, angle, scale, shear,
                                                      center):
    image = photo(photos, "coffee.png", 3)
    h, w = image.shape[:2]
    transform = RandomAffine((angle, angle), scale=(scale, scale),
                             shear=(shear[0], shear[0], shear[1], shear[1]),
                             interpolation=interpolation, fill=7, center=center)
    ours = transform(image, seed=1)
    matrix = inverse_affine_matrix(center or (w * 0.5, h * 0.5), angle, (0, 0), scale, shear)
    theirs = back(pil(image).transform((w, h), PILImage.Transform.AFFINE, matrix,
                                       PIL_FILTERS[interpolation], fillcolor=(7, 7, 7)))
    assert_close(ours, theirs, 0 if interpolation == "nearest" else 1)


def test_random_affine_translation_is_a_whole_pixel_shift_within_bounds():
    image = natural_image(40, 50)
    seen = set()
    for seed in range(40):
        out = RandomAffine(0, translate=(0.1, 0.2))(image, seed=seed)
        shifts = [(dy, dx) for dy in range(-8, 9) for dx in range(-5, 6)
                  if np.array_equal(out, kernels.affine(image, (1, 0, -dx, 0, 1, -dy)))]
        assert len(shifts) == 1
        seen.add(shifts[0])
    assert len(seen) > 10


def test_random_draws_cover_the_range_and_repeat_for_a_seed():
    image = natural_image(30, 30)
    rotation = RandomRotation(40, interpolation="bilinear")
    draws = [rotation(image, seed=s) for s in range(20)]
    assert all(np.array_equal(a, rotation(image, seed=s)) for s, a in enumerate(draws))
    assert len({a.tobytes() for a in draws}) == 20
    flips = [RandomVFlip()(image, seed=s) for s in range(40)]
    flipped = sum(np.array_equal(f, image[::-1]) for f in flips)
    assert 5 < flipped < 35 and flipped + sum(np.array_equal(f, image) for f in flips) == 40


def test_expanded_rotation_has_pillows_size_and_no_static_shape():
    image = natural_image(37, 53)
    for seed in range(10):
        out = RandomRotation(90, expand=True)(image, seed=seed)
        assert out.shape[0] >= 37 and out.shape[1] >= 37
    from dataloader._images.chains import output_shape

    assert output_shape(Compose([Decode("RGB"), RandomRotation(10, expand=True)])) is None
    fixed = Compose([Decode("RGB"), RandomRotation(10, expand=True), Resize((8, 8))])
    assert output_shape(fixed) == (8, 8, 3, "uint8", "HWC")


def test_rotation_in_a_float_chain_and_into_batches():
    chain = Compose([RandomResizedCrop(32), RandomRotation(20, interpolation="bilinear"),
                     ToFloat(), Normalize(MEAN, STD), ToChw()])
    image = natural_image(60, 80)
    unfused = Compose([RandomResizedCrop(32), RandomRotation(20, interpolation="bilinear")])
    expected = unfused(image, seed=4).astype(np.float32) / 255
    expected = (expected - np.float32(MEAN)) / np.float32(STD)
    np.testing.assert_allclose(chain(image, seed=4), expected.transpose(2, 0, 1), atol=1e-6)


@pytest.mark.parametrize("make, error, match", [
    (lambda: RandomRotation(-1), ValueError, "positive"),
    (lambda: RandomRotation("a"), TypeError, "sequence"),
    (lambda: RandomRotation((1, 2, 3)), ValueError, "length 2"),
    (lambda: RandomRotation((5, 1)), ValueError, "min, max"),
    (lambda: RandomRotation(10, interpolation="bicubic"), ValueError, "interpolation"),
    (lambda: RandomRotation(10, center=(1,)), ValueError, "center"),
    (lambda: RandomRotation(10, fill="red"), TypeError, "Fill"),
    (lambda: RandomRotation(10, expand="yes"), TypeError, "expand"),
    (lambda: RandomAffine(10, translate=(0.5, 1.5)), ValueError, "between 0 and 1"),
    (lambda: RandomAffine(10, translate=0.5), TypeError, "translate"),
    (lambda: RandomAffine(10, scale=(0, 1)), ValueError, "positive"),
    (lambda: RandomAffine(10, shear=(1, 2, 3)), ValueError, "length 2 or 4"),
    (lambda: RandomAffine(10, shear=-3), ValueError, "positive"),
    (lambda: RandomAffine(float("nan")), ValueError, "finite"),
    (lambda: RandomVFlip(1.5), ValueError, "probability"),
])
def test_arguments_are_checked_as_torchvision_checks_them(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_warps_refuse_float_and_two_channel_images_and_wide_fills():
    with pytest.raises(ValueError, match="uint8"):
        RandomRotation(5)(np.zeros((4, 4, 3), np.float32))
    with pytest.raises(ValueError, match="1, 3 or 4 channels"):
        RandomAffine(5)(np.zeros((4, 4, 2), np.uint8))
    with pytest.raises(ValueError, match="fill"):
        RandomRotation(5, fill=256)(np.zeros((4, 4, 3), np.uint8))


# --- RandomErasing ---------------------------------------------------------------------------

def erased_window(before, after):
    changed = np.argwhere((before != after).any(axis=-1) if before.ndim == 3 else before != after)
    if not len(changed):
        return None
    (top, left), (bottom, right) = changed.min(axis=0), changed.max(axis=0)
    return top, left, bottom - top + 1, right - left + 1


@pytest.mark.parametrize("layout", ["HWC", "CHW"])
def test_random_erasing_erases_one_window_of_the_fused_float_output(layout):
    image = natural_image(48, 64)
    head = [RandomResizedCrop(40), ToFloat(), Normalize(MEAN, STD)] + (
        [ToChw()] if layout == "CHW" else [])
    erasing = RandomErasing(p=1.0, value=(1.0, 2.0, 3.0))
    for seed in range(10):
        plain = Compose(head)(image, seed=seed)
        out = Compose([*head, erasing])(image, seed=seed)
        hwc_out, hwc_plain = (out, plain) if layout == "HWC" else (
            out.transpose(1, 2, 0), plain.transpose(1, 2, 0))
        top, left, height, width = erased_window(hwc_plain, hwc_out)
        assert 0.02 * 1600 * 0.5 <= height * width <= 0.33 * 1600 * 1.5
        np.testing.assert_array_equal(hwc_out[top:top + height, left:left + width],
                                      np.broadcast_to(np.float32([1, 2, 3]), (height, width, 3)))
        outside = np.ones(hwc_out.shape[:2], bool)
        outside[top:top + height, left:left + width] = False
        np.testing.assert_array_equal(hwc_out[outside], hwc_plain[outside])


def test_random_erasing_noise_probability_and_input_left_alone():
    image = np.zeros((64, 64, 3), np.float32)
    out = RandomErasing(p=1.0, scale=(0.3, 0.3), value="random")(image, seed=2)
    assert not image.any()
    noise = out[out != 0]
    assert noise.size > 3000 and abs(noise.mean()) < 0.1 and abs(noise.std() - 1) < 0.1
    hits = sum(bool(RandomErasing(p=0.3)(image + 1, seed=s).min() == 0) for s in range(200))
    assert 35 < hits < 85


def test_random_erasing_in_batches_matches_single_items():
    from dataloader import DataLoader, ImageCollator

    chain = Compose([RandomResizedCrop(16), ToFloat(), Normalize(MEAN, STD), ToChw(),
                     RandomErasing(p=0.7, value="random")])
    data = [natural_image(30 + i, 40) for i in range(6)]
    batches = [np.asarray(b).copy() for w in (0, 2) for b in DataLoader(
        data, batch_size=3, transform=chain, collate_fn=ImageCollator(), seed=9, num_workers=w)]
    np.testing.assert_array_equal(batches[0], batches[2])
    np.testing.assert_array_equal(batches[1], batches[3])
    single = chain.bind_epoch(9, 0)
    for i, image in enumerate(data):
        np.testing.assert_array_equal(batches[i // 3][i % 3], single(i, image))
    assert (np.concatenate(batches[:2]) == 0).sum() < 100  # erased with noise, not zeros


@pytest.mark.parametrize("make, error, match", [
    (lambda: RandomErasing(value="noise"), ValueError, "'random'"),
    (lambda: RandomErasing(value=object()), TypeError, "value"),
    (lambda: RandomErasing(scale=0.5), TypeError, "Scale should be a sequence"),
    (lambda: RandomErasing(ratio=1.0), TypeError, "Ratio should be a sequence"),
    (lambda: RandomErasing(scale=(0.1, 1.5)), ValueError, "between 0 and 1"),
    (lambda: RandomErasing(scale=(-0.1, 0.5)), ValueError, "between 0 and 1"),
    (lambda: RandomErasing(p=2), ValueError, "probability"),
])
def test_random_erasing_arguments(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_random_erasing_refuses_uint8_and_wrong_value_counts():
    with pytest.raises(ValueError, match="float32"):
        RandomErasing(p=1)(np.zeros((8, 8, 3), np.uint8))
    with pytest.raises(ValueError, match="one value or one per channel"):
        RandomErasing(p=1, value=(1, 2))(np.zeros((8, 8, 3), np.float32))


# --- a crop after a warp: only its window is warped ------------------------------------------

@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("interpolation", ["nearest", "bilinear"])
@pytest.mark.parametrize("warp", [
    lambda i: RandomRotation((33, 33), i, expand=True, fill=9),
    lambda i: RandomAffine((-20, -20), scale=(1.3, 1.3), shear=(5, 5, 2, 2), interpolation=i),
    lambda i: RandomAffine(0, scale=(0.7, 0.7), interpolation=i)])  # Pillow's scale path
def test_a_crop_after_a_warp_gives_the_whole_warps_window(photos, channels, interpolation, warp):
    image = photo(photos, "coffee.png", channels)
    whole = warp(interpolation)(image, seed=0)
    center = (round((whole.shape[0] - 61) / 2), round((whole.shape[1] - 61) / 2))
    for crop, (top, left) in ((CenterCrop(61), center), (Crop(7, 30, 40, 55), (7, 30))):
        fused = Compose([warp(interpolation), crop])(image, seed=0)
        np.testing.assert_array_equal(fused, whole[top:top + fused.shape[0],
                                                   left:left + fused.shape[1]])
    out = Compose([warp(interpolation), RandomCrop(50)])(image, seed=3)
    assert any(np.array_equal(out, whole[t:t + 50, s:s + 50])
               for t in range(whole.shape[0] - 49) for s in range(whole.shape[1] - 49))

