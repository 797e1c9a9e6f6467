"""Write the fuzzers' seed corpus: valid and broken images of every format, and media.

Usage: ``python fuzz/make_corpus.py DIR`` writes ``DIR/seeds/<name>``.
The same inputs are replayed by ``tests/test_fuzz_regressions.py``
(``corpus()``), so a seed that ever crashed stays a regression test.

Valid images cover what the native decoders branch on (JPEG subsampling,
progressive and grayscale; PNG colour types, bit depths, palettes,
transparency and interlacing; lossy, lossless and alpha WebP; the formats
Pillow decodes); broken ones are truncations, bit flips, and headers that
claim absurd sizes. Small videos (H.264 with B-frames and an AAC track, VP9,
HEVC, MPEG-2 in MPEG-TS) and audio (PCM, Vorbis, FLAC) are made by the
``ffmpeg`` command when it is installed, with their truncations, bit flips
and runs of zeros.
"""

from __future__ import annotations

import io
import shutil
import struct
import sys
import tempfile
import zlib
from pathlib import Path

import numpy as np
from PIL import Image

from dataloader._images.samples import synthetic_image

SEED = 20240601


def _pixels(height: int, width: int, channels: int, rng: np.random.Generator) -> np.ndarray:
    return synthetic_image(height, width, channels, seed=int(rng.integers(2**32)))


def _encode(array: np.ndarray, mode: str, fmt: str, **options) -> bytes:
    image = Image.fromarray(array[:, :, 0] if array.shape[2] == 1 else array)
    if image.mode != mode:
        image = image.convert(mode)
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def _png_chunk(kind: bytes, payload: bytes) -> bytes:
    return (struct.pack(">I", len(payload)) + kind + payload
            + struct.pack(">I", zlib.crc32(kind + payload) & 0xFFFFFFFF))


def _png_with_header(width: int, height: int, depth: int, colour: int, rows: bytes,
                     interlace: int = 0) -> bytes:
    header = struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, interlace)
    return (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header)
            + _png_chunk(b"IDAT", zlib.compress(rows)) + _png_chunk(b"IEND", b""))


def valid_images(rng: np.random.Generator) -> dict[str, bytes]:
    images: dict[str, bytes] = {}
    for height, width in [(1, 1), (3, 5), (17, 9), (32, 32), (61, 47)]:
        rgb = _pixels(height, width, 3, rng)
        rgba = _pixels(height, width, 4, rng)
        size = f"{height}x{width}"
        for subsampling in (0, 1, 2):
            images[f"jpeg-{size}-ss{subsampling}"] = _encode(
                rgb, "RGB", "JPEG", quality=85, subsampling=subsampling)
        images[f"jpeg-{size}-gray"] = _encode(rgb, "L", "JPEG", quality=70)
        images[f"jpeg-{size}-progressive"] = _encode(rgb, "RGB", "JPEG", progressive=True)
        images[f"jpeg-{size}-cmyk"] = _encode(rgb, "CMYK", "JPEG")
        for mode in ("L", "LA", "RGB", "RGBA", "P", "1", "I;16"):
            images[f"png-{size}-{mode.replace(';', '')}"] = _encode(rgba, mode, "PNG")
        images[f"png-{size}-palette-trns"] = _encode(rgba, "P", "PNG", transparency=0)
        images[f"webp-{size}-lossy"] = _encode(rgb, "RGB", "WEBP", quality=60)
        images[f"webp-{size}-lossless"] = _encode(rgba, "RGBA", "WEBP", lossless=True)
        images[f"webp-{size}-alpha"] = _encode(rgba, "RGBA", "WEBP", quality=50)
        images[f"gif-{size}"] = _encode(rgb, "P", "GIF")
        images[f"bmp-{size}"] = _encode(rgb, "RGB", "BMP")
        images[f"tiff-{size}"] = _encode(rgb, "RGB", "TIFF")
    # PNG variants Pillow does not write: 16-bit RGBA, 2-bit gray, Adam7.
    images["png-16bit-rgba"] = _png_with_header(
        3, 2, 16, 6, b"".join(b"\x00" + bytes(range(24)) for _ in range(2)))
    images["png-2bit-gray"] = _png_with_header(5, 3, 2, 0, b"\x00\x1b\x00" * 3)
    # The seven Adam7 passes of an 8x8 gray image: 79 bytes with filter bytes.
    images["png-adam7"] = _png_with_header(8, 8, 8, 0, bytes(79), interlace=1)
    return images


def broken_images(valid: dict[str, bytes], rng: np.random.Generator) -> dict[str, bytes]:
    broken: dict[str, bytes] = {
        "empty": b"",
        "one-byte": b"\xff",
        "jpeg-magic-only": b"\xff\xd8\xff",
        "png-magic-only": b"\x89PNG\r\n\x1a\n",
        "webp-magic-only": b"RIFF\x00\x00\x00\x00WEBP",
        "random": rng.integers(0, 256, 512, dtype=np.uint8).tobytes(),
        # Headers claiming sizes far beyond any limit.
        "png-huge": _png_with_header(0x7FFFFFFF, 0x7FFFFFFF, 8, 2, b"\x00"),
        "png-zero-width": _png_with_header(0, 4, 8, 2, b"\x00" * 4),
        "png-bad-depth": _png_with_header(4, 4, 3, 2, b"\x00" * 52),
        "png-short-idat": _png_with_header(64, 64, 8, 6, b"\x00" * 10),
        "png-adam7-bad-filter": _png_with_header(8, 8, 8, 0, bytes(range(79)), interlace=1),
    }
    jpeg = valid["jpeg-32x32-ss2"]
    sof = jpeg.find(b"\xff\xc0")
    huge = bytearray(jpeg)
    huge[sof + 5:sof + 9] = b"\xff\xff\xff\xff"
    broken["jpeg-huge-sof"] = bytes(huge)
    zero = bytearray(jpeg)
    zero[sof + 5:sof + 9] = b"\x00\x00\x00\x00"
    broken["jpeg-zero-sof"] = bytes(zero)
    webp = bytearray(valid["webp-17x9-lossy"])
    webp[4:8] = struct.pack("<I", 0xFFFFFFF0)
    broken["webp-huge-riff"] = bytes(webp)
    for name in ("jpeg-61x47-ss0", "jpeg-17x9-progressive", "png-61x47-RGBA",
                 "png-17x9-P", "webp-61x47-lossy", "webp-32x32-lossless", "gif-17x9"):
        data = valid[name]
        for cut in (len(data) // 4, len(data) // 2, len(data) - 3):
            broken[f"{name}-cut{cut}"] = data[:cut]
        for flips in range(3):
            mutated = bytearray(data)
            for position in rng.integers(2, len(data), 1 + 4 * flips):
                mutated[position] ^= 1 << int(rng.integers(8))
            broken[f"{name}-flip{flips}"] = bytes(mutated)
    return broken


# Small videos and audio for the media target: the ffmpeg command's arguments
# between the inputs and the output file, by file name.
_PATTERN = ["-f", "lavfi", "-i", "testsrc2=size=64x48:rate=10:duration=1"]
_TONES = ["-f", "lavfi", "-i", "aevalsrc=0.5*sin(440*2*PI*t)|0.2*sin(660*2*PI*t):s=8000:d=0.5"]
_GOP = ["-g", "4", "-threads", "1"]
MEDIA = {
    "h264.mp4": [*_PATTERN, *_TONES, "-c:v", "libx264", "-preset", "ultrafast", "-bf", "2",
                 "-pix_fmt", "yuv420p", *_GOP, "-c:a", "aac", "-shortest"],
    "vp9.webm": [*_PATTERN, "-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8",
                 *_GOP],
    "hevc.mkv": [*_PATTERN, "-c:v", "libx265", "-pix_fmt", "yuv420p", "-x265-params",
                 "keyint=4:log-level=error:pools=none:frame-threads=1"],
    "mpeg2.ts": [*_PATTERN, "-c:v", "mpeg2video", *_GOP],
    "tones.wav": [*_TONES, "-c:a", "pcm_s16le"],
    "tones.ogg": [*_TONES, "-c:a", "libvorbis"],
    "tones.flac": [*_TONES, "-c:a", "flac"],
}


def media_files() -> dict[str, bytes]:
    """The files of ``MEDIA``, made by the ``ffmpeg`` command; none without it."""
    if shutil.which("ffmpeg") is None:
        return {}
    from dataloader._media.samples import encode

    with tempfile.TemporaryDirectory() as folder:
        return {f"media-{name}": encode(arguments, Path(folder) / name).read_bytes()
                for name, arguments in MEDIA.items()}


def broken_media(valid: dict[str, bytes], rng: np.random.Generator) -> dict[str, bytes]:
    """Each media file cut short, with bits flipped, and with a run of zeros."""
    broken: dict[str, bytes] = {}
    for name, data in valid.items():
        for cut in (len(data) // 5, len(data) // 2, len(data) - 7):
            broken[f"{name}-cut{cut}"] = data[:cut]
        for flips in range(3):
            mutated = bytearray(data)
            for position in rng.integers(16, len(data), 1 + 6 * flips):
                mutated[position] ^= 1 << int(rng.integers(8))
            broken[f"{name}-flip{flips}"] = bytes(mutated)
        zeros = bytearray(data)
        start = int(rng.integers(len(data) // 4, len(data) // 2))
        zeros[start:start + 256] = bytes(len(zeros[start:start + 256]))
        broken[f"{name}-zeros"] = bytes(zeros)
    return broken


def corpus() -> dict[str, bytes]:
    """Every seed, by name; the same bytes on every run (the media seeds: for one build of
    the ffmpeg command)."""
    rng = np.random.default_rng(SEED)
    valid = valid_images(rng)
    media = media_files()
    return {**valid, **broken_images(valid, rng), **media, **broken_media(media, rng)}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.splitlines()[2], file=sys.stderr)
        return 2
    seeds = Path(argv[1]) / "seeds"
    seeds.mkdir(parents=True, exist_ok=True)
    for name, data in corpus().items():
        (seeds / name).write_bytes(data)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
