"""Every public docstring example runs and shows what it claims."""

import doctest
import importlib

import pytest

MODULES = [
    "dataloader",
    "dataloader._async",
    "dataloader._bench",
    "dataloader._cli",
    "dataloader._collate",
    "dataloader._dataset",
    "dataloader._dataset_utils",
    "dataloader._images",
    "dataloader._interleave",
    "dataloader._distributed",
    "dataloader._exif",
    "dataloader._loader",
    "dataloader._pack",
    "dataloader._sample_images",
    "dataloader._sampler",
    "dataloader._seeding",
    "dataloader._streaming",
    "dataloader._worker",
    "dataloader.transforms",
    "dataloader.sources",
    "dataloader.sources._file",
    "dataloader.sources._http",
    "dataloader.sources._object_store",
    "dataloader.sources._retry",
    "dataloader.sources._shards",
    "dataloader.sources._tar",
    "dataloader.sources._tar_dataset",
    "dataloader.sources._tar_writer",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    if name.endswith("_object_store"):
        pytest.importorskip("obstore")  # the s3 extra
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0


def test_every_public_name_has_an_example():
    import dataloader

    for name in dataloader.__all__:
        obj = getattr(dataloader, name)
        assert obj.__doc__ and ">>>" in obj.__doc__, f"{name} has no example"
