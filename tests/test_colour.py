"""Colour and filter transforms against their references (Pillow's own
functions, torchvision's Gaussian kernel), their argument checks, their draws,
and ColorJitter's no-op leaving a chain as it was."""

import io
import itertools

import numpy as np
import pytest
from conftest import assert_same_batches_on_workers, natural_image
from PIL import Image as PILImage
from PIL import ImageEnhance, ImageOps

from dataloader._images.chains import compile_chain
from dataloader.transforms import (
    ColorJitter,
    Compose,
    Crop,
    GaussianBlur,
    Grayscale,
    Normalize,
    RandomAdjustSharpness,
    RandomAutocontrast,
    RandomEqualize,
    RandomGrayscale,
    RandomHFlip,
    RandomInvert,
    RandomPosterize,
    RandomResizedCrop,
    RandomSolarize,
    ToChw,
    ToFloat,
)

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


@pytest.fixture(scope="module")
def pictures(photos):
    """Real photographs, cut to odd sizes (RGB), plus gray and RGBA versions."""
    images = []
    for name, (top, left, height, width) in [("astronaut.png", (40, 90, 131, 157)),
                                             ("coffee.png", (0, 0, 97, 203)),
                                             ("chelsea.png", (100, 50, 120, 99))]:
        with PILImage.open(io.BytesIO(photos[name])) as image:
            rgb = np.asarray(image.convert("RGB"))[top:top + height, left:left + width]
        images.append(np.ascontiguousarray(rgb))
    return images


def pil(array):
    return PILImage.fromarray(array[:, :, 0] if array.shape[2] == 1 else array)


def pixels(image):
    array = np.asarray(image)
    return array[:, :, None] if array.ndim == 2 else array


def assert_close(ours, reference, bound):
    ours, reference = np.asarray(ours).astype(int), pixels(reference).astype(int)
    assert ours.shape == reference.shape
    assert np.abs(ours - reference).max() <= bound


def torchvision_hue(image, hue_factor):
    """torchvision's adjust_hue on a PIL image (numpy's uint8 cast wraps modulo 256)."""
    if image.mode == "L":
        return image
    h, s, v = image.convert("HSV").split()
    np_h = np.array(h, dtype=np.uint8) + np.uint8(int(hue_factor * 255) % 256)
    return PILImage.merge("HSV", (PILImage.fromarray(np_h, "L"), s, v)).convert(image.mode)


# (our transform with fixed parameters, the reference on a PIL image, bound)
REFERENCES = [
    (ColorJitter(brightness=(1.7, 1.7)), lambda i: ImageEnhance.Brightness(i).enhance(1.7), 0),
    (ColorJitter(brightness=(0.35, 0.35)), lambda i: ImageEnhance.Brightness(i).enhance(0.35), 0),
    (ColorJitter(contrast=(0.4, 0.4)), lambda i: ImageEnhance.Contrast(i).enhance(0.4), 0),
    (ColorJitter(contrast=(1.8, 1.8)), lambda i: ImageEnhance.Contrast(i).enhance(1.8), 0),
    (ColorJitter(saturation=(0.0, 0.0)), lambda i: ImageEnhance.Color(i).enhance(0.0), 0),
    (ColorJitter(saturation=(1.6, 1.6)), lambda i: ImageEnhance.Color(i).enhance(1.6), 0),
    (ColorJitter(hue=(0.2, 0.2)), lambda i: torchvision_hue(i, 0.2), 0),
    (ColorJitter(hue=(-0.37, -0.37)), lambda i: torchvision_hue(i, -0.37), 0),
    (ColorJitter(hue=(0.001, 0.001)), lambda i: torchvision_hue(i, 0.001), 0),
    (RandomAdjustSharpness(0.0, p=1.0), lambda i: ImageEnhance.Sharpness(i).enhance(0.0), 0),
    (RandomAdjustSharpness(2.5, p=1.0), lambda i: ImageEnhance.Sharpness(i).enhance(2.5), 0),
    (Grayscale(), lambda i: i.convert("L"), 0),
    (RandomPosterize(3, p=1.0), lambda i: ImageOps.posterize(i, 3), 0),
    (RandomPosterize(1, p=1.0), lambda i: ImageOps.posterize(i, 1), 0),
    (RandomSolarize(100.5, p=1.0), lambda i: ImageOps.solarize(i, 100.5), 0),
    (RandomAutocontrast(p=1.0), ImageOps.autocontrast, 0),
    (RandomEqualize(p=1.0), ImageOps.equalize, 0),
    (RandomInvert(p=1.0), ImageOps.invert, 0),
]


@pytest.mark.parametrize("transform,reference,bound", REFERENCES,
                         ids=[repr(t) for t, _, _ in REFERENCES])
def test_each_op_matches_pillow_on_photographs(pictures, transform, reference, bound):
    for rgb in pictures:
        assert_close(transform(rgb), reference(pil(rgb)), bound)
        gray = np.asarray(pil(rgb).convert("L"))[:, :, None]
        assert_close(transform(gray), reference(pil(gray)), bound)


@pytest.mark.parametrize("transform,reference,bound", REFERENCES[:12],
                         ids=[repr(t) for t, _, _ in REFERENCES[:12]])
def test_a_window_of_a_larger_image_gives_the_windows_result(pictures, transform, reference,
                                                             bound):
    # The op reads a strided view (a crop of the chain); odd offsets and sizes.
    rgb = pictures[0]
    window = rgb[3:3 + 61, 5:5 + 77]
    ours = Compose([Crop(3, 5, 61, 77), transform])(rgb)
    assert_close(ours, reference(pil(np.ascontiguousarray(window))), bound)


def test_grayscale_channels_follow_torchvision(pictures):
    rgb = pictures[1]
    luma = np.asarray(pil(rgb).convert("L"))
    np.testing.assert_array_equal(Grayscale(3)(rgb), np.dstack([luma] * 3))
    np.testing.assert_array_equal(RandomGrayscale(p=1.0)(rgb), np.dstack([luma] * 3))
    gray = luma[:, :, None]
    np.testing.assert_array_equal(RandomGrayscale(p=1.0)(gray), gray)
    np.testing.assert_array_equal(Grayscale(3)(gray), np.dstack([luma] * 3))


def test_alpha_is_kept_by_the_colour_ops(pictures):
    rgb = pictures[2]
    alpha = natural_image(*rgb.shape[:2], channels=1, seed=3)[:, :, 0]
    rgba = np.dstack([rgb, alpha])
    for transform in [ColorJitter(0.5, 0.5, 0.5, 0.3), RandomGrayscale(p=1.0), RandomInvert(p=1.0),
                      RandomEqualize(p=1.0), RandomAdjustSharpness(2.0, p=1.0)]:
        out = transform(rgba, seed=1)
        np.testing.assert_array_equal(out[:, :, 3], alpha)
        np.testing.assert_array_equal(out[:, :, :3], transform(rgb, seed=1))
    # Pillow's own enhancers keep alpha too.
    np.testing.assert_array_equal(ColorJitter(brightness=(0.5, 0.5))(rgba),
                                  pixels(ImageEnhance.Brightness(pil(rgba)).enhance(0.5)))


def torchvision_blur(image, kernel_size, sigma):
    """torchvision's gaussian_blur on a PIL image: its float32 kernel, a reflect pad,
    a 2-D correlation, round half to even."""
    def kernel1d(size, s):
        half = (size - 1) * 0.5
        x = np.linspace(-half, half, size, dtype=np.float32)
        pdf = np.exp(-0.5 * (x / np.float32(s)) ** 2, dtype=np.float32)
        return pdf / pdf.sum(dtype=np.float32)

    kx, ky = kernel1d(kernel_size[0], sigma), kernel1d(kernel_size[1], sigma)
    kernel = np.outer(ky, kx).astype(np.float32)
    rx, ry = kernel_size[0] // 2, kernel_size[1] // 2
    padded = np.pad(image.astype(np.float32), ((ry, ry), (rx, rx), (0, 0)), mode="reflect")
    out = np.zeros(image.shape, np.float32)
    h, w = image.shape[:2]
    for i, j in itertools.product(range(kernel_size[1]), range(kernel_size[0])):
        out += kernel[i, j] * padded[i:i + h, j:j + w]
    return np.clip(np.round(out), 0, 255).astype(np.uint8)


@pytest.mark.parametrize("kernel_size,sigma", [(3, 0.8), ((5, 9), 2.0), ((7, 1), 1.3), (1, 0.5),
                                               (11, 4.0)])
def test_gaussian_blur_matches_torchvisions_kernel(pictures, kernel_size, sigma):
    for rgb in pictures[:2]:
        sizes = (kernel_size, kernel_size) if isinstance(kernel_size, int) else kernel_size
        ours = GaussianBlur(kernel_size, sigma=sigma)(rgb)
        reference = torchvision_blur(rgb, sizes, sigma)
        # Float sums in another order round the other way at exact halves, rarely.
        difference = np.abs(ours.astype(int) - reference)
        assert difference.max() <= 1
        assert (difference == 0).mean() > 0.99


def test_gaussian_blur_matches_torch_itself(pictures):
    torch = pytest.importorskip("torch")
    rgb = pictures[0]
    tensor = torch.from_numpy(rgb).permute(2, 0, 1)[None].float()
    kx = torch.from_numpy(np.exp(-0.5 * (np.linspace(-2, 2, 5) / 1.5) ** 2).astype(np.float32))
    kx = kx / kx.sum()
    kernel = torch.outer(kx, kx).expand(3, 1, 5, 5)
    padded = torch.nn.functional.pad(tensor, [2, 2, 2, 2], mode="reflect")
    blurred = torch.nn.functional.conv2d(padded, kernel, groups=3).round()[0].permute(1, 2, 0)
    reference = blurred.to(torch.uint8).numpy()
    difference = np.abs(GaussianBlur(5, 1.5)(rgb).astype(int) - reference)
    assert difference.max() <= 1 and (difference == 0).mean() > 0.99


def test_a_kernel_larger_than_the_image_keeps_reflecting():
    image = natural_image(2, 3, channels=3)
    out = GaussianBlur((9, 7), sigma=3.0)(image)
    assert out.shape == image.shape
    # A 1-pixel image reflects onto itself: the blur changes nothing.
    one = natural_image(1, 1, channels=3)
    np.testing.assert_array_equal(GaussianBlur(5, 2.0)(one), one)


def enhance_chain(image, order, factors):
    """Pillow's adjustments in the given order (0 brightness, 1 contrast, 2 saturation, 3 hue)."""
    steps = [lambda i: ImageEnhance.Brightness(i).enhance(factors[0]),
             lambda i: ImageEnhance.Contrast(i).enhance(factors[1]),
             lambda i: ImageEnhance.Color(i).enhance(factors[2]),
             lambda i: torchvision_hue(i, factors[3])]
    for which in order:
        image = steps[which](image)
    return pixels(image)


def test_color_jitter_runs_its_four_adjustments_in_a_random_order(pictures):
    rgb = pictures[2][:40, :40]
    factors = (1.3, 0.6, 1.7, 0.12)
    jitter = ColorJitter(*[(f, f) for f in factors])
    references = {order: enhance_chain(pil(rgb), order, factors)
                  for order in itertools.permutations(range(4))}
    seen = set()
    for seed in range(24):
        out = jitter(rgb, seed=seed)
        matches = [order for order, ref in references.items() if np.array_equal(out, ref)]
        assert matches, f"seed {seed} matches no order of the four adjustments"
        seen.add(tuple(matches))
    assert len(seen) > 4


def test_color_jitter_draws_its_factors_in_range(pictures):
    rgb = pictures[0]
    outputs = [ColorJitter(brightness=(0.5, 1.5))(rgb, seed=seed) for seed in range(8)]
    means = [out.mean() for out in outputs]
    assert len(set(means)) == 8
    assert rgb.mean() * 0.45 < min(means) and max(means) < rgb.mean() * 1.55


def test_no_op_color_jitter_leaves_the_chain_as_it_was(pictures):
    assert ColorJitter()._steps() == []
    unchanged = ColorJitter(brightness=(1, 1), contrast=0.0, saturation=(1.0, 1.0), hue=(0, 0))
    assert unchanged._steps() == []
    plain = Compose([RandomResizedCrop(64), RandomHFlip(), ToFloat(), Normalize(MEAN, STD),
                     ToChw()])
    jittered = Compose([RandomResizedCrop(64), RandomHFlip(), ColorJitter(0, 0, 0, 0), ToFloat(),
                        Normalize(MEAN, STD), ToChw()])
    assert compile_chain(jittered).steps == compile_chain(plain).steps
    for seed in range(4):
        np.testing.assert_array_equal(jittered(pictures[0], seed=seed),
                                      plain(pictures[0], seed=seed))
    np.testing.assert_array_equal(ColorJitter()(pictures[1]), pictures[1])


def test_random_ops_apply_with_their_chance(pictures):
    rgb = pictures[1][:32, :32]
    inverted = 255 - rgb
    applied = [np.array_equal(RandomInvert(p=0.5)(rgb, seed=seed), inverted) for seed in range(200)]
    assert 60 < sum(applied) < 140
    assert not any(np.array_equal(RandomInvert(p=0.0)(rgb, seed=s), inverted) for s in range(20))
    gray = [RandomGrayscale(p=0.3)(rgb, seed=seed) for seed in range(100)]
    assert 10 < sum(bool((g[:, :, 0] == g[:, :, 1]).all()) for g in gray) < 50


SEEDED = [ColorJitter(0.4, 0.4, 0.4, 0.1), RandomGrayscale(0.5), GaussianBlur(5, (0.1, 2.0)),
          RandomPosterize(4), RandomSolarize(128), RandomAdjustSharpness(2.0),
          RandomAutocontrast(), RandomEqualize(), RandomInvert()]


@pytest.mark.parametrize("transform", SEEDED, ids=repr)
def test_a_seed_fixes_the_draws(pictures, transform):
    rgb = pictures[0] // 2 + 40   # some contrast to stretch
    first = [transform(rgb, seed=seed) for seed in range(6)]
    again = [transform(rgb, seed=seed) for seed in range(6)]
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a, b)
    assert len({out.tobytes() for out in first}) > 1


def test_the_loader_gives_the_same_batches_on_any_number_of_workers(pictures):
    items = [(np.ascontiguousarray(rgb[:64, :64]), k) for k, rgb in enumerate(pictures)] * 3
    chain = Compose([ColorJitter(0.4, 0.4, 0.4, 0.1), RandomGrayscale(0.2), GaussianBlur(3),
                     RandomSolarize(128), RandomEqualize(), ToFloat()])
    assert_same_batches_on_workers(items, chain, batch_size=3, seed=5)


@pytest.mark.parametrize("make,error,match", [
    (lambda: ColorJitter(brightness=-0.1), ValueError, "non negative"),
    (lambda: ColorJitter(hue=0.6), ValueError, "hue values should be between"),
    (lambda: ColorJitter(hue=(-0.6, 0.1)), ValueError, "hue values should be between"),
    (lambda: ColorJitter(contrast=(1.5, 0.5)), ValueError, "contrast values should be between"),
    (lambda: ColorJitter(saturation=(-1, 1)), ValueError, "saturation values should be between"),
    (lambda: ColorJitter(brightness="0.4"), TypeError, "single number or a list/tuple"),
    (lambda: ColorJitter(brightness=(0.1, 0.2, 0.3)), TypeError, "single number or a list/tuple"),
    (lambda: ColorJitter(brightness=float("nan")), ValueError, "finite"),
    (lambda: Grayscale(2), ValueError, "either 1 or 3"),
    (lambda: Grayscale(3.0), TypeError, "must be an int"),
    (lambda: RandomGrayscale(1.5), ValueError, "probability"),
    (lambda: GaussianBlur(4), ValueError, "odd and positive"),
    (lambda: GaussianBlur((3, -1)), ValueError, "odd and positive"),
    (lambda: GaussianBlur((3, 5, 7)), ValueError, "tuple/list of two integers"),
    (lambda: GaussianBlur(3.5), TypeError, "must be an int"),
    (lambda: GaussianBlur(3, sigma=0), ValueError, "must be positive"),
    (lambda: GaussianBlur(3, sigma=(2.0, 1.0)), ValueError, r"of the form \(min, max\)"),
    (lambda: GaussianBlur(3, sigma="a"), ValueError, "single number or a list/tuple"),
    (lambda: RandomPosterize(9), ValueError, r"1\.\.8"),
    (lambda: RandomPosterize(0), ValueError, r"1\.\.8"),
    (lambda: RandomPosterize(4.0), TypeError, "must be an int"),
    (lambda: RandomSolarize("128"), TypeError, "must be a number"),
    (lambda: RandomAdjustSharpness(-1.0), ValueError, "non-negative"),
    (lambda: RandomAutocontrast(p=-0.1), ValueError, "probability"),
    (lambda: RandomEqualize(p="x"), TypeError, "must be a number"),
    (lambda: RandomInvert(p=2), ValueError, "probability"),
])
def test_arguments_are_checked_as_torchvision_checks_them(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_colour_ops_refuse_float_images():
    with pytest.raises(ValueError, match="ColorJitter got a float32 HWC image"):
        Compose([ToFloat(), ColorJitter(0.5)])(np.zeros((4, 4, 3), np.uint8))


def test_reprs_show_what_was_given():
    assert repr(ColorJitter(0.4, hue=(-0.1, 0.1))) == "ColorJitter(brightness=0.4, hue=(-0.1, 0.1))"
    assert repr(GaussianBlur(3)) == "GaussianBlur(kernel_size=(3, 3))"
    assert repr(RandomSolarize(128, p=1.0)) == "RandomSolarize(threshold=128.0, p=1.0)"


def test_a_colour_op_before_the_float_tail_gives_the_unfused_values(pictures):
    # The jitter runs on the resize's uint8 output; the tail then maps it as it maps any image.
    head = [RandomResizedCrop(48), RandomHFlip(), ColorJitter(0.4, 0.4, 0.4, 0.1)]
    tail = [ToFloat(), Normalize(MEAN, STD), ToChw()]
    for seed in range(6):
        uint8 = Compose(head)(pictures[0], seed=seed)
        np.testing.assert_array_equal(Compose(head + tail)(pictures[0], seed=seed),
                                      Compose(tail)(uint8, seed=0))
