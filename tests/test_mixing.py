"""MixUp, CutMix and RandomChoice on collated batches: targets, boxes, seeds, checks."""

import numpy as np
import pytest

from dataloader import DataLoader, ImageCollator
from dataloader.transforms import Compose, CutMix, MixUp, RandomChoice, Resize, ToChw, ToFloat


def batch(n=6, c=3, h=12, w=16):
    """Image i filled with i + 1, so every pixel says which image it came from."""
    return np.broadcast_to(np.arange(1, n + 1, dtype=np.float32)[:, None, None, None],
                           (n, c, h, w)).copy()


def test_mixup_blends_each_image_with_the_previous_one_as_its_targets():
    images, labels = batch(), np.array([0, 1, 2, 3, 4, 0])
    mixed, targets = MixUp(alpha=0.4, num_classes=5)(images.copy(), labels, seed=7)
    np.testing.assert_allclose(targets.sum(axis=1), 1, rtol=1e-6)
    lam = float(targets[1, 1])  # image 1 keeps lam of itself, 1 - lam of image 0
    assert 0 <= lam <= 1
    expected = lam * images + (1 - lam) * np.roll(images, 1, axis=0)
    np.testing.assert_allclose(mixed, expected, rtol=1e-6)
    np.testing.assert_allclose(targets[0, 0], lam + (1 - lam) * 1.0)  # labels 0 and 0


def test_cutmix_pastes_one_box_of_the_previous_image_and_weighs_targets_by_area():
    for seed in range(20):
        images, labels = batch(), np.arange(6)
        mixed, targets = CutMix(alpha=1.0, num_classes=6)(images.copy(), labels, seed=seed)
        np.testing.assert_allclose(targets.sum(axis=1), 1, rtol=1e-6)
        pasted = mixed[1, 0] == 1  # image 1 holds image 0's pixels inside the box only
        area = pasted.sum()
        if area:
            rows, columns = np.nonzero(pasted)
            height, width = rows.max() - rows.min() + 1, columns.max() - columns.min() + 1
            assert height * width == area  # one rectangle
        np.testing.assert_allclose(targets[1, 0], area / (12 * 16), rtol=1e-6)
        np.testing.assert_allclose(targets[1, 1], 1 - area / (12 * 16), rtol=1e-6)
        assert ((mixed[0, 0] == 6) == pasted).all()  # the same box in every image


def test_cutmix_box_follows_torchvisions_rule():
    cut = CutMix(alpha=0.5, num_classes=2)
    for seed in range(50):
        rng = np.random.default_rng(seed)
        lam = float(rng.beta(0.5, 0.5))
        r_x, r_y = int(rng.integers(40)), int(rng.integers(30))
        half_w, half_h = int(0.5 * np.sqrt(1 - lam) * 40), int(0.5 * np.sqrt(1 - lam) * 30)
        expected = (max(r_x - half_w, 0), max(r_y - half_h, 0), min(r_x + half_w, 40),
                    min(r_y + half_h, 30))
        assert cut.box(30, 40, np.random.default_rng(seed)) == expected


def test_image_batches_torch_tensors_and_soft_labels():
    torch = pytest.importorskip("torch")
    images = torch.from_numpy(batch())
    mixed, targets = MixUp(num_classes=6)(images.clone(), torch.arange(6), seed=1)
    reference, expected = MixUp(num_classes=6)(batch(), np.arange(6), seed=1)
    np.testing.assert_allclose(mixed.numpy(), reference, rtol=1e-6)
    np.testing.assert_allclose(targets.numpy(), expected, rtol=1e-6)
    soft = np.full((6, 4), 0.25, np.float32)
    _, targets = CutMix()(batch(), soft, seed=2)
    np.testing.assert_allclose(targets, soft, rtol=1e-6)
    chain = Compose([Resize((8, 10)), ToFloat(), ToChw()])
    data = [(np.full((20, 20, 3), i * 20, np.uint8), i) for i in range(4)]
    loader = DataLoader(data, batch_size=4, transform=chain, collate_fn=ImageCollator(), seed=0)
    (images, labels), = list(loader)
    mixed, targets = CutMix(num_classes=4)(images, labels, seed=3)
    assert mixed is images and targets.shape == (4, 4)


def test_over_a_loader_seeds_each_batch_by_position_whatever_the_workers():
    data = [(np.full((3, 8, 8), i, np.float32), i % 3) for i in range(12)]
    mix = RandomChoice([MixUp(alpha=0.5, num_classes=3), CutMix(num_classes=3)])
    runs = []
    for workers in (0, 2):
        loader = DataLoader(data, batch_size=4, shuffle=True, seed=5, num_workers=workers)
        runs.append([[np.asarray(x).copy() for x in b] for b in mix.over(loader)])
        runs.append([[np.asarray(x).copy() for x in b] for b in mix.over(loader)])  # epoch 1
    for first, second in zip(runs[0] + runs[1], runs[2] + runs[3], strict=True):
        for a, b in zip(first, second, strict=True):
            np.testing.assert_array_equal(a, b)
    assert not np.array_equal(runs[0][0][1], runs[1][0][1])  # epochs differ


@pytest.mark.parametrize("make, error, match", [
    (lambda: MixUp(alpha=0), ValueError, "positive"),
    (lambda: CutMix(alpha=-1.0), ValueError, "positive"),
    (lambda: MixUp(alpha="1"), TypeError, "alpha"),
    (lambda: MixUp(num_classes=0), ValueError, "num_classes"),
    (lambda: RandomChoice(MixUp()), TypeError, "sequence"),
    (lambda: RandomChoice([MixUp(), len]), TypeError, "batch transforms"),
    (lambda: RandomChoice([MixUp(), CutMix()], p=[1.0]), ValueError, "Length of p"),
])
def test_arguments(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_batches_and_labels_are_checked():
    with pytest.raises(ValueError, match="4 dims"):
        MixUp(num_classes=2)(np.zeros((2, 3, 4), np.float32), np.array([0, 1]), seed=0)
    with pytest.raises(ValueError, match="batch size"):
        CutMix(num_classes=2)(batch(3), np.array([0, 1]), seed=0)
    with pytest.raises(ValueError, match="num_classes"):
        MixUp()(batch(2), np.array([0, 1]), seed=0)
    with pytest.raises(ValueError, match=r"\[0, 2\)"):
        MixUp(num_classes=2)(batch(2), np.array([0, 2]), seed=0)
    with pytest.raises(TypeError, match="float"):
        MixUp(num_classes=2)(np.zeros((2, 3, 4, 4), np.uint8), np.array([0, 1]), seed=0)
