"""The ``dataloader`` command: each subcommand in a subprocess and in-process, and its errors."""

import io
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import pytest
from conftest import encode, natural_image
from PIL import Image as PILImage

from dataloader._cli.main import main
from dataloader._cli.show import parse_transforms
from dataloader._images.exif import orientation
from dataloader._processes.choice import free_threaded

TIMEOUT = 120


def run(*args, env=None):
    """``python -m dataloader ARGS`` in a subprocess."""
    return subprocess.run([sys.executable, "-m", "dataloader", *map(str, args)],
                          capture_output=True, text=True, timeout=TIMEOUT,
                          env={**os.environ, **(env or {})})


@pytest.fixture
def folder(tmp_path):
    """Two classes of four JPEGs each, of different sizes."""
    root = tmp_path / "images"
    for index in range(8):
        directory = root / ("cat" if index % 2 else "dog")
        directory.mkdir(parents=True, exist_ok=True)
        pixels = natural_image(48 + 4 * index, 64, seed=index)
        (directory / f"{index}.jpg").write_bytes(encode(pixels, "JPEG", quality=90))
    return root


def with_orientation(fmt, value):
    exif = PILImage.Exif()
    exif[0x0112] = value
    return encode(PILImage.fromarray(natural_image(20, 30)), fmt, exif=exif.tobytes())


# --- the command itself ---------------------------------------------------------


def test_help_lists_commands_and_examples():
    result = run("--help")
    assert result.returncode == 0
    for text in ("bench", "info", "show", "examples:", "exit status"):
        assert text in result.stdout


@pytest.mark.parametrize("command", ["bench", "info", "show", "pack"])
def test_subcommand_help(command, capsys):
    assert main([command, "--help"]) == 0
    assert "examples:" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [[], ["frobnicate"], ["bench", "--batch-size", "0"],
                                  ["bench", "--workers", "x"], ["show", "somewhere"],
                                  ["bench", "--against", "jax"]])
def test_usage_errors_exit_2(argv, capsys):
    assert main(argv) == 2
    assert "usage:" in capsys.readouterr().err


def test_version():
    result = run("--version")
    assert result.returncode == 0 and result.stdout.startswith("dataloader ")


# --- bench ----------------------------------------------------------------------


def test_bench_subprocess(folder):
    result = run("bench", folder, "--batch-size", 4, "--workers", 2, "--size", 32,
                 "--epochs", 2)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "8 images in 2 classes" in out
    assert "images/s" in out and "MB/s" in out
    for stage in ("fetch", "transform", "collate", "wait"):
        assert stage in out
    images_row = next(line for line in out.splitlines() if line.startswith("images "))
    assert images_row.split()[-1] == "16"


def test_bench_in_process(folder, capsys):
    assert main(["bench", str(folder), "--batch-size", "3", "--workers", "0", "--size", "16"]) == 0
    out = capsys.readouterr().out
    assert "dataloader stage" in out and "torch" not in out


def test_bench_against_torch(folder):
    pytest.importorskip("torch")
    result = run("bench", folder, "--batch-size", 4, "--workers", 1, "--size", 32,
                 "--against", "torch")
    assert result.returncode == 0, result.stderr
    header = next(line for line in result.stdout.splitlines() if "dataloader" in line)
    assert header.split() == ["dataloader", "torch", "speed-up"]
    assert "images/s after the first batch" in result.stdout
    # 8 images are one start-up and two batches: the figures say so.
    assert "this run is too short to compare loading speeds" in result.stderr
    assert "x" in next(line for line in result.stdout.splitlines()
                       if line.startswith("images/s")).split()[-1]


def test_a_short_run_is_flagged_and_steady_figures_leave_the_start_up_out():
    from dataloader._cli.bench import BenchResult, report, short_run_warning

    # torch: 0.9 s to start, then 40 images in 0.1 s; ours: 0.05 s, then 40 in 0.2 s.
    torch = BenchResult("torch", 48, 0, 1.0, 0.9, first_batch_images=8)
    ours = BenchResult("dataloader", 48, 0, 0.25, 0.05, first_batch_images=8)
    warning = short_run_warning([ours, torch])
    assert "torch spent 90% of its 1.00 s" in warning and "dataloader" not in warning
    steady = next(line for line in report(ours, torch).splitlines()
                  if line.startswith("images/s after the first batch"))
    assert steady.split()[-3:] == ["200.0", "400.0", "0.50x"]
    long_run = BenchResult("torch", 4800, 0, 10.0, 0.9, first_batch_images=8)
    assert short_run_warning([ours, long_run]) is None


def test_bench_against_torch_without_torch(folder, monkeypatch, capsys):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "torch" else find_spec(name, *args))
    assert main(["bench", str(folder), "--against", "torch"]) == 1
    assert "--against torch needs torch" in capsys.readouterr().err


def test_bench_generated_images(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    argv = ["bench", "--sample-images", "8", "--batch-size", "4", "--workers", "1",
            "--size", "32"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "8 images in 4 classes" in captured.out
    generated = list(tmp_path.glob("dataloader-*/sample-images-*"))
    assert len(generated) == 1 and len(list(generated[0].rglob("*.jpg"))) == 8
    # The second run reuses the folder.
    assert main(argv) == 0
    assert list(tmp_path.glob("dataloader-*/sample-images-*")) == generated


def test_bench_generated_images_subprocess(tmp_path):
    result = run("bench", "--sample-images", 4, "--batch-size", 2, "--size", 16,
                 env={"TMPDIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert str(tmp_path) in result.stderr


def test_bench_missing_folder(tmp_path):
    result = run("bench", tmp_path / "nope")
    assert result.returncode == 2
    assert "nope: no such file or directory" in result.stderr
    assert "Traceback" not in result.stderr


def test_bench_empty_folder(tmp_path, capsys):
    (tmp_path / "empty" / "class").mkdir(parents=True)
    assert main(["bench", str(tmp_path / "empty")]) == 1
    err = capsys.readouterr().err
    assert "no images" in err and "Traceback" not in err


def test_bench_names_unreadable_file(folder, capsys):
    broken = folder / "cat" / "broken.jpg"
    broken.write_bytes(b"\xff\xd8 not really a JPEG")
    assert main(["bench", str(folder), "--batch-size", "1", "--workers", "2", "--size", "16"]) == 1
    err = capsys.readouterr().err
    assert str(broken) in err and "Traceback" not in err


def test_bench_flat_folder(tmp_path, capsys):
    for index in range(3):
        (tmp_path / f"{index}.png").write_bytes(encode(natural_image(20, 24, seed=index), "PNG"))
    assert main(["bench", str(tmp_path), "--batch-size", "2", "--size", "8"]) == 0
    assert "3 images in 1 classes" in capsys.readouterr().out


# --- info -----------------------------------------------------------------------


def test_info_subprocess(tmp_path):
    paths = {
        "a.jpg": with_orientation("JPEG", 6),
        "b.png": with_orientation("PNG", 3),
        "c.webp": with_orientation("WEBP", 8),
        "d.png": encode(natural_image(7, 9, channels=1), "PNG"),
    }
    for name, data in paths.items():
        (tmp_path / name).write_bytes(data)
    result = run("info", *(tmp_path / name for name in paths))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["file", "format", "size", "channels", "mode", "orientation",
                                "bytes"]
    assert "JPEG" in lines[1] and "30x20" in lines[1] and "6 (rotated 90 CW)" in lines[1]
    assert "PNG" in lines[2] and "3 (rotated 180)" in lines[2]
    assert "WEBP" in lines[3] and "8 (rotated 90 CCW)" in lines[3]
    assert lines[4].split()[1:6] == ["PNG", "9x7", "1", "L", "-"]


def test_info_json_in_process(tmp_path, capsys):
    path = tmp_path / "a.jpg"
    path.write_bytes(with_orientation("JPEG", 5))
    assert main(["info", "--json", str(path)]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts == {"file": str(path), "format": "JPEG", "width": 30, "height": 20,
                     "channels": 3, "mode": "RGB", "orientation": 5,
                     "bytes": path.stat().st_size}


def test_info_reads_past_a_large_exif_segment(tmp_path, capsys):
    # The frame header comes after 200 KB of ICC profile: beyond the first header prefix.
    path = tmp_path / "big.jpg"
    PILImage.fromarray(natural_image(10, 12)).save(path, "JPEG", icc_profile=b"\0" * 200_000)
    assert main(["info", "--json", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["width"] == 12


def test_info_reads_the_images_of_a_folder_as_show_and_bench_do(folder, tmp_path, capsys):
    images = sorted(path for path in folder.rglob("*") if path.is_file())
    assert main(["info", "--json", str(folder)]) == 0
    files = [json.loads(line)["file"] for line in capsys.readouterr().out.splitlines()]
    assert files == [str(path) for path in images]
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("no images here")
    assert main(["info", str(tmp_path / "empty")]) == 1
    assert "no images" in capsys.readouterr().err


def test_info_missing_file_is_a_usage_error(tmp_path):
    result = run("info", tmp_path / "missing.jpg")
    assert result.returncode == 2
    assert "missing.jpg" in result.stderr and "Traceback" not in result.stderr


def test_info_unreadable_file_is_named(tmp_path, capsys):
    good, bad = tmp_path / "good.png", tmp_path / "bad.jpg"
    good.write_bytes(encode(natural_image(4, 4), "PNG"))
    bad.write_bytes(b"\xff\xd8\xff\xe0 truncated")
    assert main(["info", str(good), str(bad)]) == 1
    captured = capsys.readouterr()
    assert "good.png" in captured.out
    assert f"{bad}:" in captured.err and "BytesIO" not in captured.err


def test_info_reports_the_streams_of_video_and_audio_files(media, tmp_path):
    image = tmp_path / "a.png"
    image.write_bytes(encode(natural_image(4, 6), "PNG"))
    result = run("info", image, media["h264_bframes.mp4"], media["vfr.mkv"], media["tones.ogg"])
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[:2] == ["file", "format"] and "6x4" in lines[1]
    assert lines[3].split() == ["file", "stream", "kind", "codec", "duration", "rate", "frames",
                                "size"]
    assert lines[4].split()[1:] == ["0", "video", "h264", "3", "s", "25", "fps", "75", "208x120"]
    assert lines[5].split()[1:] == ["1", "audio", "aac", "3", "s", "44100", "Hz", "-", "2", "ch"]
    # The variable frame rate is the frames' average, from their timestamps.
    assert lines[6].split()[3:] == ["h264", "3.146", "s", "23.825", "fps", "75", "208x120"]
    assert lines[7].split()[1:4] == ["0", "audio", "vorbis"]


def test_info_json_of_a_video_and_a_folder_of_media(media, capsys):
    assert main(["info", "--json", str(media["hevc.mkv"])]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["file"] == str(media["hevc.mkv"])
    assert facts["bytes"] == media["hevc.mkv"].stat().st_size
    assert facts["streams"] == [{
        "index": 0, "kind": "video", "codec": "hevc", "duration": 3.0, "frame_rate": 25.0,
        "frames": 75, "width": 208, "height": 120, "sample_rate": None, "channels": None}]
    assert main(["info", "--json", str(media["hevc.mkv"].parent)]) == 0
    files = [json.loads(line)["file"] for line in capsys.readouterr().out.splitlines()]
    assert sorted(files) == sorted(str(path) for path in media.values())


def test_info_names_a_file_that_is_neither_image_nor_media(tmp_path, media, capsys):
    notes = tmp_path / "notes.mp4"
    notes.write_text("not a video")
    assert main(["info", str(media["tones.wav"]), str(notes)]) == 1
    captured = capsys.readouterr()
    assert "tones.wav" in captured.out
    assert f"{notes}:" in captured.err and "cannot decode media" in captured.err


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP"])
@pytest.mark.parametrize("value", range(1, 9))
def test_orientation_matches_pillow(fmt, value):
    data = with_orientation(fmt, value)
    assert orientation(io.BytesIO(data)) == value
    with PILImage.open(io.BytesIO(data)) as image:
        assert image.getexif().get(0x0112) == value


def test_orientation_big_endian_and_absent():
    tiff = (b"MM\x00*\x00\x00\x00\x08" + b"\x00\x01"
            + b"\x01\x12\x00\x03\x00\x00\x00\x01\x00\x07\x00\x00")
    app1 = b"Exif\x00\x00" + tiff
    jpeg = b"\xff\xd8\xff\xe1" + (len(app1) + 2).to_bytes(2, "big") + app1 + b"\xff\xda"
    assert orientation(io.BytesIO(jpeg)) == 7
    assert orientation(io.BytesIO(encode(natural_image(4, 4), "JPEG"))) is None
    assert orientation(io.BytesIO(encode(natural_image(4, 4), "PNG"))) is None
    assert orientation(io.BytesIO(b"GIF89a")) is None
    assert orientation(io.BytesIO(jpeg[:20])) is None  # truncated inside the EXIF block


# --- show -----------------------------------------------------------------------


def test_show_subprocess(folder, tmp_path):
    out = tmp_path / "grid.png"
    result = run("show", folder, "--out", out, "--transform",
                 "RandomResizedCrop(32), RandomHFlip()", "--batch-size", 4)
    assert result.returncode == 0, result.stderr
    with PILImage.open(out) as grid:
        # 2 x 2 cells of 32 px plus a 12 px caption each, 4 px gaps.
        assert grid.size == (2 * 36 + 4, 2 * (32 + 12 + 4) + 4)
        assert grid.mode == "RGB"


def test_show_is_reproducible_by_seed(folder, tmp_path, capsys):
    def grid(seed, name):
        out = tmp_path / name
        argv = ["show", str(folder), "--out", str(out), "--seed", str(seed),
                "--transform", "RandomResizedCrop(24), RandomHFlip()", "--batch-size", "6"]
        assert main(argv) == 0
        return np.asarray(PILImage.open(out))

    first = grid(0, "a.png")
    assert np.array_equal(first, grid(0, "b.png"))
    assert not np.array_equal(first, grid(1, "c.png"))
    assert "seed 1" in capsys.readouterr().out


def test_show_one_file_float_chw_output(folder, tmp_path, capsys):
    out = tmp_path / "crops.png"
    transform = ("RandomResizedCrop((20, 30)), ToFloat(), Normalize(mean=[0.5, 0.5, 0.5], "
                 "std=[0.2, 0.2, 0.2]), ToChw()")
    assert main(["show", str(folder / "dog" / "0.jpg"), "--out", str(out), "--batch-size", "9",
                 "--transform", transform]) == 0
    with PILImage.open(out) as grid:
        assert grid.size == (3 * 34 + 4, 3 * 24 + 4)
        pixels = np.asarray(grid)
    assert pixels.min() == 0 and pixels.max() == 255  # normalised output is stretched


def test_show_images_of_different_sizes(folder, tmp_path):
    out = tmp_path / "grid.png"
    assert main(["show", str(folder), "--out", str(out), "--transform", "Resize(16)",
                 "--batch-size", "8"]) == 0
    assert out.stat().st_size > 0


@pytest.mark.parametrize("transform, message", [
    ("__import__('os').system('true')", "not a transform"),
    ("os.system('true')", "not a transform"),
    ("Resize(size=open('x'))", "arguments must be literals"),
    ("Resize(*[3])", "* arguments are not allowed"),
    ("Resize(**{'size': 3})", "** arguments are not allowed"),
    ("Decode()", "Decode('RGB') comes first already"),
    ("Resize(0)", "Resize(0): size must be an int in 1..16384, got 0"),
    ("Resize(", "cannot parse"),
    ("lambda: 0", "not a transform"),
    ("RandomHorizonalFlip()", "did you mean 'RandomHorizontalFlip'?"),
    ("ToPILImage()", "torchvision's ToPILImage has no counterpart here"),
    ("Blurr(3)", "use one of AutoAugment, CenterCrop, ColorJitter, Crop, GaussianBlur,"),
])
def test_show_rejects_transforms(folder, tmp_path, transform, message, capsys):
    out = tmp_path / "grid.png"
    assert main(["show", str(folder), "--out", str(out), "--transform", transform]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_parse_transforms_takes_torchvision_names():
    assert parse_transforms("Resize(32, 'bicubic'), RandomHorizontalFlip(0.3), ToTensor()") \
        == [*parse_transforms("Resize(32, interpolation='bicubic'), RandomHFlip(p=0.3)"),
            *parse_transforms("ToTensor")]


def test_parse_transforms():
    assert parse_transforms("RandomResizedCrop(224, scale=(0.5, 1.0)), RandomHFlip(p=0.25)") \
        == parse_transforms("RandomResizedCrop(size=224, scale=[0.5, 1.0]),RandomHFlip(0.25)")
    assert parse_transforms("Rotate90") == parse_transforms("Rotate90(k=1)")


def test_show_errors(folder, tmp_path, capsys):
    assert main(["show", str(tmp_path / "nope"), "--out", str(tmp_path / "g.png")]) == 2
    assert main(["show", str(folder), "--out", str(tmp_path / "g.jpg")]) == 2
    assert main(["show", str(folder), "--out", str(tmp_path / "no" / "g.png")]) == 2
    (folder / "dog" / "zz.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")
    assert main(["show", str(folder), "--out", str(tmp_path / "g.png"), "--batch-size", "9",
                 "--transform", "CenterCrop(8)"]) == 1
    err = capsys.readouterr().err
    assert "zz.png" in err and "Traceback" not in err


def test_console_script_is_installed():
    script = os.path.join(os.path.dirname(sys.executable), "dataloader")
    result = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 0 and result.stdout.startswith("dataloader ")


def test_bench_progress_without_tqdm(folder, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm raises ImportError
    assert main(["bench", str(folder), "--batch-size", "4", "--workers", "1", "--size", "8"]) == 0
    err = capsys.readouterr().err
    assert "\rdataloader: 8/8 images" in err and err.endswith("\n")


def test_bench_runs_a_dataset_of_yours_and_says_what_auto_chose(tmp_path):
    (tmp_path / "mydata.py").write_text(
        "class Squares:\n"
        "    def __len__(self):\n"
        "        return 640\n"
        "    def __getitem__(self, index):\n"
        "        return index * index\n")
    done = subprocess.run(
        [sys.executable, "-m", "dataloader", "bench", "--dataset", "mydata:Squares",
         "--batch-size", "64", "--epochs", "2"],
        capture_output=True, text=True, timeout=TIMEOUT, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "mydata:Squares: 1280 items in batches of 64, 2 epoch(s)" in done.stdout
    # Measured where Python code runs one thread at a time (a worker thread, or the
    # calling thread when that measured faster); else threads, unmeasured.
    measured = re.search(r"workers: [01] x thread -- a batch every", done.stdout) is not None
    assert measured != free_threaded(), done.stdout
    assert "of it in Python code" in done.stdout and "waited for batches" in done.stdout


@pytest.mark.parametrize(("spec", "message"), [
    ("mydata", "should be MODULE:CALLABLE"),
    ("no_such_module:Thing", "cannot import 'no_such_module'"),
    ("json:no_such_name", "'json' has no 'no_such_name'"),
])
def test_bench_names_a_dataset_it_cannot_find(spec, message):
    done = run("bench", "--dataset", spec)
    assert done.returncode == 2 and message in done.stderr
