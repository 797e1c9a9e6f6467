"""A pytest plugin that imports one module of the package with one mutant applied.

``python -m tools.mutation`` runs each mutant's tests as
``pytest -p tools.mutation.hook`` with ``DATALOADER_MUTANT`` set to
``<module>:<path>:<index>``. The plugin is imported before any test module
or conftest, so the first import of that module, wherever it happens, runs
the mutated code; the files on disk are never changed.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys

from tools.mutation.operators import mutated_tree

ENV = "DATALOADER_MUTANT"


class _MutantLoader(importlib.abc.Loader):
    def __init__(self, path: str, index: int) -> None:
        self.path = path
        self.index = index

    def create_module(self, spec):
        return None  # the default module object

    def exec_module(self, module) -> None:
        with open(self.path, encoding="utf-8") as file:
            source = file.read()
        code = compile(mutated_tree(source, self.index), self.path, "exec")
        exec(code, module.__dict__)  # noqa: S102 -- the point of the tool


class _MutantFinder(importlib.abc.MetaPathFinder):
    def __init__(self, name: str, path: str, index: int) -> None:
        self.name = name
        self.loader = _MutantLoader(path, index)

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        return importlib.util.spec_from_file_location(
            fullname, self.loader.path, loader=self.loader)


def install(value: str) -> None:
    """Make the import of the module named in ``value`` run its mutant."""
    name, path, index = value.rsplit(":", 2)
    if name in sys.modules:
        raise RuntimeError(f"{name} was imported before the mutant could be installed")
    sys.meta_path.insert(0, _MutantFinder(name, path, int(index)))


if os.environ.get(ENV):
    install(os.environ[ENV])
