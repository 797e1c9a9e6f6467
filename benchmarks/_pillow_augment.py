"""torchvision's automatic augmentations on Pillow images, written out.

torchvision is not a dependency (its wheels do not load against the CPU
build of torch the benchmarks use), so the reference side of the
augmentation benchmarks spells out what ``torchvision.transforms``'s
``RandAugment``, ``TrivialAugmentWide`` and ``AutoAugment`` do to a Pillow
image: the same operation spaces, the same magnitudes, the same draws from
torch's generator, and the Pillow calls torchvision's Pillow backend makes
(``Image.transform`` / ``Image.rotate``, ``ImageEnhance``, ``ImageOps``).
``random_erasing`` is ``RandomErasing`` on the normalised tensor.

The magnitude tables are torch's own float32 ``linspace`` values, and an op
without magnitudes draws no bin (as torchvision's ``magnitudes.ndim > 0``);
the tests compare the native policies' sub-ops against ``OPS`` here.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from PIL import Image, ImageEnhance, ImageOps

NEAREST = Image.Resampling.NEAREST
FILTERS = {"nearest": Image.Resampling.NEAREST, "bilinear": Image.Resampling.BILINEAR}


def _fill(image: Image.Image, fill) -> int | tuple[int, ...]:
    """torchvision's ``_parse_fill``: None is 0; one number for every band."""
    fill = 0 if fill is None else fill
    if isinstance(fill, (int, float)):
        fill = [fill] * len(image.getbands())
    fill = [int(value) for value in fill]
    return fill[0] if len(fill) == 1 else tuple(fill)


def _affine(image: Image.Image, *, angle: float = 0.0, translate=(0, 0),
            shear=(0.0, 0.0), center=None, interpolation: str = "nearest",
            fill=None) -> Image.Image:
    """torchvision's ``F.affine`` on a Pillow image (scale 1)."""
    cx, cy = center if center is not None else (image.width * 0.5, image.height * 0.5)
    tx, ty = translate
    rot, sx, sy = math.radians(angle), math.radians(shear[0]), math.radians(shear[1])
    a = math.cos(rot - sy) / math.cos(sy)
    b = -math.cos(rot - sy) * math.tan(sx) / math.cos(sy) - math.sin(rot)
    c = math.sin(rot - sy) / math.cos(sy)
    d = -math.sin(rot - sy) * math.tan(sx) / math.cos(sy) + math.cos(rot)
    # The inverse of the centred rotation-shear, then of the translation.
    m = [d, -b, 0.0, -c, a, 0.0]
    m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty) + cx
    m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty) + cy
    return image.transform(image.size, Image.Transform.AFFINE, m, FILTERS[interpolation],
                           fillcolor=_fill(image, fill))


def _shear(image: Image.Image, magnitude: float, axis: int, **options) -> Image.Image:
    degrees = math.degrees(math.atan(magnitude))
    return _affine(image, shear=(degrees, 0.0) if axis == 0 else (0.0, degrees), center=(0, 0),
                   **options)


def _rotate(image: Image.Image, angle: float, interpolation: str = "nearest",
            fill=None) -> Image.Image:
    return image.rotate(angle, FILTERS[interpolation], fillcolor=_fill(image, fill))


# torchvision's _apply_op: op(image, magnitude, interpolation=..., fill=...).
OPS: dict[str, Callable[..., Image.Image]] = {
    "Identity": lambda image, m, **o: image,
    "ShearX": lambda image, m, **o: _shear(image, m, 0, **o),
    "ShearY": lambda image, m, **o: _shear(image, m, 1, **o),
    "TranslateX": lambda image, m, **o: _affine(image, translate=(int(m), 0), **o),
    "TranslateY": lambda image, m, **o: _affine(image, translate=(0, int(m)), **o),
    "Rotate": lambda image, m, **o: _rotate(image, m, **o),
    "Brightness": lambda image, m, **o: ImageEnhance.Brightness(image).enhance(1.0 + m),
    "Color": lambda image, m, **o: ImageEnhance.Color(image).enhance(1.0 + m),
    "Contrast": lambda image, m, **o: ImageEnhance.Contrast(image).enhance(1.0 + m),
    "Sharpness": lambda image, m, **o: ImageEnhance.Sharpness(image).enhance(1.0 + m),
    "Posterize": lambda image, m, **o: ImageOps.posterize(image, int(m)),
    "Solarize": lambda image, m, **o: ImageOps.solarize(image, m),
    "AutoContrast": lambda image, m, **o: ImageOps.autocontrast(image),
    "Equalize": lambda image, m, **o: ImageOps.equalize(image),
    "Invert": lambda image, m, **o: ImageOps.invert(image),
}


def _linspace(start: float, stop: float, bins: int) -> list[float]:
    """torch.linspace's float32 values, as torchvision's tables hold them."""
    import torch

    return [float(v) for v in torch.linspace(start, stop, bins)]


def _posterize_bits(bins: int, steps: int) -> list[float]:
    """``8 - (torch.arange(bins) / ((bins - 1) / steps)).round().int()`` (float32, half to even)."""
    import torch

    return [float(v) for v in 8 - (torch.arange(bins) / ((bins - 1) / steps)).round().int()]


def rand_augment_space(bins: int, height: int, width: int) -> dict[str, tuple[list[float], bool]]:
    """{op: (magnitude of each bin, signed)}: ``RandAugment._augmentation_space``."""
    enhance = (_linspace(0.0, 0.9, bins), True)
    return {
        "Identity": ([0.0] * bins, False),
        "ShearX": (_linspace(0.0, 0.3, bins), True),
        "ShearY": (_linspace(0.0, 0.3, bins), True),
        "TranslateX": (_linspace(0.0, 150.0 / 331.0 * width, bins), True),
        "TranslateY": (_linspace(0.0, 150.0 / 331.0 * height, bins), True),
        "Rotate": (_linspace(0.0, 30.0, bins), True),
        "Brightness": enhance, "Color": enhance, "Contrast": enhance, "Sharpness": enhance,
        "Posterize": (_posterize_bits(bins, 4), False),
        "Solarize": (_linspace(255.0, 0.0, bins), False),
        "AutoContrast": ([0.0] * bins, False),
        "Equalize": ([0.0] * bins, False),
    }


def trivial_augment_space(bins: int) -> dict[str, tuple[list[float], bool]]:
    """{op: (magnitude of each bin, signed)}: ``TrivialAugmentWide._augmentation_space``."""
    enhance = (_linspace(0.0, 0.99, bins), True)
    return {
        "Identity": ([0.0] * bins, False),
        "ShearX": (_linspace(0.0, 0.99, bins), True),
        "ShearY": (_linspace(0.0, 0.99, bins), True),
        "TranslateX": (_linspace(0.0, 32.0, bins), True),
        "TranslateY": (_linspace(0.0, 32.0, bins), True),
        "Rotate": (_linspace(0.0, 135.0, bins), True),
        "Brightness": enhance, "Color": enhance, "Contrast": enhance, "Sharpness": enhance,
        "Posterize": (_posterize_bits(bins, 6), False),
        "Solarize": (_linspace(255.0, 0.0, bins), False),
        "AutoContrast": ([0.0] * bins, False),
        "Equalize": ([0.0] * bins, False),
    }


def rand_augment(image: Image.Image, num_ops: int = 2, magnitude: int = 9, bins: int = 31,
                 interpolation: str = "nearest", fill=None) -> Image.Image:
    """``RandAugment(num_ops, magnitude)`` on a Pillow image, drawing from torch's generator."""
    import torch

    space = rand_augment_space(bins, image.height, image.width)
    names = list(space)
    for _ in range(num_ops):
        name = names[int(torch.randint(len(names), (1,)).item())]
        magnitudes, signed = space[name]
        value = magnitudes[magnitude]
        if signed and torch.randint(2, (1,)):
            value = -value
        image = OPS[name](image, value, interpolation=interpolation, fill=fill)
    return image


# Ops whose table is one 0.0 (torchvision's torch.tensor(0.0)): no bin is drawn for them.
_NO_MAGNITUDE = {"Identity", "AutoContrast", "Equalize", "Invert"}


def trivial_augment_wide(image: Image.Image, bins: int = 31, interpolation: str = "nearest",
                         fill=None) -> Image.Image:
    """``TrivialAugmentWide()`` on a Pillow image, drawing from torch's generator."""
    import torch

    space = trivial_augment_space(bins)
    names = list(space)
    name = names[int(torch.randint(len(names), (1,)).item())]
    magnitudes, signed = space[name]
    value = 0.0
    if name not in _NO_MAGNITUDE:
        value = magnitudes[int(torch.randint(bins, (1,), dtype=torch.long))]
    if signed and torch.randint(2, (1,)):
        value = -value
    return OPS[name](image, value, interpolation=interpolation, fill=fill)


def auto_augment_space(height: int, width: int) -> dict[str, tuple[list[float], bool]]:
    """``AutoAugment._augmentation_space(10, ...)``: RandAugment's, Invert for Identity."""
    space = rand_augment_space(10, height, width)
    del space["Identity"]
    space["Invert"] = ([0.0] * 10, False)
    return space


# torchvision's AutoAugment._get_policies: (op, chance, magnitude bin or None) pairs.
AUTO_AUGMENT_POLICIES = {
    "imagenet": [
        (("Posterize", 0.4, 8), ("Rotate", 0.6, 9)),
        (("Solarize", 0.6, 5), ("AutoContrast", 0.6, None)),
        (("Equalize", 0.8, None), ("Equalize", 0.6, None)),
        (("Posterize", 0.6, 7), ("Posterize", 0.6, 6)),
        (("Equalize", 0.4, None), ("Solarize", 0.2, 4)),
        (("Equalize", 0.4, None), ("Rotate", 0.8, 8)),
        (("Solarize", 0.6, 3), ("Equalize", 0.6, None)),
        (("Posterize", 0.8, 5), ("Equalize", 1.0, None)),
        (("Rotate", 0.2, 3), ("Solarize", 0.6, 8)),
        (("Equalize", 0.6, None), ("Posterize", 0.4, 6)),
        (("Rotate", 0.8, 8), ("Color", 0.4, 0)), (("Rotate", 0.4, 9), ("Equalize", 0.6, None)),
        (("Equalize", 0.0, None), ("Equalize", 0.8, None)),
        (("Invert", 0.6, None), ("Equalize", 1.0, None)),
        (("Color", 0.6, 4), ("Contrast", 1.0, 8)), (("Rotate", 0.8, 8), ("Color", 1.0, 2)),
        (("Color", 0.8, 8), ("Solarize", 0.8, 7)), (("Sharpness", 0.4, 7), ("Invert", 0.6, None)),
        (("ShearX", 0.6, 5), ("Equalize", 1.0, None)), (("Color", 0.4, 0), ("Equalize", 0.6, None)),
        (("Equalize", 0.4, None), ("Solarize", 0.2, 4)),
        (("Solarize", 0.6, 5), ("AutoContrast", 0.6, None)),
        (("Invert", 0.6, None), ("Equalize", 1.0, None)), (("Color", 0.6, 4), ("Contrast", 1.0, 8)),
        (("Equalize", 0.8, None), ("Equalize", 0.6, None)),
    ],
    "cifar10": [
        (("Invert", 0.1, None), ("Contrast", 0.2, 6)), (("Rotate", 0.7, 2), ("TranslateX", 0.3, 9)),
        (("Sharpness", 0.8, 1), ("Sharpness", 0.9, 3)),
        (("ShearY", 0.5, 8), ("TranslateY", 0.7, 9)),
        (("AutoContrast", 0.5, None), ("Equalize", 0.9, None)),
        (("ShearY", 0.2, 7), ("Posterize", 0.3, 7)),
        (("Color", 0.4, 3), ("Brightness", 0.6, 7)),
        (("Sharpness", 0.3, 9), ("Brightness", 0.7, 9)),
        (("Equalize", 0.6, None), ("Equalize", 0.5, None)),
        (("Contrast", 0.6, 7), ("Sharpness", 0.6, 5)),
        (("Color", 0.7, 7), ("TranslateX", 0.5, 8)),
        (("Equalize", 0.3, None), ("AutoContrast", 0.4, None)),
        (("TranslateY", 0.4, 3), ("Sharpness", 0.2, 6)),
        (("Brightness", 0.9, 6), ("Color", 0.2, 8)),
        (("Solarize", 0.5, 2), ("Invert", 0.0, None)),
        (("Equalize", 0.2, None), ("AutoContrast", 0.6, None)),
        (("Equalize", 0.2, None), ("Equalize", 0.6, None)),
        (("Color", 0.9, 9), ("Equalize", 0.6, None)),
        (("AutoContrast", 0.8, None), ("Solarize", 0.2, 8)),
        (("Brightness", 0.1, 3), ("Color", 0.7, 0)),
        (("Solarize", 0.4, 5), ("AutoContrast", 0.9, None)),
        (("TranslateY", 0.9, 9), ("TranslateY", 0.7, 9)),
        (("AutoContrast", 0.9, None), ("Solarize", 0.8, 3)),
        (("Equalize", 0.8, None), ("Invert", 0.1, None)),
        (("TranslateY", 0.7, 9), ("AutoContrast", 0.9, None)),
    ],
    "svhn": [
        (("ShearX", 0.9, 4), ("Invert", 0.2, None)), (("ShearY", 0.9, 8), ("Invert", 0.7, None)),
        (("Equalize", 0.6, None), ("Solarize", 0.6, 6)),
        (("Invert", 0.9, None), ("Equalize", 0.6, None)),
        (("Equalize", 0.6, None), ("Rotate", 0.9, 3)),
        (("ShearX", 0.9, 4), ("AutoContrast", 0.8, None)),
        (("ShearY", 0.9, 8), ("Invert", 0.4, None)), (("ShearY", 0.9, 5), ("Solarize", 0.2, 6)),
        (("Invert", 0.9, None), ("AutoContrast", 0.8, None)),
        (("Equalize", 0.6, None), ("Rotate", 0.9, 3)),
        (("ShearX", 0.9, 4), ("Solarize", 0.3, 3)), (("ShearY", 0.8, 8), ("Invert", 0.7, None)),
        (("Equalize", 0.9, None), ("TranslateY", 0.6, 6)),
        (("Invert", 0.9, None), ("Equalize", 0.6, None)),
        (("Contrast", 0.3, 3), ("Rotate", 0.8, 4)), (("Invert", 0.8, None), ("TranslateY", 0.0, 2)),
        (("ShearY", 0.7, 6), ("Solarize", 0.4, 8)), (("Invert", 0.6, None), ("Rotate", 0.8, 4)),
        (("ShearY", 0.3, 7), ("TranslateX", 0.9, 3)), (("ShearX", 0.1, 6), ("Invert", 0.6, None)),
        (("Solarize", 0.7, 2), ("TranslateY", 0.6, 7)), (("ShearY", 0.8, 4), ("Invert", 0.8, None)),
        (("ShearX", 0.7, 9), ("AutoContrast", 0.8, None)),
        (("ShearY", 0.8, 5), ("AutoContrast", 0.7, None)),
        (("ShearX", 0.7, 2), ("Invert", 0.1, None)),
    ],
}


def auto_augment(image: Image.Image, policy: str = "imagenet", interpolation: str = "nearest",
                 fill=None) -> Image.Image:
    """``AutoAugment(policy)`` on a Pillow image, drawing from torch's generator."""
    import torch

    policies = AUTO_AUGMENT_POLICIES[policy]
    chosen = policies[int(torch.randint(len(policies), (1,)).item())]
    probs, signs = torch.rand((2,)), torch.randint(2, (2,))
    space = auto_augment_space(image.height, image.width)
    for i, (name, p, bin_) in enumerate(chosen):
        if probs[i] <= p:
            magnitudes, signed = space[name]
            value = magnitudes[bin_] if bin_ is not None else 0.0
            if signed and signs[i] == 0:
                value = -value
            image = OPS[name](image, value, interpolation=interpolation, fill=fill)
    return image


def random_erasing(tensor, p: float = 0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3)):
    """``RandomErasing(p, scale, ratio, value=0)`` on a normalised CHW tensor, in place."""
    import torch

    if torch.rand(1).item() >= p:
        return tensor
    _channels, height, width = tensor.shape
    area = height * width
    log_ratio = torch.log(torch.tensor(ratio))
    for _ in range(10):
        erase_area = area * torch.empty(1).uniform_(scale[0], scale[1]).item()
        aspect = torch.exp(torch.empty(1).uniform_(log_ratio[0], log_ratio[1])).item()
        h = round(math.sqrt(erase_area * aspect))
        w = round(math.sqrt(erase_area / aspect))
        if h < height and w < width:
            top = int(torch.randint(0, height - h + 1, size=(1,)).item())
            left = int(torch.randint(0, width - w + 1, size=(1,)).item())
            tensor[:, top:top + h, left:left + w] = 0
            return tensor
    return tensor
