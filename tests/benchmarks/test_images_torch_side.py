"""The torchvision-style reference pipeline of benchmarks/images.py does the same work as ours."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from dataloader import kernels
from dataloader._images.samples import image_paths, sample_image_folder

torch = pytest.importorskip("torch")


def _load_script(name):
    """A benchmark script as a module, loaded from its file (benchmarks/ is no package)."""
    path = Path(__file__).parents[2] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_benchmark_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


images = _load_script("images")


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return sample_image_folder(6, tmp_path_factory.mktemp("torch") / "set", n_classes=2, seed=1)


@pytest.mark.parametrize("size", [(375, 500), (300, 400), (500, 120), (90, 600)])
def test_random_resized_crop_params_fit_the_image(size):
    torch.manual_seed(0)
    height, width = size
    for _ in range(200):
        top, left, h, w = images.random_resized_crop_params(height, width)
        assert 0 <= top and top + h <= height and 0 <= left and left + w <= width
        assert h > 0 and w > 0


def test_eval_item_is_resize_center_crop_normalize(root):
    dataset = images.PillowImageFolder(root, "eval")
    assert [label for _, label in dataset.samples] == [0, 0, 0, 1, 1, 1]
    tensor, label = dataset[4]
    assert tensor.shape == (3, 224, 224) and tensor.dtype == torch.float32
    path = sorted((root / "class_1").iterdir())[1]
    assert dataset.samples[4] == (path, label)
    pixels = kernels.decode(path.read_bytes(), mode="RGB")
    resized = kernels.resize(pixels, 256)
    top = round((resized.shape[0] - 224) / 2)
    left = round((resized.shape[1] - 224) / 2)
    expected = kernels.normalize(kernels.to_float(resized[top:top + 224, left:left + 224]),
                                 images.MEAN, images.STD)
    # libjpeg-turbo and Pillow decode alike; resizes are within 1 level of each other.
    np.testing.assert_allclose(tensor.permute(1, 2, 0).numpy(), expected, atol=1.01 / 255 / 0.224)


def test_train_items_are_random_crops_of_the_size(root):
    dataset = images.PillowImageFolder(root, "train")
    torch.manual_seed(0)
    first = [dataset[i][0] for i in range(len(dataset))]
    assert all(t.shape == (3, 224, 224) for t in first)
    torch.manual_seed(0)
    assert all(torch.equal(a, dataset[i][0]) for i, a in enumerate(first))
    assert len(image_paths(root)) == len(dataset)
