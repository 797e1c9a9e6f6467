"""Griffe extension: what the API reference needs from the imported package.

Static analysis misses two things here, which this reads from the imported
objects:

* ``dataloader.transforms`` makes its transforms frozen dataclasses through
  ``_frozen``, which is not recognised as ``@dataclass``: each such class
  gets the ``__init__`` signature that ``dataclasses`` generated.
* Compiled classes (``Image``, ``ImageBatch``) are described by ``.pyi``
  stubs without docstrings: each class, method and property without a
  docstring gets the compiled object's.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from typing import Any

import griffe


class RuntimeDetails(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.path == "dataloader":
            _visit(pkg)


def _visit(module: griffe.Module) -> None:
    try:
        runtime = importlib.import_module(module.path)
    except ImportError:
        return
    for name, member in module.members.items():
        if member.is_alias:
            continue
        if member.is_module:
            _visit(member)
        elif member.is_class:
            cls = getattr(runtime, name, None)
            if not isinstance(cls, type):
                continue
            if "__init__" not in member.members and dataclasses.is_dataclass(cls):
                member.set_member("__init__", _init(cls, member))
            _fill_docstrings(member, cls)


def _fill_docstrings(member: Any, obj: Any) -> None:
    if member.docstring is None and getattr(obj, "__doc__", None):
        member.docstring = griffe.Docstring(inspect.cleandoc(obj.__doc__), parent=member)
    if member.is_class:
        for name, child in member.members.items():
            if not child.is_alias and not name.startswith("_") and hasattr(obj, name):
                _fill_docstrings(child, getattr(obj, name))


def _init(cls: type, parent: griffe.Class) -> griffe.Function:
    parameters = [griffe.Parameter("self", kind=griffe.ParameterKind.positional_or_keyword)]
    for parameter in inspect.signature(cls).parameters.values():
        default = None if parameter.default is parameter.empty else repr(parameter.default)
        parameters.append(griffe.Parameter(parameter.name, default=default,
                                           kind=griffe.ParameterKind.positional_or_keyword))
    return griffe.Function("__init__", parameters=griffe.Parameters(*parameters), parent=parent,
                           returns="None")
