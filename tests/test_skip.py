"""on_error="skip": failing items are dropped and counted, in every mode."""

import numpy as np
import pytest

from dataloader import DataLoader


class Flaky:
    """Items 0..n-1: fetching fails for ``bad_fetch``, ``transform`` for ``bad_transform``."""

    def __init__(self, n, bad_fetch=(), bad_transform=()):
        self.n = n
        self.bad_fetch = set(bad_fetch)
        self.bad_transform = set(bad_transform)

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        if index in self.bad_fetch:
            raise KeyError(index)
        return index

    def transform(self, index, item):
        if index in self.bad_transform:
            raise ValueError(f"cannot transform {index}")
        return item * 10


def expected_batches(n, batch_size, bad):
    batches = [[i * 10 for i in range(s, min(s + batch_size, n)) if i not in bad]
               for s in range(0, n, batch_size)]
    return [batch for batch in batches if batch]


def test_skip_drops_failing_items(make_loader):
    data = Flaky(23, bad_fetch={3, 8, 9, 10, 11}, bad_transform={17, 22})
    loader = make_loader(data, batch_size=4, transform=data.transform, on_error="skip")
    for _ in range(2):
        got = [batch.tolist() for batch in loader]
        assert got == expected_batches(23, 4, {3, 8, 9, 10, 11, 17, 22})
    assert loader.stats()["skipped"]["count"] == 14


def test_skip_getitems_falls_back_to_single_items(make_loader):
    class Batched(Flaky):
        def __getitems__(self, indices):
            return [self[i] for i in indices]

    data = Batched(10, bad_fetch={1, 6})
    loader = make_loader(data, batch_size=3, on_error="skip")
    assert [batch.tolist() for batch in loader] == [[0, 2], [3, 4, 5], [7, 8], [9]]


def test_skip_without_batching(make_loader):
    data = Flaky(6, bad_fetch={0, 4})
    loader = make_loader(data, batch_size=None, on_error="skip")
    assert [int(item) for item in loader] == [1, 2, 3, 5]


def run_epoch(loader):
    """The batches an epoch delivers and the errors it raises."""
    delivered, errors = [], []
    it = iter(loader)
    while True:
        try:
            delivered.append(next(it).tolist())
        except StopIteration:
            return delivered, errors
        except KeyError as error:
            errors.append(error)


def test_max_skipped_int_raises_the_error_beyond_it(make_loader):
    data = Flaky(12, bad_fetch={1, 5, 9})
    loader = make_loader(data, batch_size=4, on_error="skip", max_skipped=2)
    # Each epoch has its own budget.
    for _ in range(2):
        delivered, errors = run_epoch(loader)
        # Which failing item exceeds the budget depends on the order items
        # fail in (with workers, not always sampler order).
        assert len(errors) == 1 and errors[0].args[0] in {1, 5, 9}
        assert any("max_skipped=2" in note for note in errors[0].__notes__)
        expected = [[0, 2, 3], [4, 6, 7], [8, 10, 11]]
        del expected[[1, 5, 9].index(errors[0].args[0])]
        assert delivered == expected
        if loader.num_workers == 0 and loader.item_concurrency == 1:
            assert errors[0].args == (9,)


def test_max_skipped_fraction_of_the_epoch(make_loader):
    data = Flaky(20, bad_fetch={2, 12})
    assert len(list(make_loader(data, batch_size=5, on_error="skip", max_skipped=0.1))) == 4
    with pytest.raises(KeyError):
        list(make_loader(data, batch_size=5, on_error="skip", max_skipped=0.05))


def test_max_skipped_fraction_rounds_down(make_loader):
    # 0.12 of 20 items is 2.4: two failing items are allowed, a third raises.
    assert len(list(make_loader(Flaky(20, bad_fetch={2, 12}), batch_size=5,
                                on_error="skip", max_skipped=0.12))) == 4
    with pytest.raises(KeyError) as raised:
        list(make_loader(Flaky(20, bad_fetch={2, 7, 12}), batch_size=5,
                         on_error="skip", max_skipped=0.12))
    assert any("max_skipped=0.12 of 20 items" in note for note in raised.value.__notes__)


@pytest.mark.parametrize("max_skipped", [0, 0.0])
def test_max_skipped_zero_skips_nothing(make_loader, max_skipped):
    loader = make_loader(Flaky(6, bad_fetch={4}), batch_size=2, on_error="skip",
                         max_skipped=max_skipped)
    with pytest.raises(KeyError):
        list(loader)


def test_max_skipped_one_may_skip_every_item(make_loader):
    loader = make_loader(Flaky(4, bad_fetch={0, 1, 2, 3}), batch_size=2, on_error="skip",
                         max_skipped=1.0)
    assert list(loader) == []
    assert loader.stats()["skipped"]["count"] == 4


def test_raise_is_the_default(make_loader):
    loader = make_loader(Flaky(4, bad_fetch={1}), batch_size=2)
    it = iter(loader)
    with pytest.raises(KeyError):
        next(it)
    assert next(it).tolist() == [2, 3]


def test_collate_errors_are_not_skipped(make_loader):
    def collate(items):
        raise RuntimeError("collate")

    loader = make_loader(Flaky(4), batch_size=2, collate_fn=collate, on_error="skip")
    with pytest.raises(RuntimeError, match="collate"):
        next(iter(loader))


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"on_error": "ignore"}, "on_error"),
        ({"on_error": None}, "on_error"),
        ({"on_error": "skip", "max_skipped": -1}, "max_skipped"),
        ({"on_error": "skip", "max_skipped": 1.5}, "max_skipped"),
        ({"on_error": "skip", "max_skipped": float("nan")}, "max_skipped"),
        ({"on_error": "skip", "max_skipped": True}, "max_skipped"),
        ({"on_error": "skip", "max_skipped": "3"}, "max_skipped"),
        ({"max_skipped": 3}, "max_skipped"),
    ],
)
def test_skip_arguments_are_validated(kwargs, name):
    with pytest.raises(ValueError, match=name):
        DataLoader(list(range(4)), **kwargs)


def test_skip_rejects_streams():
    class Stream:
        def __iter__(self):
            return iter(range(3))

    with pytest.raises(ValueError, match="on_error"):
        DataLoader(Stream(), on_error="skip")


def test_skipped_items_in_stats():
    data = Flaky(5, bad_fetch={0})
    loader = DataLoader(data, batch_size=5, on_error="skip")
    batch, = list(loader)
    np.testing.assert_array_equal(batch, [1, 2, 3, 4])
    figures = loader.stats()
    assert figures["skipped"]["count"] == 1
    assert figures["fetch"]["count"] == 4
