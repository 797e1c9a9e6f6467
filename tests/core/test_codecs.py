"""Native decoders (dataloader._core.codecs) against Pillow, pixel for pixel."""

import io

import numpy as np
import pytest
from conftest import DATA, encode, natural_image, pillow_pixels
from PIL import Image as PILImage

from dataloader._core import codecs


def decode_native(data, channels=None, scale=8, out=None):
    """Decode natively; a JPEG at ``scale / 8`` of its size."""
    _fmt, height, width, native = codecs.header_info(data)
    if scale < 8:
        height, width = codecs.jpeg_scaled_size(height, width, scale)
    if out is None:
        out = np.empty((height, width, channels or native), np.uint8)
    codecs.decode_into(data, out, scale)
    return out


def assert_same_as_pillow(data, pillow_mode=None, channels=None):
    ours = decode_native(data, channels)
    theirs = pillow_pixels(data, pillow_mode)
    assert ours.shape == theirs.shape
    np.testing.assert_array_equal(ours, theirs)


# --- JPEG -----------------------------------------------------------------

@pytest.mark.parametrize("options", [
    {"quality": 90},
    {"quality": 75, "progressive": True},
    {"quality": 95, "subsampling": 0},
    {"quality": 60, "subsampling": 1},
    {"quality": 80, "progressive": True, "optimize": True},
])
@pytest.mark.parametrize("size", [(37, 53), (1, 17), (16, 1), (64, 48)])
def test_jpeg_color_matches_pillow(options, size):
    data = encode(natural_image(*size, 3), "JPEG", **options)
    assert codecs.header_info(data) == ("JPEG", size[0], size[1], 3)
    assert_same_as_pillow(data)


def test_jpeg_grayscale_matches_pillow():
    data = encode(natural_image(29, 41, 1), "JPEG", quality=85)
    assert codecs.header_info(data)[3] == 1
    assert_same_as_pillow(data)
    assert_same_as_pillow(data, "RGB", channels=3)
    assert_same_as_pillow(data, "RGBA", channels=4)


def test_jpeg_color_to_gray_and_rgba_match_pillow_convert():
    data = encode(natural_image(23, 31, 3), "JPEG")
    assert_same_as_pillow(data, "L", channels=1)
    assert_same_as_pillow(data, "RGBA", channels=4)
    assert_same_as_pillow(data, "LA", channels=2)


@pytest.mark.parametrize("channels,mode", [(3, "RGB"), (1, "L"), (4, "RGBA")])
def test_jpeg_cmyk_converted_as_pillow(channels, mode):
    cmyk = PILImage.fromarray(natural_image(27, 35, 4), "CMYK")
    data = encode(cmyk, "JPEG", quality=90)
    assert codecs.header_info(data)[3] == 3
    assert_same_as_pillow(data, mode, channels=channels)


def without_adobe_segment(data):
    """``data`` with its APP14 "Adobe" segment cut out (as metadata strippers do)."""
    start = data.index(b"\xff\xee")
    assert data[start + 4:start + 9] == b"Adobe"
    length = int.from_bytes(data[start + 2:start + 4], "big")
    return data[:start] + data[start + 2 + length:]


@pytest.mark.parametrize("channels,mode", [(3, "RGB"), (1, "L"), (4, "RGBA")])
def test_jpeg_cmyk_without_adobe_segment_is_inverted_like_pillow(channels, mode):
    # Pillow and libjpeg-turbo's tools take every CMYK JPEG's samples as
    # inverted, whether or not the file carries an Adobe segment.
    cmyk = PILImage.fromarray(natural_image(27, 35, 4, seed=3), "CMYK")
    with_segment = encode(cmyk, "JPEG", quality=90)
    data = without_adobe_segment(with_segment)
    assert b"Adobe" not in data
    with PILImage.open(io.BytesIO(data)) as image:
        assert image.mode == "CMYK"
    assert_same_as_pillow(data, mode, channels=channels)
    np.testing.assert_array_equal(decode_native(data, channels),
                                  decode_native(with_segment, channels))


@pytest.mark.parametrize("name", ["arithmetic.jpg", "arithmetic_progressive.jpg"])
def test_jpeg_arithmetic_coding_matches_pillow(name):
    data = (DATA / name).read_bytes()
    assert_same_as_pillow(data)


@pytest.mark.parametrize("denom", [2, 4, 8])
def test_jpeg_dct_scaling_matches_pillow_draft(denom):
    data = encode(natural_image(203, 301, 3), "JPEG", quality=90)
    ours = decode_native(data, scale=8 // denom)
    assert ours.shape[:2] == (-(-203 // denom), -(-301 // denom))
    with PILImage.open(io.BytesIO(data)) as image:
        image.draft("RGB", (301 // denom, 203 // denom))
        assert image.size == (ours.shape[1], ours.shape[0])
        np.testing.assert_array_equal(ours, np.asarray(image))


def test_real_photographs_match_pillow(photos):
    for data in photos.values():
        assert_same_as_pillow(data)


# --- PNG ------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["L", "LA", "RGB", "RGBA"])
@pytest.mark.parametrize("interlace", [False, True])
def test_png_8bit_matches_pillow(mode, interlace, tmp_path):
    array = natural_image(19, 23, len(mode))
    image = PILImage.fromarray(array[:, :, 0] if mode == "L" else array, mode)
    data = encode_png(image, interlace)
    assert codecs.header_info(data) == ("PNG", 19, 23, len(mode))
    assert_same_as_pillow(data)


def encode_png(image, interlace):
    """Pillow cannot write interlaced PNGs: those are written by ``adam7_png``."""
    if not interlace:
        return encode(image, "PNG")
    return adam7_png(np.asarray(image), image.mode)


def adam7_png(array, mode):
    """A minimal interlaced PNG writer (8-bit samples, filter type 0)."""
    import struct
    import zlib

    color_type = {"L": 0, "LA": 4, "RGB": 2, "RGBA": 6}[mode]
    if array.ndim == 2:
        array = array[:, :, None]
    raw = b""
    # (x0, y0, dx, dy) of the seven Adam7 passes.
    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4),
              (1, 0, 2, 2), (0, 1, 1, 2)]
    for x0, y0, dx, dy in passes:
        sub = array[y0::dy, x0::dx]
        if sub.size:
            raw += b"".join(b"\0" + row.tobytes() for row in sub)
    h, w = array.shape[:2]

    def chunk(kind, payload):
        body = kind + payload
        return struct.pack(">I", len(payload)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", w, h, 8, color_type, 0, 0, 1)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


@pytest.mark.parametrize("mode,rawmode", [("RGB", "RGB;16B"), ("RGBA", "RGBA;16B"),
                                          ("LA", "LA;16B")])
def test_png_16bit_reduced_as_pillow(mode, rawmode):
    rng = np.random.default_rng(3)
    samples = rng.integers(0, 65536, (13, 17, len(mode)), dtype=np.uint16)
    data = png_16bit(samples, {"RGB": 2, "RGBA": 6, "LA": 4}[mode])
    # Pillow opens 16-bit gray+alpha as RGBA; its LA conversion is our native layout.
    assert_same_as_pillow(data, mode)
    # Pillow keeps the high byte of each sample.
    np.testing.assert_array_equal(decode_native(data), (samples >> 8).astype(np.uint8))


def test_png_16bit_gray_keeps_high_byte():
    rng = np.random.default_rng(4)
    samples = rng.integers(0, 65536, (11, 9, 1), dtype=np.uint16)
    data = png_16bit(samples, 0)
    with PILImage.open(io.BytesIO(data)) as image:
        assert image.mode.startswith("I")   # Pillow has no 8-bit view of it
        theirs = (np.asarray(image) >> 8).astype(np.uint8)
    np.testing.assert_array_equal(decode_native(data)[:, :, 0], theirs)


def png_16bit(samples, color_type):
    import struct
    import zlib

    h, w = samples.shape[:2]
    raw = b"".join(b"\0" + row.astype(">u2").tobytes() for row in samples)

    def chunk(kind, payload):
        body = kind + payload
        return struct.pack(">I", len(payload)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", w, h, 16, color_type, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


@pytest.mark.parametrize("bits", [1, 2, 4])
def test_png_low_bit_gray_scaled_as_pillow(bits):
    array = natural_image(15, 21, 1)[:, :, 0]
    image = PILImage.fromarray(array).convert("1") if bits == 1 else \
        PILImage.fromarray(array).quantize(2 ** bits).convert("L")
    data = encode(image, "PNG", bits=bits) if bits > 1 else encode(image, "PNG")
    assert_same_as_pillow(data, "L")


@pytest.mark.filterwarnings("ignore:Palette images with Transparency")
@pytest.mark.parametrize("transparency", [False, True])
def test_png_palette_matches_pillow(transparency):
    image = PILImage.fromarray(natural_image(21, 25, 3)).quantize(50)
    options = {"transparency": bytes(range(0, 250, 5))} if transparency else {}
    data = encode(image, "PNG", **options)
    channels = 4 if transparency else 3
    assert codecs.header_info(data) == ("PNG", 21, 25, channels)
    assert_same_as_pillow(data, "RGBA" if transparency else "RGB")
    assert_same_as_pillow(data, "L", channels=1)


# --- WebP -----------------------------------------------------------------

@pytest.mark.parametrize("mode", ["RGB", "RGBA"])
@pytest.mark.parametrize("lossless", [False, True])
def test_webp_matches_pillow(mode, lossless):
    array = natural_image(31, 45, len(mode))
    # exact=True: the lossless encoder keeps the color of transparent pixels.
    data = encode(PILImage.fromarray(array, mode), "WEBP", lossless=lossless, quality=80,
                  exact=True)
    assert codecs.header_info(data) == ("WEBP", 31, 45, len(mode))
    assert_same_as_pillow(data)
    if lossless:
        np.testing.assert_array_equal(decode_native(data), array)


def test_webp_to_gray_matches_pillow_convert():
    data = encode(PILImage.fromarray(natural_image(12, 14, 4), "RGBA"), "WEBP", quality=90)
    assert_same_as_pillow(data, "L", channels=1)
    assert_same_as_pillow(data, "RGB", channels=3)


# --- destinations and errors ----------------------------------------------

@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP"])
def test_decode_into_a_slot_of_a_larger_buffer(fmt):
    array = natural_image(9, 11, 3)
    data = encode(array, fmt, **({"lossless": True} if fmt == "WEBP" else {}))
    canvas = np.full((20, 30, 3), 7, np.uint8)
    codecs.decode_into(data, canvas[5:14, 10:21])
    np.testing.assert_array_equal(canvas[5:14, 10:21], pillow_pixels(data))
    canvas[5:14, 10:21] = 7
    assert (canvas == 7).all()   # nothing written outside the slot


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP"])
def test_destination_of_another_size_is_refused(fmt):
    data = encode(natural_image(9, 11, 3), fmt)
    with pytest.raises(ValueError, match="does not match"):
        codecs.decode_into(data, np.empty((9, 12, 3), np.uint8))


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP"])
def test_truncated_data_is_an_error(fmt):
    data = encode(natural_image(64, 64, 3), fmt)
    for cut in (len(data) // 2, len(data) - 20):
        with pytest.raises(ValueError, match=f"(?i)cannot decode image: {fmt}: "):
            decode_native(data[:cut], 3) if cut > 40 else codecs.header_info(data[:cut])


def test_corrupt_jpeg_entropy_data_is_an_error():
    data = bytearray(encode(natural_image(64, 64, 3), "JPEG", quality=90))
    start = data.index(b"\xff\xda") + 20
    data[start:start + 200] = bytes(range(200))   # garbage inside the scan
    with pytest.raises(ValueError, match="JPEG"):
        decode_native(bytes(data), 3)


def test_random_bytes_with_a_valid_signature_are_errors():
    rng = np.random.default_rng(7)
    for signature in (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"RIFF\0\0\0\0WEBP"):
        data = signature + rng.integers(0, 256, 500, dtype=np.uint8).tobytes()
        with pytest.raises(ValueError, match="cannot decode image"):
            codecs.header_info(data)
            decode_native(data, 3)


def test_sniff():
    assert codecs.sniff(b"\xff\xd8\xff\xe0") == "JPEG"
    assert codecs.sniff(b"GIF89a....") == "GIF"
    assert codecs.sniff(b"BM......") == "BMP"
    assert codecs.sniff(b"hello") is None
    assert codecs.sniff(b"") is None


def turbojpeg_ycck(cmyk):
    """Encode CMYK samples as a YCCK JPEG with the TurboJPEG library (Pillow writes CMYK)."""
    import ctypes
    import ctypes.util

    lib = ctypes.CDLL(ctypes.util.find_library("turbojpeg") or "libturbojpeg.so.0")
    lib.tjInitCompress.restype = ctypes.c_void_p
    lib.tjCompress2.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p),
                                ctypes.POINTER(ctypes.c_ulong), ctypes.c_int, ctypes.c_int,
                                ctypes.c_int]
    lib.tjDestroy.argtypes = [ctypes.c_void_p]
    lib.tjFree.argtypes = [ctypes.c_void_p]
    handle = lib.tjInitCompress()
    out, size = ctypes.c_void_p(), ctypes.c_ulong(0)
    h, w = cmyk.shape[:2]
    tjpf_cmyk, tjsamp_420 = 11, 2
    status = lib.tjCompress2(handle, cmyk.ctypes.data, w, w * 4, h, tjpf_cmyk,
                             ctypes.byref(out), ctypes.byref(size), tjsamp_420, 90, 0)
    try:
        assert status == 0
        return ctypes.string_at(out, size.value)
    finally:
        lib.tjFree(out)
        lib.tjDestroy(handle)


@pytest.mark.parametrize("channels,mode", [(3, "RGB"), (1, "L")])
def test_jpeg_ycck_converted_as_pillow(channels, mode):
    data = turbojpeg_ycck(np.ascontiguousarray(natural_image(26, 34, 4, seed=6)))
    adobe = data.index(b"Adobe")
    assert data[adobe + 11] == 2   # the Adobe segment's transform: YCCK
    assert_same_as_pillow(data, mode, channels=channels)


# --- a JPEG header read once for an info call and the decode after it ------

def same_length(*files):
    """The JPEGs padded after their end (which decoders ignore) to one length."""
    length = max(len(f) for f in files)
    return [f + bytes(length - len(f)) for f in files]


def decode_after_info_of(first, second):
    """Decode ``second`` (30x40 RGB) from the buffer an info call just read ``first`` in."""
    buffer = bytearray(first)
    out = np.empty((30, 40, 3), np.uint8)
    codecs.header_info(buffer)
    buffer[:] = second
    codecs.decode_into(buffer, out)
    return out


def test_kept_jpeg_header_is_used_only_for_the_same_header_bytes():
    # header_info keeps the header in the thread's decompressor; the decode of
    # the same buffer after it starts from it only when the header's bytes are
    # unchanged. Same buffer, same size, other quantisation tables: parsed again.
    image = natural_image(30, 40, 3, seed=5)
    first, second = same_length(encode(image, "JPEG", quality=90),
                                encode(image, "JPEG", quality=30))
    np.testing.assert_array_equal(decode_after_info_of(first, second), pillow_pixels(second))


def test_kept_jpeg_header_reads_the_entropy_data_the_buffer_holds():
    # Same header bytes, other pixels: the kept header is used, and the
    # pixels are those of the data in the buffer at the decode.
    first, second = same_length(encode(natural_image(30, 40, 3, seed=6), "JPEG", quality=90),
                                encode(natural_image(30, 40, 3, seed=7), "JPEG", quality=90))
    header = first.index(b"\xff\xda")
    assert first[:header] == second[:header]
    np.testing.assert_array_equal(decode_after_info_of(first, second), pillow_pixels(second))


def test_kept_jpeg_header_does_not_survive_other_calls():
    # An info call on one file, then a decode of another, then of the first:
    # each decode gives its own file's pixels, as does a header too long to keep.
    files = [encode(natural_image(30, 40, 3, seed=s), "JPEG", quality=q)
             for s, q in ((8, 90), (9, 50))]
    exif = PILImage.Exif()
    exif[0x010E] = "x" * 5000   # ImageDescription: an APP1 segment longer than kept headers
    buffer = io.BytesIO()
    PILImage.fromarray(natural_image(30, 40, 3, seed=10)).save(buffer, "JPEG", exif=exif)
    files.append(buffer.getvalue())
    for info, decoded in ((0, 1), (1, 0), (2, 2), (2, 0), (0, 0)):
        codecs.header_info(files[info])
        np.testing.assert_array_equal(decode_native(files[decoded]), pillow_pixels(files[decoded]))
