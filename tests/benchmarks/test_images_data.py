"""The generated ImageNet-like image folder of benchmarks/_images.py."""

import io
import sys
from pathlib import Path

import pytest
from PIL import Image as PILImage

from dataloader.kernels import image_info

pytest.importorskip("skimage")

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
import _images as images

N_IMAGES = 20
N_CLASSES = 3


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return images.generated_image_folder(tmp_path_factory.mktemp("gen") / "set",
                                         n_images=N_IMAGES, n_classes=N_CLASSES, seed=7)


def quality_90_tables():
    buffer = io.BytesIO()
    PILImage.new("RGB", (16, 16)).save(buffer, "JPEG", quality=90)
    with PILImage.open(buffer) as im:
        return im.quantization


def test_layout_is_an_image_folder(folder):
    classes = sorted(p.name for p in folder.iterdir() if p.is_dir())
    assert classes == [f"class_{k}" for k in range(N_CLASSES)]
    paths = images.image_paths(folder)
    assert len(paths) == N_IMAGES
    for path in paths:
        index = int(path.stem.removeprefix("img_"))
        assert path.parent.name == f"class_{index % N_CLASSES}"


def test_jpegs_of_imagenet_size_at_quality_90(folder):
    tables = quality_90_tables()
    for path in images.image_paths(folder):
        info = image_info(path.read_bytes())
        assert info.format == "JPEG"
        assert info.channels == 3
        assert images.WIDTHS[0] <= info.width <= images.WIDTHS[1]
        assert images.HEIGHTS[0] <= info.height <= images.HEIGHTS[1]
        with PILImage.open(path) as im:
            assert im.quantization == tables


def test_same_seed_same_bytes_other_seed_other_bytes(folder, tmp_path):
    again = images.generated_image_folder(tmp_path / "again", n_images=N_IMAGES,
                                          n_classes=N_CLASSES, seed=7)
    other = images.generated_image_folder(tmp_path / "other", n_images=N_IMAGES,
                                          n_classes=N_CLASSES, seed=8)
    first = [p.read_bytes() for p in images.image_paths(folder)]
    assert [p.read_bytes() for p in images.image_paths(again)] == first
    assert [p.read_bytes() for p in images.image_paths(other)] != first


def test_a_complete_folder_is_reused(tmp_path):
    root = images.generated_image_folder(tmp_path / "set", n_images=4, n_classes=2)
    stamps = {p: p.stat().st_mtime_ns for p in images.image_paths(root)}
    (root / "class_0" / "extra.txt").write_text("kept when the set is reused")
    assert images.generated_image_folder(root, n_images=4, n_classes=2) == root
    assert {p: p.stat().st_mtime_ns for p in images.image_paths(root)} == stamps
    assert (root / "class_0" / "extra.txt").exists()


def test_an_incomplete_or_different_folder_is_remade(tmp_path):
    root = images.generated_image_folder(tmp_path / "set", n_images=4, n_classes=2)
    (root / images.MARKER).unlink()          # as if interrupted before the marker
    (root / "class_0" / "stale.txt").write_text("")
    images.generated_image_folder(root, n_images=4, n_classes=2)
    assert not (root / "class_0" / "stale.txt").exists()
    assert len(images.image_paths(root)) == 4
    images.generated_image_folder(root, n_images=6, n_classes=2)
    assert len(images.image_paths(root)) == 6
    assert not list(tmp_path.glob("*.partial-*"))


def test_default_root_is_under_the_temporary_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    root = images.generated_image_folder(n_images=2, n_classes=1, seed=3)
    assert root == tmp_path / "dataloader-bench-images-2-3-1c"
    assert len(images.image_paths(root)) == 2


def test_arguments_are_checked(tmp_path):
    with pytest.raises(ValueError, match="n_images"):
        images.generated_image_folder(tmp_path, n_images=0)
