"""Images in the loader: ImageCollator, pooled batches, ImageFolder, native chains per item."""

import gc
import os
import threading

import numpy as np
import pytest
from conftest import encode, natural_image

from dataloader import (
    DataLoader,
    Dataset,
    ImageCollator,
    ImageFolder,
    Subset,
    default_collate,
    item_seed,
    kernels,
    random_split,
)
from dataloader._loading.plugins import item_source
from dataloader.kernels import Image, ImageBatch
from dataloader.transforms import (
    CenterCrop,
    Compose,
    Decode,
    Normalize,
    RandomHFlip,
    RandomResizedCrop,
    Resize,
    ToChw,
    ToFloat,
)

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
TRAIN = Compose([Decode("RGB"), RandomResizedCrop(32), RandomHFlip(), ToFloat(),
                 Normalize(MEAN, STD), ToChw()])


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """An image folder of 2 classes: JPEGs of varied sizes, one PNG."""
    root = tmp_path_factory.mktemp("images")
    for label in ("cat", "dog"):
        (root / label).mkdir()
        for i in range(9):
            image = natural_image(40 + 7 * i, 60 - 3 * i, seed=i + (label == "dog") * 100)
            (root / label / f"{i}.jpg").write_bytes(encode(image, "JPEG", quality=90))
    (root / "dog" / "extra.png").write_bytes(encode(natural_image(50, 50, seed=7), "PNG"))
    (root / "dog" / "notes.txt").write_text("not an image")
    return root


def images(n, shape=(4, 5, 3), dtype=np.uint8):
    return [Image.from_array(np.full(shape, i, dtype)) for i in range(n)]


def test_image_collator_stacks_into_one_batch():
    batch = ImageCollator()(images(3))
    assert isinstance(batch, ImageBatch)
    assert batch.shape == (3, 3, 4, 5) and batch.layout == "NCHW"
    np.testing.assert_array_equal(np.asarray(batch)[:, 0, 0, 0], [0, 1, 2])


def test_image_collator_nhwc_and_float32():
    batch = ImageCollator(layout="NHWC", dtype="float32")(images(2))
    assert batch.shape == (2, 4, 5, 3) and batch.dtype == np.float32
    np.testing.assert_allclose(np.asarray(batch)[1], 1 / 255)


def test_image_collator_with_labels_and_arrays():
    items = [(np.full((2, 2, 1), i, np.uint8), i, f"name{i}") for i in range(3)]
    batch, labels, names = ImageCollator()(items)
    assert batch.shape == (3, 1, 2, 2)
    assert labels.tolist() == [0, 1, 2] and names == ["name0", "name1", "name2"]


def test_image_collator_names_the_first_item_that_differs():
    items = images(2) + [Image.from_array(np.zeros((4, 6, 3), np.uint8))]
    with pytest.raises(ValueError,
                       match=r"item 2 .* shape \(H, W, C\) \(4, 6, 3\), item 0 .*\(4, 5, 3\)"):
        ImageCollator()(items)
    with pytest.raises(ValueError, match="item 1 is str"):
        ImageCollator()([images(1)[0], "x"])


def test_default_collate_recognises_images():
    batch = default_collate(images(2))
    assert isinstance(batch, ImageBatch) and batch.shape == (2, 3, 4, 5)
    batch, labels = default_collate([(image, i) for i, image in enumerate(images(2))])
    assert isinstance(batch, ImageBatch) and labels.tolist() == [0, 1]


def test_batch_memory_returns_to_the_pool_and_is_reused():
    collator = ImageCollator()
    first = collator(images(4))
    address = first.__array_interface__["data"][0]
    view = np.asarray(first)
    del first
    gc.collect()
    assert collator.pool.idle == 0  # a view still holds the batch
    del view
    assert collator.pool.idle == 1
    second = collator(images(4))
    assert second.__array_interface__["data"][0] == address
    assert collator.pool.idle == 0


def test_a_kept_batch_is_never_overwritten():
    collator = ImageCollator()
    kept = collator(images(4))
    snapshot = np.asarray(kept).copy()
    for _ in range(5):
        collator([Image.from_array(np.full((4, 5, 3), 200, np.uint8))] * 4)
    np.testing.assert_array_equal(np.asarray(kept), snapshot)


def test_image_folder(folder):
    dataset = ImageFolder(folder)
    assert dataset.classes == ["cat", "dog"]
    assert dataset.class_to_idx == {"cat": 0, "dog": 1}
    assert len(dataset) == 19
    data, label = dataset[18]
    assert label == 1 and data == (folder / "dog" / "extra.png").read_bytes()
    assert dataset.targets.count(0) == 9
    decoded = ImageFolder(folder, transform=Decode())[0][0]
    assert isinstance(decoded, Image)


def test_image_folder_gives_a_python_transform_what_torchvision_gives_it(folder):
    # A torchvision-style pipeline written on PIL images: RGB images in, as
    # torchvision's default_loader opens them; target_transform on the labels.
    from PIL import Image as PILImage

    def to_array(image):
        assert isinstance(image, PILImage.Image) and image.mode == "RGB"
        return np.asarray(image.resize((8, 8)), np.float32) / 255

    dataset = ImageFolder(folder, transform=to_array, target_transform=lambda label: label * 10)
    loader = DataLoader(dataset, batch_size=5, num_workers=2, worker_type="thread")
    got = [(np.asarray(x), y.tolist()) for x, y in loader]
    expected = []
    for start in range(0, len(dataset), 5):
        samples = dataset.samples[start:start + 5]
        expected.append((np.stack([to_array(PILImage.open(path).convert("RGB"))
                                   for path, _ in samples]),
                         [label * 10 for _, label in samples]))
    assert len(got) == len(expected) == 4
    for (x, y), (want_x, want_y) in zip(got, expected, strict=True):
        np.testing.assert_array_equal(x, want_x)
        assert y == want_y
    custom = ImageFolder(folder, transform=len, loader=lambda path: path)
    assert custom[0][0] == len(custom.samples[0][0])


def test_image_folder_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="image folder not found"):
        ImageFolder(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="no class subfolders"):
        ImageFolder(tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no images"):
        ImageFolder(tmp_path)


def reference_epoch(loader, chain):
    """The loader's epoch rebuilt item by item: the same chain and per-item seeds."""
    dataset = loader.dataset
    batches = []
    for indices in loader.batch_sampler:
        items = [chain(dataset[i][0], seed=item_seed(loader.seed, loader.epoch, i))
                 for i in indices]
        batches.append((np.stack([np.asarray(x) for x in items]), [dataset[i][1] for i in indices]))
    return batches


@pytest.mark.parametrize("mode", [(0, 1), (2, 1), (2, 4)], ids=["direct", "workers", "lanes"])
def test_an_epoch_equals_the_chain_applied_item_by_item(folder, mode):
    num_workers, lanes = mode
    loader = DataLoader(ImageFolder(folder), batch_size=4, shuffle=True, seed=11,
                        num_workers=num_workers, item_concurrency=lanes, transform=TRAIN,
                        collate_fn=ImageCollator())
    epoch = [(np.asarray(batch).copy(), labels.tolist()) for batch, labels in loader]
    expected = reference_epoch(loader, TRAIN)
    assert len(epoch) == len(expected) == 5
    for (batch, labels), (reference, reference_labels) in zip(epoch, expected, strict=True):
        assert batch.dtype == np.float32 and batch.shape[1:] == (3, 32, 32)
        np.testing.assert_array_equal(batch, reference)
        assert labels == reference_labels
    loader.close()


class MeetingFirstItems(Dataset):
    """A folder whose first two items wait for each other: they must load at once."""

    def __init__(self, root):
        self.folder = ImageFolder(root)
        self.barrier = threading.Barrier(2, timeout=20)

    def __len__(self):
        return len(self.folder)

    def __getitem__(self, index):
        if index < 2:
            self.barrier.wait()  # breaks, failing the batch, unless both run at once
        return self.folder[index]


def test_an_epochs_first_batch_of_images_is_loaded_by_every_worker(folder):
    """Written straight into its slots by the collator, the first batch is still shared
    out item by item among the worker threads, and is the same batch."""
    dataset = MeetingFirstItems(folder)

    def loader(dataset, num_workers):
        return DataLoader(dataset, batch_size=4, seed=5, num_workers=num_workers,
                          worker_type="thread", transform=TRAIN, collate_fn=ImageCollator())

    threads, direct = loader(dataset, 2), loader(ImageFolder(folder), 0)
    for epoch in range(2):  # every epoch's first batch, on the same workers
        batches = [(np.asarray(batch).copy(), labels.tolist()) for batch, labels in threads]
        expected = [(np.asarray(batch).copy(), labels.tolist()) for batch, labels in direct]
        assert len(batches) == len(expected) == 5, epoch
        for (batch, labels), (reference, reference_labels) in zip(batches, expected,
                                                                  strict=True):
            np.testing.assert_array_equal(batch, reference)
            assert labels == reference_labels
        dataset.barrier.reset()
    threads.close()
    direct.close()


def test_a_deterministic_chain_equals_the_kernels(folder):
    chain = Compose([Decode("RGB", exact=True), Resize(36), CenterCrop(32), ToFloat(),
                     Normalize(MEAN, STD), ToChw()])
    loader = DataLoader(ImageFolder(folder), batch_size=19, transform=chain,
                        collate_fn=ImageCollator())
    batch, _ = next(iter(loader))
    for position, (data, _) in enumerate(ImageFolder(folder)):
        image = kernels.resize(kernels.decode(data, mode="RGB"), 36)
        h, w = image.shape[:2]
        top, left = round((h - 32) / 2), round((w - 32) / 2)
        window = image[top:top + 32, left:left + 32]
        expected = kernels.normalize(kernels.to_float(window), MEAN, STD)
        np.testing.assert_array_equal(np.asarray(batch)[position], expected.transpose(2, 0, 1))


def folder_epochs(loader, n=2):
    return [[(np.asarray(batch).copy(), labels.tolist()) for batch, labels in loader]
            for _ in range(n)]


@pytest.mark.parametrize("collate", ["images", "default"])
@pytest.mark.parametrize("workers", [(0, "thread", 1), (2, "thread", 1), (2, "thread", 3),
                                     (2, "process", 1)],
                         ids=["direct", "threads", "lanes", "processes"])
def test_a_folders_own_chain_gives_the_loaders_batches(folder, collate, workers):
    num_workers, worker_type, lanes = workers

    def loader(dataset, transform=None):
        return DataLoader(dataset, batch_size=4, shuffle=True, seed=23, transform=transform,
                          num_workers=num_workers, worker_type=worker_type,
                          item_concurrency=lanes,
                          collate_fn=ImageCollator() if collate == "images" else None)

    own, given = loader(ImageFolder(folder, transform=TRAIN)), loader(ImageFolder(folder), TRAIN)
    own_epochs, given_epochs = folder_epochs(own), folder_epochs(given)
    for own_epoch, given_epoch in zip(own_epochs, given_epochs, strict=True):
        for (batch, labels), (expected, expected_labels) in zip(own_epoch, given_epoch,
                                                                strict=True):
            np.testing.assert_array_equal(batch, expected)
            assert batch.dtype == np.float32 and labels == expected_labels
    # Seeded per epoch: the second epoch draws other crops.
    first = np.concatenate([batch for batch, _ in own_epochs[0]])
    assert not np.array_equal(first, np.concatenate([batch for batch, _ in own_epochs[1]]))
    own.close()
    given.close()


def test_a_folders_own_chain_needs_no_shuffle_for_a_seed(folder):
    loader = DataLoader(ImageFolder(folder, transform=TRAIN), batch_size=19, seed=4)
    batch, _ = next(iter(loader))
    expected = reference_epoch(DataLoader(ImageFolder(folder), batch_size=19, seed=4,
                                          transform=TRAIN), TRAIN)[0][0]
    np.testing.assert_array_equal(np.asarray(batch), expected)


@pytest.mark.parametrize("split", ["subset", "random_split", "nested"])
@pytest.mark.parametrize("workers", [(0, "thread"), (2, "thread"), (2, "process")],
                         ids=["direct", "threads", "processes"])
def test_a_subset_of_a_folder_keeps_its_chain_on_the_fast_path(folder, split, workers):
    def part(dataset):
        if split == "subset":
            return Subset(dataset, [5, 0, 17, 3, 3, 12, 9, 1, 14])
        halves = random_split(dataset, [0.5, 0.5], generator=7)
        return halves[1] if split == "random_split" else Subset(halves[0], [4, 2, 0, 1, 3])

    fast = DataLoader(part(ImageFolder(folder, transform=TRAIN)), batch_size=3, shuffle=True,
                      seed=9, num_workers=workers[0], worker_type=workers[1],
                      collate_fn=ImageCollator())
    assert item_source(fast.dataset, None)[1] is TRAIN
    plain = part(ImageFolder(folder))   # the same items before the chain
    first = None
    for _ in range(2):
        epoch = [(np.asarray(batch).copy(), labels.tolist()) for batch, labels in fast]
        # The chain applied item by item with the loader's per-item seeds.
        expected = [(np.stack([np.asarray(TRAIN(plain[i][0], seed=item_seed(9, fast.epoch, i)))
                               for i in indices]), [plain[i][1] for i in indices])
                    for indices in fast.batch_sampler]
        assert len(epoch) == len(expected) > 1
        for (batch, labels), (reference, reference_labels) in zip(epoch, expected, strict=True):
            np.testing.assert_array_equal(batch, reference)
            assert labels == reference_labels
        if first is None:
            first = epoch[0][0]
        else:
            assert not np.array_equal(first, epoch[0][0])   # seeded per epoch
    fast.close()


def test_a_subset_that_fetches_its_own_way_is_not_taken_for_its_dataset(folder):
    class Renamed(Subset):
        def __getitem__(self, index):
            return "own", self.dataset[self.indices[index]][1]

        def __getitems__(self, indices):
            return [self[index] for index in indices]

    dataset = ImageFolder(folder, transform=TRAIN)
    assert item_source(Renamed(dataset, [0, 1]), None) == (None, None)
    with_own = Subset(dataset, [0, 1])
    with_own.transform = None
    assert item_source(with_own, None) == (None, None)
    assert item_source(Subset(ImageFolder(folder), [0]), None) == (None, None)
    assert not hasattr(Subset(list("ab"), [0]), "raw_item")


def epochs_of(folder, mode, n=2, seed=5):
    num_workers, lanes = mode
    loader = DataLoader(ImageFolder(folder), batch_size=5, shuffle=True, seed=seed,
                        num_workers=num_workers, item_concurrency=lanes, transform=TRAIN,
                        collate_fn=ImageCollator())
    result = [[np.asarray(batch).copy() for batch, _ in loader] for _ in range(n)]
    loader.close()
    return result


def test_the_same_seed_gives_the_same_batches_in_every_mode(folder):
    direct = epochs_of(folder, (0, 1))
    for mode in [(2, 1), (2, 4)]:
        other = epochs_of(folder, mode)
        for epoch_a, epoch_b in zip(direct, other, strict=True):
            for a, b in zip(epoch_a, epoch_b, strict=True):
                np.testing.assert_array_equal(a, b)
    assert not np.array_equal(np.concatenate(direct[0]), np.concatenate(direct[1]))
    other_seed = epochs_of(folder, (0, 1), 1, 6)[0]
    assert not np.array_equal(np.concatenate(direct[0]), np.concatenate(other_seed))


def test_a_broken_image_fails_its_own_batch(folder, tmp_path):
    root = tmp_path / "broken"
    (root / "a").mkdir(parents=True)
    for i in range(4):
        data = (folder / "cat" / f"{i}.jpg").read_bytes()
        (root / "a" / f"{i}.jpg").write_bytes(data[: len(data) // 3] if i == 2 else data)
    loader = DataLoader(ImageFolder(root), batch_size=2, num_workers=2, transform=TRAIN,
                        collate_fn=ImageCollator())
    it = iter(loader)
    assert next(it)[0].shape == (2, 3, 32, 32)
    with pytest.raises(ValueError, match="cannot decode"):
        next(it)
    loader.close()


def resident_bytes():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_steady_epochs_allocate_no_new_batch_memory(folder):
    collator = ImageCollator()
    loader = DataLoader(ImageFolder(folder), batch_size=4, num_workers=2, transform=TRAIN,
                        collate_fn=collator, shuffle=True, seed=0)
    for _ in range(3):
        for batch, _ in loader:  # noqa: B007 -- the last batch is dropped after the loop
            pass
    del batch
    rss = resident_bytes()
    addresses = set()
    for _ in range(10):
        for batch, _ in loader:
            addresses.add(batch.__array_interface__["data"][0])
        del batch
    assert resident_bytes() - rss < 8 * 2**20
    # Batches cycle through a handful of pooled buffers instead of new memory.
    assert len(addresses) <= collator.pool.capacity + 4
    loader.close()


def test_batches_reach_torch_without_a_copy(folder):
    torch = pytest.importorskip("torch")
    loader = DataLoader(ImageFolder(folder), batch_size=4, transform=TRAIN,
                        collate_fn=ImageCollator())
    batch, _labels = next(iter(loader))
    tensor = torch.from_dlpack(batch)
    assert tensor.shape == (4, 3, 32, 32) and tensor.dtype == torch.float32
    assert tensor.data_ptr() == batch.__array_interface__["data"][0]


def test_a_python_transform_still_gets_index_and_item(folder):
    def transform(index, item):
        data, label = item
        return kernels.decode(data, mode="L").shape[2], index, label

    loader = DataLoader(ImageFolder(folder), batch_size=None, transform=transform)
    assert next(iter(loader)) == [1, 0, 0]  # default_convert: tuples become lists, as in torch


def test_a_streaming_dataset_runs_native_transforms(folder):
    from dataloader import IterableDataset

    class Stream(IterableDataset):
        def __iter__(self):
            return iter(ImageFolder(folder))

    loader = DataLoader(Stream(), batch_size=4, transform=TRAIN, collate_fn=ImageCollator(),
                        seed=3)
    batch, labels = next(iter(loader))
    assert batch.shape == (4, 3, 32, 32) and labels.tolist() == [0, 0, 0, 0]


class BrokenFirstItems(Dataset):
    """Item 0 is not an image (its decode fails), item 1's fetch fails."""

    def __init__(self, root):
        self.folder = ImageFolder(root)

    def __len__(self):
        return 8

    def __getitem__(self, index):
        if index == 1:
            raise KeyError("fetch of 1")
        data, label = self.folder[index]
        return (b"not an image" if index == 0 else data), label


@pytest.mark.parametrize("num_workers", [0, 2], ids=["direct", "threads"])
def test_a_batch_written_into_its_slots_raises_its_lowest_failing_items_error(folder,
                                                                              num_workers):
    loader = DataLoader(BrokenFirstItems(folder), batch_size=4, num_workers=num_workers,
                        worker_type="thread", transform=TRAIN, collate_fn=ImageCollator())
    it = iter(loader)
    with pytest.raises(ValueError, match="cannot decode image"):
        next(it)
    batch, labels = next(it)
    assert batch.shape == (4, 3, 32, 32) and len(labels) == 4
    loader.close()
