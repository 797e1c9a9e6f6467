"""The generated sample images of dataloader._images.samples."""

import io
import json
import os

import numpy as np
import pytest
from PIL import Image as PILImage

from dataloader._images import samples as images
from dataloader.kernels import image_info

N_IMAGES = 20
N_CLASSES = 3


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return images.sample_image_folder(root=tmp_path_factory.mktemp("gen") / "set",
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
    again = images.sample_image_folder(root=tmp_path / "again", n_images=N_IMAGES,
                                       n_classes=N_CLASSES, seed=7)
    other = images.sample_image_folder(root=tmp_path / "other", n_images=N_IMAGES,
                                       n_classes=N_CLASSES, seed=8)
    first = [p.read_bytes() for p in images.image_paths(folder)]
    assert [p.read_bytes() for p in images.image_paths(again)] == first
    assert [p.read_bytes() for p in images.image_paths(other)] != first


def test_a_complete_folder_is_reused(tmp_path):
    root = images.sample_image_folder(root=tmp_path / "set", n_images=4, n_classes=2)
    stamps = {p: p.stat().st_mtime_ns for p in images.image_paths(root)}
    (root / "class_0" / "extra.txt").write_text("kept when the set is reused")
    assert images.sample_image_folder(root=root, n_images=4, n_classes=2) == root
    assert {p: p.stat().st_mtime_ns for p in images.image_paths(root)} == stamps
    assert (root / "class_0" / "extra.txt").exists()


def test_an_incomplete_or_different_folder_is_remade(tmp_path):
    root = images.sample_image_folder(root=tmp_path / "set", n_images=4, n_classes=2)
    (root / images.MARKER).unlink()          # as if interrupted before the marker
    (root / "class_0" / "stale.txt").write_text("")
    images.sample_image_folder(root=root, n_images=4, n_classes=2)
    assert not (root / "class_0" / "stale.txt").exists()
    assert len(images.image_paths(root)) == 4
    images.sample_image_folder(root=root, n_images=6, n_classes=2)
    assert len(images.image_paths(root)) == 6
    assert not list(tmp_path.glob("*.partial-*"))


def test_default_root_is_under_the_temporary_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    root = images.sample_image_folder(n_images=2, n_classes=1, seed=3)
    # Named by its arguments, and by its source where that is not the bundled
    # photographs (a build without scikit-image's wheel makes synthetic ones).
    assert root.parent == tmp_path / f"dataloader-{os.getuid()}"
    assert root.name in {"sample-images-2-1c-3", "sample-images-2-1c-3-synthetic"}
    assert root.parent.stat().st_mode & 0o777 == 0o700
    assert len(images.image_paths(root)) == 2


def test_arguments_are_checked(tmp_path):
    with pytest.raises(ValueError, match="n_images"):
        images.sample_image_folder(root=tmp_path, n_images=0)


def test_without_scikit_image_the_images_are_synthetic(monkeypatch, tmp_path):
    monkeypatch.setattr(images, "_photos", lambda pil_image: [])
    root = images.sample_image_folder(root=tmp_path / "set", n_images=3, n_classes=2, seed=5)
    paths = images.image_paths(root)
    synthetic = [path.read_bytes() for path in paths]
    assert [path.parent.name for path in paths] == ["class_0", "class_0", "class_1"]
    for path in paths:
        info = image_info(path.read_bytes())
        assert images.WIDTHS[0] <= info.width <= images.WIDTHS[1]
        assert images.HEIGHTS[0] <= info.height <= images.HEIGHTS[1]
    # A folder of photographs is not mistaken for a synthetic one, nor the reverse.
    monkeypatch.undo()
    if images._photos(PILImage):
        again = images.sample_image_folder(root=root, n_images=3, n_classes=2, seed=5)
        assert [path.read_bytes() for path in images.image_paths(again)] != synthetic


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_synthetic_image_is_deterministic_and_varied(channels):
    image = images.synthetic_image(17, 9, channels, seed=4)
    assert image.shape == (17, 9, channels) and image.dtype == np.uint8
    np.testing.assert_array_equal(image, images.synthetic_image(17, 9, channels, seed=4))
    assert not np.array_equal(image, images.synthetic_image(17, 9, channels, seed=5))
    assert all(np.ptp(image[:, :, c]) > 50 for c in range(channels))


def test_installed_photographs_when_the_packages_are_there(tmp_path):
    root = images.sample_image_folder(root=tmp_path / "set", n_images=3, n_classes=1, seed=2,
                                      photographs="installed")
    installed = any(os.path.exists(path) for path in images.INSTALLED_PHOTOS)
    bundled = bool(images._photos(PILImage))
    marker = json.loads((root / images.MARKER).read_text())
    assert marker["photos"] == ("installed" if installed else
                                "bundled" if bundled else "synthetic")
    for path in images.image_paths(root):
        info = image_info(path.read_bytes())
        assert images.WIDTHS[0] <= info.width <= images.WIDTHS[1]
        assert images.HEIGHTS[0] <= info.height <= images.HEIGHTS[1]
    if installed:   # cut from other pictures than the default set's
        other = images.sample_image_folder(root=tmp_path / "other", n_images=3, n_classes=1,
                                           seed=2)
        assert ([p.read_bytes() for p in images.image_paths(other)]
                != [p.read_bytes() for p in images.image_paths(root)])
    with pytest.raises(ValueError, match="photographs"):
        images.sample_image_folder(root=tmp_path / "bad", n_images=1, photographs="web")
