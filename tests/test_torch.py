"""``dataloader.torch``: torch's batches and torch's randomness, compared with torch itself."""

import collections
import random

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tud = pytest.importorskip("torch.utils.data")

import dataloader  # noqa: E402
import dataloader.torch as dt  # noqa: E402

Pair = collections.namedtuple("Pair", "image label")

# Item structures a training script returns; each is a function of the index.
STRUCTURES = {
    "tensor-int": lambda i: (torch.full((3,), float(i)), i),
    "label-first-dict": lambda i: {"label": i, "name": f"x{i}",
                                   "image": np.full((4, 4, 3), i % 256, np.uint8)},
    "numpy-scalars": lambda i: (np.float64(i) / 2, np.int32(i), np.bool_(i % 2)),
    "python-numbers": lambda i: [i, i / 3, bool(i % 2)],
    "mixed-int-float": lambda i: [i if i % 2 else i + 0.5],
    "namedtuple": lambda i: Pair(np.arange(i, i + 4, dtype=np.float32), i),
    "nested": lambda i: {"a": {"b": (torch.tensor(i), np.array([i, i]))}, "s": b"x"},
}


class Items:
    def __init__(self, make, n=24):
        self.make, self.n = make, n

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        return self.make(index)


def assert_same(ours, theirs, where="batch"):
    assert type(ours) is type(theirs), (where, type(ours), type(theirs))
    if isinstance(theirs, torch.Tensor):
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, where
        assert torch.equal(ours, theirs), where
    elif isinstance(theirs, dict):
        assert list(ours) == list(theirs), where
        for key in theirs:
            assert_same(ours[key], theirs[key], f"{where}[{key!r}]")
    elif isinstance(theirs, (list, tuple)):
        assert len(ours) == len(theirs), where
        for position, (mine, other) in enumerate(zip(ours, theirs, strict=True)):
            assert_same(mine, other, f"{where}[{position}]")
    else:
        assert ours == theirs, where


WORKERS = [
    pytest.param({"num_workers": 0}, id="direct"),
    pytest.param({"num_workers": 2, "worker_type": "thread"}, id="threads"),
    pytest.param({"num_workers": 2, "worker_type": "process"}, id="processes"),
]


@pytest.mark.parametrize("workers", WORKERS)
@pytest.mark.parametrize("structure", sorted(STRUCTURES))
def test_batches_are_torchs_batch_by_batch(structure, workers):
    dataset = Items(STRUCTURES[structure])
    with dt.DataLoader(dataset, batch_size=5, timeout=60, **workers) as ours:
        for epoch in range(2):  # each batch dropped before the next: slots are reused
            theirs = iter(tud.DataLoader(dataset, batch_size=5))
            for position, batch in enumerate(ours):
                assert_same(batch, next(theirs), f"epoch {epoch} batch {position}")
                del batch


@pytest.mark.parametrize("structure", sorted(STRUCTURES))
def test_default_collate_and_convert_are_torchs(structure):
    items = [STRUCTURES[structure](i) for i in range(4)]
    assert_same(dt.default_collate(items), tud.default_collate(items))
    for item in items:
        assert_same(dt.default_convert(item), tud.default_convert(item))


def test_a_memmap_collates_like_an_array(tmp_path):
    array = np.lib.format.open_memmap(tmp_path / "rows.npy", mode="w+", dtype=np.float32,
                                      shape=(4, 3))
    array[:] = np.arange(12).reshape(4, 3)
    assert_same(dt.default_collate(list(array)), tud.default_collate(list(array)))


def test_numpy_batches_stay_the_default_without_the_torch_namespace():
    batch = next(iter(dataloader.DataLoader(Items(STRUCTURES["tensor-int"]), batch_size=3)))
    assert isinstance(batch[0], torch.Tensor) and isinstance(batch[1], np.ndarray)


def orders(loader, epochs=2):
    return [[batch.tolist() for batch in loader] for _ in range(epochs)]


def test_torch_manual_seed_gives_torchs_shuffled_orders_epoch_after_epoch():
    torch.manual_seed(3)
    theirs = orders(tud.DataLoader(range(50), batch_size=8, shuffle=True))
    torch.manual_seed(3)
    ours = orders(dt.DataLoader(range(50), batch_size=8, shuffle=True))
    assert ours == theirs
    torch.manual_seed(3)
    again = orders(dt.DataLoader(range(50), batch_size=8, shuffle=True))
    assert again == ours and ours[0] != ours[1]


@pytest.mark.parametrize("namespace", [dataloader, dt], ids=["dataloader", "torch"])
def test_a_torch_generator_gives_torchs_sampler_orders(namespace):
    weights = [0.1, 0.9, 0.4, 0.7, 3.0, 0.6]
    samplers = [
        ("RandomSampler", lambda ns, g: ns.RandomSampler(range(40), generator=g)),
        ("RandomSampler", lambda ns, g: ns.RandomSampler(range(40), num_samples=90,
                                                         generator=g)),
        ("RandomSampler", lambda ns, g: ns.RandomSampler(range(40), replacement=True,
                                                         num_samples=70, generator=g)),
        ("SubsetRandomSampler", lambda ns, g: ns.SubsetRandomSampler([5, 9, 2, 7], g)),
        ("WeightedRandomSampler", lambda ns, g: ns.WeightedRandomSampler(weights, 5, True, g)),
        ("WeightedRandomSampler", lambda ns, g: ns.WeightedRandomSampler(weights, 4, False, g)),
    ]
    for name, make in samplers:
        ours = make(namespace, torch.Generator().manual_seed(42))
        theirs = make(tud, torch.Generator().manual_seed(42))
        # Two epochs: the generator is left in torch's state after each.
        assert list(ours) + list(ours) == list(theirs) + list(theirs), name


def test_samplers_without_a_generator_draw_from_torchs_default_one():
    for make in (lambda ns: ns.RandomSampler(range(30)),
                 lambda ns: ns.SubsetRandomSampler(range(30)),
                 lambda ns: ns.WeightedRandomSampler([1.0, 2.0, 3.0], 9)):
        torch.manual_seed(11)
        theirs = list(make(tud))
        torch.manual_seed(11)
        assert list(make(dt)) == theirs


def test_a_generator_without_shuffle_fixes_the_worker_seeds():
    def worker_seeds(namespace):
        loader = namespace.DataLoader(Items(lambda i: torch.initial_seed()), batch_size=2,
                                      num_workers=2, worker_type="process",
                                      generator=torch.Generator().manual_seed(5))
        return sorted({int(seed) for batch in loader for seed in batch})

    for namespace in (dataloader, dt):
        assert worker_seeds(namespace) == worker_seeds(namespace)
        assert len(worker_seeds(namespace)) == 2


def seed_in_init(worker_id):
    torch.manual_seed(12345)
    random.seed(12345)


class Seeds:
    """Each item: the worker's torch seed, WorkerInfo.seed and its method."""

    def __len__(self):
        return 8

    def __getitem__(self, index):
        info = dataloader.get_worker_info()
        return torch.initial_seed(), info.seed, info.worker_method == "multiprocessing"


@pytest.mark.parametrize("namespace", [dataloader, dt], ids=["dataloader", "torch"])
def test_worker_seeding_comes_before_worker_init_fn(namespace):
    loader = namespace.DataLoader(Seeds(), batch_size=2, num_workers=2, worker_type="process",
                                  worker_init_fn=seed_in_init, timeout=60)
    for torch_seed, _, in_process in loader:
        assert torch_seed.tolist() == [12345, 12345] and in_process.all()


@pytest.mark.parametrize("namespace", [dataloader, dt], ids=["dataloader", "torch"])
@pytest.mark.parametrize("persistent", [False, True], ids=["per-epoch", "persistent"])
def test_worker_info_seed_is_torchs_initial_seed_and_fits_int64(namespace, persistent):
    loader = namespace.DataLoader(Seeds(), batch_size=2, num_workers=2, worker_type="process",
                                  persistent_workers=persistent, timeout=60)
    seen = []
    for _ in range(3):
        seeds = set()
        for torch_seed, info_seed, _ in loader:
            assert torch.equal(torch.as_tensor(torch_seed), torch.as_tensor(info_seed))
            seeds.update(info_seed.tolist())
        assert len(seeds) == 2 and max(seeds) < 2**63
        seen.append(seeds)
    # Epochs get new seeds, except torch's persistent workers, which go on.
    fresh = not (persistent and namespace is dt)
    assert (seen[0] != seen[1] != seen[2]) if fresh else (seen[0] == seen[1] == seen[2])


def test_a_seed_makes_the_torch_namespace_resumable_twice():
    def loader():
        return dt.DataLoader(range(40), batch_size=4, shuffle=True, seed=9, num_workers=2,
                             worker_type="thread")

    whole = [batch.tolist() for batch in loader()]
    state = None
    taken = []
    for stop in (3, 6):  # interrupted twice, each time resumed by a new loader
        resumed = loader()
        if state is not None:
            resumed.load_state_dict(state)
        for batch in resumed:
            taken.append(batch.tolist())
            if len(taken) == stop:
                state = resumed.state_dict()
                break
    resumed = loader()
    resumed.load_state_dict(state)
    taken += [batch.tolist() for batch in resumed]
    assert taken == whole


class InTorchWorker:
    def __len__(self):
        return 4

    def __getitem__(self, index):
        return np.zeros(2), torch.zeros(2)


def collate_reports_sharing(items):
    images, tensors = dt.default_collate(items)
    return torch.tensor([images.is_shared(), tensors.is_shared()])


def test_collated_in_torchs_own_worker_processes_batches_are_in_shared_memory():
    loader = tud.DataLoader(InTorchWorker(), batch_size=2, num_workers=1,
                            collate_fn=collate_reports_sharing)
    assert all(batch.all() for batch in loader)
    assert not collate_reports_sharing([(np.zeros(2), torch.zeros(2))]).any()
