"""Shared fixtures: the execution modes every epoch-semantics test runs in."""

import pytest

from dataloader import DataLoader

# (num_workers, item_concurrency): the direct path first; every other mode
# must give the same batches in the same order.
MODES = [
    pytest.param((0, 1), id="direct"),
    pytest.param((0, 4), id="lanes"),
    pytest.param((2, 1), id="workers"),
    pytest.param((2, 4), id="workers+lanes"),
]


@pytest.fixture(params=MODES)
def mode(request):
    return request.param


@pytest.fixture
def make_loader(mode):
    """Build a DataLoader in the current execution mode."""
    num_workers, item_concurrency = mode

    def make(dataset, **kwargs):
        kwargs.setdefault("num_workers", num_workers)
        kwargs.setdefault("item_concurrency", item_concurrency)
        return DataLoader(dataset, **kwargs)

    return make
