"""The loader's plug-in points: the collate registry and the epoch protocols."""

import numpy as np
import pytest

from dataloader import DataLoader, default_collate
from dataloader._loading.collate import register_collate
from dataloader._loading.plugins import bind_epoch, item_source
from dataloader.kernels import Image, ImageBatch


class Point:
    def __init__(self, x):
        self.x = x


class LabelledPoint(Point):
    pass


def test_a_registered_type_and_its_subclasses_collate_with_its_function():
    register_collate(Point, lambda items: np.array([item.x for item in items]))
    assert default_collate([Point(1), Point(2)]).tolist() == [1, 2]
    assert default_collate([LabelledPoint(3), LabelledPoint(4)]).tolist() == [3, 4]
    # Inside containers too, as every other leaf.
    batch = default_collate([{"p": Point(5)}, {"p": Point(6)}])
    assert batch["p"].tolist() == [5, 6]


def test_registering_needs_a_type_and_a_callable():
    with pytest.raises(TypeError, match="item_type must be a type"):
        register_collate("Point", len)
    with pytest.raises(TypeError, match="collate must be callable"):
        register_collate(Point, 3)


def test_images_collate_into_one_pooled_image_batch():
    images = [Image.from_array(np.full((2, 3, 3), i, np.uint8)) for i in range(4)]
    batch = default_collate(images)
    assert isinstance(batch, ImageBatch)
    assert np.asarray(batch)[:, 0, 0, 0].tolist() == [0, 1, 2, 3]


def test_image_batches_stack_along_a_new_axis():
    images = [Image.from_array(np.full((2, 3, 3), i, np.uint8)) for i in range(2)]
    batches = [default_collate(images), default_collate(images[::-1])]
    stacked = default_collate(batches)
    assert stacked.shape == (2, 2, 3, 2, 3)
    assert stacked[:, :, 0, 0, 0].tolist() == [[0, 1], [1, 0]]


class EpochTagger:
    """A transform that the loader binds to each epoch."""

    def __init__(self):
        self.bound = []

    def __call__(self, item):  # never called: the bound transform is
        raise AssertionError("the loader called the unbound transform")

    def bind_epoch(self, seed, epoch):
        self.bound.append((seed, epoch))
        return lambda index, item: (epoch, index, item)


def test_the_loader_binds_an_epoch_bound_transform_once_per_epoch():
    tagger = EpochTagger()
    loader = DataLoader(["a", "b", "c"], batch_size=None, transform=tagger, seed=7)
    first, second = list(loader), list(loader)
    assert tagger.bound == [(7, 0), (7, 1)]
    assert [tuple(item) for item in first] == [(0, 0, "a"), (0, 1, "b"), (0, 2, "c")]
    assert [item[0] for item in second] == [1, 1, 1]


class Assembling:
    """A collate function that assembles batches while transforming."""

    def __init__(self):
        self.assemblers = 0

    def __call__(self, items):
        return ("collated", items)

    def assembler(self, item_transform):
        self.assemblers += 1
        def assemble(indices, items):
            pairs = zip(indices, items, strict=True)
            return ("assembled", [item_transform(index, item) for index, item in pairs])

        return assemble


@pytest.mark.parametrize("num_workers", [0, 2])
def test_an_assembling_collator_builds_the_batches_of_a_bound_transform(num_workers):
    collate = Assembling()
    loader = DataLoader([10, 20, 30, 40], batch_size=2, num_workers=num_workers,
                        transform=EpochTagger(), collate_fn=collate)
    assert list(loader) == [("assembled", [(0, 0, 10), (0, 1, 20)]),
                            ("assembled", [(0, 2, 30), (0, 3, 40)])]
    assert collate.assemblers == 1


def test_lanes_and_plain_transforms_get_no_assembler():
    collate = Assembling()
    tagger = EpochTagger()
    bound, assemble = bind_epoch(tagger, collate, seed=1, epoch=2, lanes=True)
    assert assemble is None and bound(5, "x") == (2, 5, "x")
    plain, assemble = bind_epoch(str.upper, collate, seed=1, epoch=2)
    assert plain is str.upper and assemble is None and collate.assemblers == 0


class Transforming:
    """A dataset applying its own transform, offering the items before it."""

    def __init__(self, transform):
        self.transform = transform
        self.getitem_calls = 0

    def __len__(self):
        return 3

    def raw_item(self, index):
        return f"raw {index}"

    def __getitem__(self, index):
        self.getitem_calls += 1
        return self.transform(self.raw_item(index))


@pytest.mark.parametrize("worker_type", ["thread", "process"])
def test_a_datasets_epoch_bound_transform_runs_in_the_loader(worker_type):
    dataset = Transforming(EpochTagger())
    loader = DataLoader(dataset, batch_size=None, seed=3, num_workers=2,
                        worker_type=worker_type)
    for epoch in range(2):
        assert [tuple(item) for item in loader] == [
            (epoch, index, f"raw {index}") for index in range(3)]
    assert dataset.getitem_calls == 0


def test_the_loaders_own_transform_leaves_the_dataset_to_apply_its_own():
    dataset = Transforming(lambda item: ("applied", item))
    loader = DataLoader(dataset, batch_size=None, transform=lambda index, item: (index, item))
    assert next(iter(loader)) == [0, ["applied", "raw 0"]]
    assert item_source(dataset, None) == (None, None)  # not epoch bound: __getitem__ fetches
    both = Transforming(EpochTagger())
    assert item_source(both, str.upper) == (None, str.upper)
    assert DataLoader(both, batch_size=None, transform=lambda index, item: item).dataset is both
