"""Untrusted files: Pillow reads only the documented formats; bounded decoders and CLI."""

import io
import os
import random
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image as PILImage

from dataloader import kernels
from dataloader._images.decode import FORMATS, PILLOW_FORMATS
from dataloader._images.folder import pil_loader

EPS = (b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 8 8\n"
       b"newpath 0 0 moveto 8 8 lineto stroke showpage\n%%EOF\n")
# The binary header of a DOS EPS file, then the PostScript.
DOS_EPS = b"\xc5\xd0\xd3\xc6" + (30).to_bytes(4, "little") + bytes(22) + EPS
PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"
# Formats Pillow reads that the library does not: refused, whatever Pillow could do.
OTHERS = {"EPS": EPS, "DOS EPS": DOS_EPS, "PDF": PDF, "PPM": b"P6\n2 2\n255\n" + bytes(12),
          "ICO": b"\0\0\1\0" + bytes(40)}


def encoded(fmt):
    buffer = io.BytesIO()
    PILImage.new("RGB", (5, 4), (10, 20, 30)).save(buffer, fmt)
    return buffer.getvalue()


def test_the_pillow_formats_are_the_documented_ones():
    assert set(PILLOW_FORMATS) == {"GIF", "BMP", "TIFF"}
    assert set(FORMATS) == {"JPEG", "PNG", "WEBP", "GIF", "BMP", "TIFF"}


@pytest.mark.parametrize("name", sorted(OTHERS))
def test_other_formats_are_refused_by_decode_and_image_info(name):
    for call in (kernels.decode, kernels.image_info):
        with pytest.raises(ValueError, match="is not a format this library reads"):
            call(OTHERS[name])


# Run in a fresh interpreter: no plugin imported by anything else.
FRESH = """
import io, sys
from dataloader import kernels
from dataloader._images.folder import pil_loader
eps, path, images = sys.argv[1].encode("latin-1"), sys.argv[2], sys.argv[3:]
for call in (kernels.decode, kernels.image_info):
    try:
        call(eps)
    except ValueError:
        pass
    else:
        raise SystemExit("EPS bytes were decoded")
try:
    pil_loader(path)
except Exception:
    pass
else:
    raise SystemExit("pil_loader read EPS bytes")
for image in images:  # the documented formats still read
    assert kernels.decode(open(image, "rb").read()).shape == (4, 5, 3)
    assert pil_loader(image).size == (5, 4)
plugins = [name for name in sys.modules if name.startswith("PIL.") and "Plugin" in name]
print(" ".join(sorted(plugins)))
"""


def test_eps_bytes_never_load_pillows_eps_plugin(tmp_path):
    disguised = tmp_path / "photo.jpg"  # EPS bytes under an image's name
    disguised.write_bytes(EPS)
    images = []
    for fmt in ("GIF", "BMP", "TIFF", "PNG", "JPEG", "WEBP"):
        images.append(tmp_path / f"image.{fmt.lower()}")
        images[-1].write_bytes(encoded(fmt))
    result = subprocess.run(
        [sys.executable, "-c", FRESH, EPS.decode("latin-1"), str(disguised), *map(str, images)],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    plugins = set(result.stdout.strip().splitlines()[-1].split())
    assert "PIL.EpsImagePlugin" not in plugins and "PIL.PdfImagePlugin" not in plugins
    allowed = {f"PIL.{name}ImagePlugin"
               for name in ("Bmp", "Gif", "Jpeg", "Png", "Ppm", "Tiff", "WebP", "Mpo")}
    assert plugins <= allowed, plugins - allowed


def test_a_loaded_eps_plugin_is_never_used(monkeypatch, tmp_path):
    # Even with every plugin registered (another library called Image.init()),
    # EPS bytes, bare or behind another format's magic, never reach EPS's reader.
    from PIL import EpsImagePlugin

    PILImage.init()

    def refuse(self):
        raise AssertionError("the EPS plugin was asked to read")

    monkeypatch.setattr(EpsImagePlugin.EpsImageFile, "_open", refuse)
    for data in (EPS, DOS_EPS, b"II*\0" + EPS, b"GIF89a" + EPS, b"BM" + EPS):
        with pytest.raises(ValueError, match="cannot decode image"):
            kernels.decode(data)
    path = tmp_path / "x.tif"
    path.write_bytes(EPS)
    with pytest.raises(PILImage.UnidentifiedImageError):
        pil_loader(str(path))


@pytest.mark.parametrize("fmt", ["GIF", "BMP", "TIFF"])
def test_the_fallback_formats_still_decode(fmt):
    pixels = kernels.decode(encoded(fmt), mode="RGB")
    np.testing.assert_array_equal(pixels, np.full((4, 5, 3), (10, 20, 30), np.uint8))
    assert kernels.image_info(encoded(fmt)).format == fmt


# -- the command line ---------------------------------------------------------------------

INFO = """
import resource, sys
from dataloader._cli.main import main
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
status = main(["info", sys.argv[1]])
print(status, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
"""


@pytest.mark.parametrize(("head", "bound"), [(b"not an image at all", 16 << 20),
                                             (b"\xff\xd8\xff\xe0", 200 << 20)])
def test_info_reads_only_the_header_of_a_large_file(tmp_path, head, bound):
    path = tmp_path / "big.bin"
    with open(path, "wb") as file:  # 300 MB, sparse: cheap to write
        file.write(head)
        file.truncate(300 << 20)
    result = subprocess.run([sys.executable, "-c", INFO, str(path)], capture_output=True,
                            text=True, timeout=300)
    status, grown = map(int, result.stdout.split())
    assert status == 1 and "big.bin" in result.stderr, result.stderr
    assert grown < bound, grown  # reading the file whole took 661 MiB


def test_info_still_reads_a_tiff_whose_directory_is_at_the_end(tmp_path):
    from dataloader._cli.main import main

    path = tmp_path / "late.tif"
    pixels = np.zeros((600, 700), np.uint8)
    PILImage.fromarray(pixels).save(path, "TIFF")  # Pillow writes the directory last
    assert main(["info", "--json", str(path)]) == 0


def pack(*argv):
    from dataloader._cli.main import main

    return main(["pack", *map(str, argv)])


@pytest.fixture
def tree(tmp_path):
    """An image folder (``src``), a file outside it (``secret.jpg``), an output folder."""
    src = tmp_path / "src"
    (src / "cat").mkdir(parents=True)
    (src / "cat" / "a.jpg").write_bytes(encoded("JPEG"))
    (tmp_path / "secret.jpg").write_bytes(b"outside the tree")
    return tmp_path


def test_pack_refuses_a_symlink_out_of_its_folder(tree, capsys):
    (tree / "src" / "cat" / "b.jpg").symlink_to(tree / "secret.jpg")
    assert pack(tree / "src", tree / "out") == 1
    assert "leads out of" in capsys.readouterr().err
    assert not (tree / "out").exists()  # refused before anything is written


def test_pack_refuses_a_class_folder_linked_out_of_its_folder(tree, capsys):
    outside = tree / "elsewhere"
    outside.mkdir()
    (outside / "c.jpg").write_bytes(encoded("JPEG"))
    (tree / "src" / "dog").symlink_to(outside, target_is_directory=True)
    assert pack(tree / "src", tree / "out") == 1
    assert "leads out of" in capsys.readouterr().err


def test_pack_follows_links_that_stay_inside(tree):
    (tree / "src" / "cat" / "b.jpg").symlink_to(tree / "src" / "cat" / "a.jpg")
    assert pack(tree / "src", tree / "out") == 0


@pytest.mark.parametrize("path", ["../secret.jpg", "{secret}", "sub/../../secret.jpg"])
def test_pack_refuses_index_paths_leaving_its_folder(tree, capsys, path):
    path = path.replace("{secret}", str(tree / "secret.jpg"))
    index = tree / "src" / "index.jsonl"
    index.write_text(f'{{"path": "cat/a.jpg"}}\n{{"path": "{path}"}}\n')
    assert pack(index, tree / "out") == 1
    err = capsys.readouterr().err
    assert "index.jsonl, line 2" in err and ("leads out of" in err or "absolute" in err)
    assert not (tree / "out").exists()  # refused before anything is written


@pytest.mark.parametrize("prefix", ["../x", "a/b", "/tmp/x", "..", ""])
def test_pack_refuses_a_prefix_naming_another_folder(tree, capsys, prefix):
    assert pack(tree / "src", tree / "out", "--prefix", prefix) == 2
    assert "--prefix" in capsys.readouterr().err
    assert not list(tree.rglob("*.tar"))


def test_pack_prefix_braces_are_literal(tree):
    assert pack(tree / "src", tree / "out", "--prefix", "v{1}") == 0
    assert [p.name for p in (tree / "out").iterdir()] == ["v{1}-000000.tar"]


def test_generated_images_go_to_a_folder_of_this_users(monkeypatch, tmp_path):
    import tempfile

    from dataloader._images import samples

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    private = samples._private_folder()
    assert private == tmp_path / f"dataloader-{os.getuid()}"
    assert private.stat().st_mode & 0o777 == 0o700
    # A folder of that name prepared by someone else (here: a link, then an open
    # folder) is not used: a new private folder is.
    private.rmdir()
    planted = tmp_path / "planted"
    planted.mkdir()
    private.symlink_to(planted, target_is_directory=True)
    other = samples._private_folder()
    assert other not in (private, planted) and other.stat().st_mode & 0o777 == 0o700
    private.unlink()
    private.mkdir(mode=0o777)
    private.chmod(0o777)
    assert samples._private_folder() != private


def test_show_refuses_a_transform_nested_too_deeply(tmp_path, capsys):
    from dataloader._cli.main import main

    out = tmp_path / "grid.png"
    for text in ["-" * 100_000 + "1", "Resize(" + "-" * 5_000 + "1)", "Resize(" + "-" * 900 + "1)"]:
        assert main(["show", str(tmp_path), "--out", str(out), f"--transform={text}"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("dataloader show: error: --transform: ") and "Traceback" not in err
        assert len(err) < 400


# -- the decoders' own memory ------------------------------------------------------------

DECODE = """
import resource, sys
from dataloader import kernels
data = open(sys.argv[1], "rb").read()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    result = str(kernels.decode(data, mode=sys.argv[2], max_bytes=int(sys.argv[3])).shape)
except ValueError as error:
    result = str(error)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024)
print(result)
"""


def decode_in_child(path, mode, max_bytes):
    result = subprocess.run([sys.executable, "-c", DECODE, str(path), mode, str(max_bytes)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    grown, message = result.stdout.splitlines()
    return int(grown), message


def adam7_png(width, height, rgba=(10, 200, 30, 255)):
    """An interlaced RGBA PNG of one colour (Pillow writes no Adam7)."""
    import struct
    import zlib

    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4),
              (1, 0, 2, 2), (0, 1, 1, 2)]
    raw = bytearray()
    for x0, y0, dx, dy in passes:
        columns, rows = -(-(width - x0) // dx), -(-(height - y0) // dy)
        if columns > 0 and rows > 0:
            raw += (b"\0" + bytes(rgba) * columns) * rows

    def chunk(kind, body):
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 1)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(bytes(raw), 9)) + chunk(b"IEND", b""))


def test_an_rgba_png_decoded_as_grey_needs_no_image_sized_scratch(tmp_path):
    path = tmp_path / "big.png"
    PILImage.new("RGBA", (4096, 4096), (10, 20, 30, 255)).save(path)
    grown, message = decode_in_child(path, "L", 16 << 20)  # the output fills the limit
    assert message == "(4096, 4096, 1)"
    assert grown < (16 << 20) + (12 << 20), grown  # the output; the scratch was 64 MiB more


def test_an_interlaced_png_counts_its_scratch_in_the_limit(tmp_path):
    small = adam7_png(13, 11)
    np.testing.assert_array_equal(
        kernels.decode(small, mode="L"),
        np.asarray(PILImage.open(io.BytesIO(small)).convert("L"))[:, :, None])
    data = adam7_png(2048, 2048)
    with pytest.raises(ValueError, match=r"needs 20971520 bytes \(16777216 of them the "
                                         r"decoder's working memory\), over the limit"):
        kernels.decode(data, mode="L", max_bytes=8 << 20)
    assert kernels.decode(data, mode="RGBA", max_bytes=16 << 20).shape == (2048, 2048, 4)


@pytest.mark.parametrize("progressive", [True, False])
def test_a_progressive_jpeg_counts_its_coefficients_in_the_limit(tmp_path, progressive):
    path = tmp_path / "grey.jpg"
    PILImage.new("L", (4096, 4096), 77).save(path, progressive=progressive, quality=50)
    grown, message = decode_in_child(path, "L", 32 << 20)
    if progressive:  # 16 MiB of pixels and 32 MiB of coefficients
        assert message == ("image of 4096x4096x1 needs 50331648 bytes (33554432 of them the "
                           "decoder's working memory), over the limit of 33554432"), message
        assert grown < 8 << 20, grown  # refused from the header: nothing allocated
    else:
        assert message == "(4096, 4096, 1)"


def test_the_decode_transform_counts_the_decoders_memory_too(tmp_path):
    from dataloader import transforms

    buffer = io.BytesIO()
    PILImage.new("L", (2048, 2048), 77).save(buffer, "JPEG", progressive=True)
    chain = transforms.Compose([transforms.Decode("L", max_bytes=8 << 20)])
    with pytest.raises(ValueError, match="working memory"):
        chain(buffer.getvalue())


def damaged(data, rng):
    """``data`` cut short, with bytes changed, or with a run of zeros."""
    damage = rng.choice(["cut", "change", "zeros"])
    data = bytearray(data)
    if damage == "cut":
        return bytes(data[:rng.randrange(1, len(data))])
    if damage == "change":
        for _ in range(rng.randrange(1, 40)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data)
    start = rng.randrange(len(data))
    data[start:start + 2000] = bytes(len(data[start:start + 2000]))
    return bytes(data)


@pytest.mark.parametrize("name", ["h264_bframes.mp4", "hevc.mkv", "vp9.webm", "av1.mkv",
                                  "offset.ts", "tones.m4a", "tones.ogg", "tones.wav"])
def test_damaged_video_and_audio_decode_or_raise_value_error_quietly(media, name, capfd):
    rng = random.Random(name)
    data = media[name].read_bytes()
    outcomes = set()
    for _ in range(12):
        bad = damaged(data, rng)
        for call in (lambda b: kernels.decode_video(b, size=(32, 48)), kernels.decode_audio,
                     kernels.media_info):
            try:
                call(bad)
                outcomes.add("decoded")
            except ValueError as err:
                assert "cannot decode" in str(err)
                outcomes.add("refused")
    assert "refused" in outcomes   # the damage was seen, never a crash or another error
    assert capfd.readouterr().err == ""   # FFmpeg's log never reaches stderr
