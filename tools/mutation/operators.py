"""The mutants of a Python module: one small change of its syntax tree each.

The operators are those of the classic mutation tools (mutmut, cosmic-ray),
one alternative per site so that the count stays proportional to the code:

* comparisons: ``<``/``<=``, ``>``/``>=``, ``==``/``!=``, ``is``/``is not``,
  ``in``/``not in`` swapped;
* arithmetic and bitwise operators, plain or augmented (``+`` to ``-``,
  ``*`` to ``/``, ``//`` to ``/``, ``%`` to ``/``, ``<<`` to ``>>``, ...);
* ``and``/``or`` swapped; a ``not`` or a unary minus dropped;
* number constants plus one; ``True``/``False`` swapped;
* ``return value`` to ``return None``; ``break``/``continue`` swapped.

Strings (docstrings, error messages) and type annotations are not mutated:
a changed message is not a changed behaviour of the loader, and annotations
do nothing at run time. A mutant is named by its function, the source text
of the node it changes and the change (``RandomSampler.__len__: `x < y`:
< -> <=``), with ``#2`` for a second identical site: names survive edits
elsewhere in the module, unlike line numbers.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Mutant", "mutants", "mutated_tree"]

_COMPARE_SWAPS = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
    ast.In: ast.NotIn, ast.NotIn: ast.In,
}
_BINARY_SWAPS = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div, ast.Mod: ast.Div, ast.Pow: ast.Mult,
    ast.LShift: ast.RShift, ast.RShift: ast.LShift,
    ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd, ast.BitXor: ast.BitAnd,
}
_SYMBOLS = {
    ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
    ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in",
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
    ast.Mod: "%", ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>",
    ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.And: "and", ast.Or: "or",
}
# Fields holding annotations, never mutated.
_ANNOTATION_FIELDS = {"annotation", "returns"}


@dataclass(frozen=True)
class Mutant:
    """One mutant: its stable ``name``, the ``line`` it changes, its index in the module."""

    name: str
    line: int
    index: int


@dataclass(frozen=True)
class _Site:
    node_index: int   # position of the node in the traversal order of _nodes()
    change: str       # which change: "op:<i>", "drop", "const", "none", "swap"
    description: str
    line: int
    scope: str


def _nodes(tree: ast.AST) -> Iterator[tuple[ast.AST, str]]:
    """Every node that may be mutated, with its enclosing function's name, in a fixed order."""

    def visit(node: ast.AST, scope: str) -> Iterator[tuple[ast.AST, str]]:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            scope = f"{scope}.{node.name}" if scope else node.name
            body = node.body
            if body and _is_docstring(body[0]):
                body = body[1:]
            for child in (*node.decorator_list, *_defaults(node), *body):
                yield from visit(child, scope)
            return
        if isinstance(node, ast.JoinedStr):
            return  # f-strings are messages
        if isinstance(node, ast.Expr) and _is_docstring(node):
            return
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            return
        if isinstance(node, ast.ImportFrom):
            return
        yield node, scope
        for field, value in ast.iter_fields(node):
            if field in _ANNOTATION_FIELDS:
                continue
            if isinstance(node, ast.AnnAssign) and field == "target":
                continue
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, ast.AST):
                    yield from visit(child, scope)

    yield from visit(tree, "")


def _defaults(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.ClassDef):
        return list(node.bases) + [keyword.value for keyword in node.keywords]
    return [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]


def _is_docstring(node: ast.AST) -> bool:
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str))


def _segment(lines: list[str], node: ast.AST) -> str:
    """The source text of ``node`` on one line (``ast.get_source_segment``, without
    its cost of splitting the whole source on every call)."""
    first, last = node.lineno - 1, node.end_lineno - 1
    if first == last:
        text = lines[first][node.col_offset:node.end_col_offset]
    else:
        text = " ".join([lines[first][node.col_offset:], *lines[first + 1:last],
                         lines[last][:node.end_col_offset]])
    return " ".join(text.split())


def _sites(tree: ast.AST, source: str) -> Iterator[_Site]:
    # Offsets are in UTF-8 bytes; the modules mutated are ASCII.
    lines = source.splitlines()
    for index, (node, scope) in enumerate(_nodes(tree)):

        def site(change: str, what: str, node: ast.AST = node, index: int = index,
                 scope: str = scope) -> _Site:
            return _Site(index, change, f"`{_segment(lines, node)}`: {what}", node.lineno,
                         scope or "<module>")

        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                swap = _COMPARE_SWAPS[type(op)]
                yield site(f"op:{i}", f"{_SYMBOLS[type(op)]} -> {_SYMBOLS[swap]}")
        elif isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in _BINARY_SWAPS:
            swap = _BINARY_SWAPS[type(node.op)]
            yield site("op:0", f"{_SYMBOLS[type(node.op)]} -> {_SYMBOLS[swap]}")
        elif isinstance(node, ast.BoolOp):
            other = ast.Or if isinstance(node.op, ast.And) else ast.And
            yield site("op:0", f"{_SYMBOLS[type(node.op)]} -> {_SYMBOLS[other]}")
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
            yield site("drop", "drop " + ("not" if isinstance(node.op, ast.Not) else "-"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
            yield site("const", f"{node.value} -> {not node.value}")
        elif isinstance(node, ast.Constant) and type(node.value) in (int, float):
            yield site("const", f"{node.value!r} -> {node.value + 1!r}")
        elif isinstance(node, ast.Return) and node.value is not None and not (
            isinstance(node.value, ast.Constant) and node.value.value is None
        ):
            yield site("none", "return None")
        elif isinstance(node, (ast.Break, ast.Continue)):
            yield site("swap", "break <-> continue")


def mutants(source: str) -> list[Mutant]:
    """The mutants of a module's ``source``, in a fixed order."""
    tree = ast.parse(source)
    seen: dict[str, int] = {}
    result = []
    for index, site in enumerate(_sites(tree, source)):
        name = f"{site.scope}: {site.description}"
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            name = f"{name} #{seen[name]}"
        result.append(Mutant(name, site.line, index))
    return result


def mutated_tree(source: str, index: int) -> ast.Module:
    """The syntax tree of ``source`` with mutant number ``index`` applied."""
    tree = ast.parse(source)
    site = list(_sites(tree, source))[index]
    mutated = copy.deepcopy(tree)
    node = next(node for i, (node, _) in enumerate(_nodes(mutated)) if i == site.node_index)
    _apply(mutated, node, site.change)
    return ast.fix_missing_locations(mutated)


def _apply(tree: ast.Module, node: ast.AST, change: str) -> None:
    if change.startswith("op:"):
        i = int(change[3:])
        if isinstance(node, ast.Compare):
            node.ops[i] = _COMPARE_SWAPS[type(node.ops[i])]()
        elif isinstance(node, ast.BoolOp):
            node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        else:
            node.op = _BINARY_SWAPS[type(node.op)]()
    elif change == "const":
        node.value = (not node.value) if isinstance(node.value, bool) else node.value + 1
    elif change == "none":
        node.value = ast.Constant(None)
    elif change == "swap":
        _replace(tree, node, ast.Continue() if isinstance(node, ast.Break) else ast.Break())
    elif change == "drop":
        _replace(tree, node, node.operand)
    else:
        raise ValueError(f"unknown change {change!r}")


def _replace(tree: ast.AST, old: ast.AST, new: ast.AST) -> None:
    """Put ``new`` where ``old`` is in ``tree``."""
    ast.copy_location(new, old)
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, field, new)
                return
            if isinstance(value, list) and any(item is old for item in value):
                value[[id(item) for item in value].index(id(old))] = new
                return
    raise ValueError("node not found in its tree")
