"""Every public docstring example runs and shows what it claims."""

import doctest
import importlib
import pkgutil

import pytest


def _modules():
    """Every module of the package, the compiled ones included."""
    package = importlib.import_module("dataloader")
    names = ["dataloader"]
    for info in pkgutil.walk_packages(package.__path__, "dataloader."):
        if not info.name.endswith("__main__"):
            names.append(info.name)
    return sorted(names)


MODULES = _modules()
# Modules whose examples need an optional dependency, and which one.
NEEDS = {
    "dataloader.sources._object_store": "obstore",  # the s3 extra
    "dataloader.torch": "torch",
    "dataloader._loading.tensors": "torch",
    "dataloader._sampling.torch_order": "torch",
    "dataloader._datasets.hugging_face": "datasets",  # the columnar sources: the arrow extra
    "dataloader._datasets.row_groups": "pyarrow",
    "dataloader.sources._arrow": "pyarrow",
    "dataloader.sources._columnar": "pyarrow",
    "dataloader.sources._decoded": "pyarrow",
    "dataloader.sources._parquet": "pyarrow",
    "dataloader.sources._row_stream": "pyarrow",
}


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    if name in NEEDS:
        pytest.importorskip(NEEDS[name])
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0


def test_every_public_name_has_an_example():
    import dataloader

    for name in dataloader.__all__:
        obj = getattr(dataloader, name)
        assert obj.__doc__ and ">>>" in obj.__doc__, f"{name} has no example"
