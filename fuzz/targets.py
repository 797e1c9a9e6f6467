"""Fuzz targets over ``dataloader.kernels``: decoding, headers, a transform chain.

Run one with atheris (coverage-guided; ``make fuzz`` does this on the
sanitizer build)::

    python -P fuzz/targets.py decode [libFuzzer options] CORPUS_DIR...

or replay files through every target without a fuzzer (``make test-asan``
does this over the whole corpus, under the sanitizers)::

    python -P fuzz/targets.py replay CORPUS_DIR_OR_FILE...

Each target takes the fuzzer's bytes as an encoded image (``media``: as a
video or audio file, through FFmpeg's libraries). The contract under
test: every input either gives a correct result or raises ``ValueError``;
any other exception, a crash, a sanitizer report or a hang is a finding.
``tests/test_fuzz_regressions.py`` replays the seed corpus and every file of
``fuzz/regressions/`` through the same functions.
"""

from __future__ import annotations

import os
import sys
import warnings
import zlib

import numpy as np

from dataloader import kernels
from dataloader._core import codecs

# Fuzzed headers may claim any size up to the decoder's limits; a smaller
# budget keeps each execution fast without skipping any code path.
MAX_BYTES = 1 << 22
LIMITS = {"max_bytes": MAX_BYTES}
MODES = (None, "L", "RGB", "RGBA")
GUARD = 0xA5


def _choices(data: bytes) -> int:
    """Parameters drawn from the input itself, so every seed keeps its format."""
    return zlib.crc32(data[:256]) ^ len(data)


def fuzz_image_info(data: bytes) -> None:
    try:
        info = kernels.image_info(data)
    except ValueError:
        return
    assert info.height >= 0 and info.width >= 0 and 1 <= info.channels <= 4, info
    sniffed = codecs.sniff(data)
    if sniffed in codecs.NATIVE_FORMATS:
        assert info.format == sniffed, (info, sniffed)
    else:
        # Any other format is read by Pillow, which names it.
        assert info.format in _pillow_formats(), info


def _pillow_formats() -> frozenset[str]:
    from PIL import Image as PILImage

    PILImage.init()
    return frozenset(PILImage.OPEN)


def _decode_in_canvas(data: bytes, mode: str | None, shape: tuple[int, ...]) -> np.ndarray:
    """Decode into a slot of a larger canvas and check the bytes around it are untouched."""
    height, width, channels = shape
    canvas = np.full((height + 2, width + 3, channels), GUARD, np.uint8)
    slot = canvas[1:-1, 1:-2]
    kernels.decode(data, mode=mode, out=slot, **LIMITS)
    outside = canvas.copy()
    outside[1:-1, 1:-2] = GUARD
    assert (outside == GUARD).all(), "decode wrote outside its out= slot"
    return slot


def fuzz_decode(data: bytes) -> None:
    choice = _choices(data)
    for mode in MODES:
        try:
            image = kernels.decode(data, mode=mode, **LIMITS)
        except ValueError:
            continue
        assert image.dtype == np.uint8 and image.ndim == 3, image.shape
        if mode is not None:
            assert image.shape[2] == {"L": 1, "RGB": 3, "RGBA": 4}[mode], (mode, image.shape)
        # The same pixels again, straight into a strided slot.
        np.testing.assert_array_equal(_decode_in_canvas(data, mode, image.shape), image)
    try:
        small = kernels.decode(data, min_size=(1 + choice % 13, 1 + choice % 7), **LIMITS)
    except ValueError:
        return
    assert small.ndim == 3


def transform_chain(image: np.ndarray, choice: int) -> np.ndarray:
    """decode -> resize -> crop -> normalize through ``dataloader.kernels``.

    ``native_chain`` below fuzzes the same kind of pipeline as one native
    ``dataloader.transforms`` chain.
    """
    interpolation = ("nearest", "bilinear", "bicubic", "lanczos")[choice % 4]
    height, width = 1 + (choice >> 2) % 67, 1 + (choice >> 9) % 67
    resized = kernels.resize(image, (height, width), interpolation=interpolation,
                             antialias=bool(choice & 1 << 16))
    assert resized.shape == (height, width, image.shape[2]), resized.shape
    top, left = (choice >> 17) % height, (choice >> 23) % width
    crop_h, crop_w = height - top, width - left
    cropped = kernels.crop(resized, top, left, crop_h, crop_w)
    np.testing.assert_array_equal(cropped, resized[top:, left:])
    channels = cropped.shape[2]
    mean, std = [0.485, 0.456, 0.406, 0.5][:channels], [0.229, 0.224, 0.225, 0.25][:channels]
    normalized = kernels.normalize(cropped, mean, std)
    assert normalized.dtype == np.float32 and np.isfinite(normalized).all()
    return normalized


def fuzz_transforms(data: bytes) -> None:
    choice = _choices(data)
    try:
        image = kernels.decode(data, mode=MODES[choice % 4], **LIMITS)
    except ValueError:
        return
    if image.shape[0] == 0 or image.shape[1] == 0:
        return
    transform_chain(image, choice >> 2)


def native_chain(choice: int):
    """A ``dataloader.transforms`` chain chosen by ``choice``, and its output size if fixed."""
    from dataloader.transforms import (
        CenterCrop,
        Compose,
        Crop,
        Decode,
        Normalize,
        Pad,
        RandomHFlip,
        RandomResizedCrop,
        Resize,
        Rotate90,
        ToChw,
        ToFloat,
    )

    size = 1 + (choice >> 4) % 97
    geometry = [
        RandomResizedCrop(size), Resize(size), CenterCrop(size), Pad(choice % 5, mode="reflect"),
        Rotate90(choice % 4), Crop(choice % 7, (choice >> 3) % 11, size, size),
        Compose([Resize(size + choice % 9), CenterCrop(size)]),
    ][(choice >> 2) % 7]
    mode = (None, "L", "RGB", "RGBA")[choice % 4]
    steps = [Decode(mode, max_bytes=MAX_BYTES, exact=bool(choice & 1 << 11)), geometry,
             RandomHFlip()]
    if choice & 1 << 12:
        channels = {None: 1, "L": 1, "RGB": 3, "RGBA": 4}[mode]
        steps += [ToFloat(), Normalize([0.5] * channels, [0.25] * channels), ToChw()]
    fixed = isinstance(geometry, (RandomResizedCrop, CenterCrop, Crop, Compose))
    return Compose(steps), (size if fixed else None)


def fuzz_native_chain(data: bytes) -> None:
    """A whole native chain, decode included, on one item: a result or a ValueError."""
    choice = _choices(data)
    chain, size = native_chain(choice)
    try:
        image = chain(data, seed=choice)
    except ValueError:
        return
    if size is not None:
        assert size in image.shape and image.shape.count(size) >= 2, image.shape
    assert np.isfinite(np.asarray(image, dtype=np.float64)).all()


def fuzz_media(data: bytes) -> None:
    """A video or audio file: its streams, every frame resized, its audio resampled."""
    choice = _choices(data)
    try:
        streams = kernels.media_info(data)
    except ValueError:
        return
    assert all(stream.kind in ("video", "audio", "other") for stream in streams), streams
    size = (1 + choice % 29, 1 + (choice >> 5) % 31)
    try:
        frames = kernels.decode_video(data, size=size)
    except ValueError:
        pass
    else:
        assert frames.dtype == np.uint8 and frames.shape[1:] == (*size, 3), frames.shape
    rate, channels = 4000 + (choice >> 10) % 44100, 1 + (choice >> 3) % 3
    try:
        # Windows near the start, and one reached by a seek.
        samples = kernels.decode_audio(data, sample_rate=rate, channels=channels,
                                       start=(0.0, 0.1, 0.2, 6.0)[(choice >> 12) % 4])
    except ValueError:
        return
    assert samples.dtype == np.float32 and samples.shape[0] == channels, samples.shape


TARGETS = {
    "decode": fuzz_decode,
    "image_info": fuzz_image_info,
    "transforms": fuzz_transforms,
    "native_chain": fuzz_native_chain,
    "media": fuzz_media,
}


def replay(paths: list[str]) -> None:
    """Every target over every file under ``paths`` (no fuzzer needed)."""
    from pathlib import Path

    files = [file for path in map(Path, paths)
             for file in (sorted(path.rglob("*")) if path.is_dir() else [path]) if file.is_file()]
    warnings.simplefilter("ignore")
    for file in files:
        data = file.read_bytes()
        for name, target in TARGETS.items():
            try:
                target(data)
            except Exception as exc:
                exc.add_note(f"target {name}, input {file}")
                raise
    print(f"{len(files)} inputs replayed through {len(TARGETS)} targets")


def main(argv: list[str]) -> None:
    if len(argv) >= 2 and argv[1] == "replay":
        replay(argv[2:])
        return
    if "with_fuzzer" in os.environ.get("LD_PRELOAD", ""):
        # libFuzzer comes with the preloaded sanitizer runtime (make fuzz).
        import atheris_no_libfuzzer as atheris
    else:
        import atheris

    if len(argv) < 2 or argv[1] not in TARGETS:
        sys.exit(f"usage: {argv[0]} {{{','.join(TARGETS)}}} [libFuzzer options] [corpus...]")
    target = TARGETS[argv[1]]
    # Pillow warns about every odd TIFF tag it meets; the fuzzer meets many.
    warnings.simplefilter("ignore")
    # Coverage of the Python layers (validation, dispatch, Pillow fallback).
    atheris.instrument_all()
    atheris.Setup([argv[0]] + argv[2:], lambda data: target(bytes(data)))
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
