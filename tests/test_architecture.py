"""The package's shape: no import cycles, short files, every module documented."""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "dataloader"
MAX_LINES = 650
SOURCE_SUFFIXES = (".py", ".pyx", ".pxd", ".pyi", ".c", ".h")
# Cython's (c)import statements, enough to find the package's own modules.
_CYTHON_IMPORT = re.compile(r"^\s*(?:from\s+(\S+)\s+c?import\s+([^#\n(]+)|c?import\s+(\S+))", re.M)


def _module_name(path):
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules():
    return {
        _module_name(path): path
        for path in sorted(PACKAGE.rglob("*"))
        if path.suffix in (".py", ".pyx") and "build" not in path.parts
    }


def _resolve(package, module, level):
    if not level:
        return module
    base = package.split(".")[: len(package.split(".")) - level + 1]
    return ".".join(base + ([module] if module else []))


def _python_imports(source, package):
    """Modules imported anywhere in ``source`` (functions included), but not
    under ``if TYPE_CHECKING:``, which never runs."""
    tree = ast.parse(source)
    type_only = {
        id(node)
        for branch in ast.walk(tree)
        if isinstance(branch, ast.If) and "TYPE_CHECKING" in ast.unparse(branch.test)
        for statement in branch.body
        for node in ast.walk(statement)
    }
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.ImportFrom):
            module = _resolve(package, node.module, node.level)
            yield module
            yield from (f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def _cython_imports(source):
    for match in _CYTHON_IMPORT.finditer(source):
        module = match.group(1) or match.group(3)
        yield module
        if match.group(2):
            names = (name.split()[0] for name in match.group(2).split(",") if name.strip())
            yield from (f"{module}.{name}" for name in names)


def import_graph():
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        source = path.read_text()
        package = name if path.stem == "__init__" else name.rpartition(".")[0]
        if path.suffix == ".py":
            found = _python_imports(source, package)
        else:
            found = _cython_imports(source)
        graph[name] = {module for module in found if module in modules and module != name}
    return graph


def find_cycle(graph):
    """One import cycle as a list of modules, or ``None``."""
    state = {}

    def visit(node, path):
        state[node] = "open"
        for neighbour in sorted(graph[node]):
            if state.get(neighbour) == "open":
                return path[path.index(neighbour):] + [neighbour]
            if neighbour not in state:
                cycle = visit(neighbour, [*path, neighbour])
                if cycle:
                    return cycle
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start, [start])
            if cycle:
                return cycle
    return None


def test_the_cycle_finder_finds_a_cycle_through_a_function_level_import():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    imports = set(_python_imports("def f():\n    from .x import y\n", "pkg.sub"))
    assert "pkg.sub.x" in imports and "pkg.sub.x.y" in imports
    assert not set(_python_imports("if TYPE_CHECKING:\n    import pkg.z\n", "pkg"))


def test_no_module_of_the_package_imports_itself_back():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def stage_of(module):
    """The stage a module belongs to: its subpackage of ``dataloader`` (``dataloader._loading``),
    or the module itself at the top (``dataloader._errors``, ``dataloader.kernels``)."""
    return ".".join(module.split(".")[:2])


def stage_graph(graph):
    """``graph``'s imports between stages, each stage drawn as one node."""
    stages = {}
    for module, imported in graph.items():
        stages.setdefault(stage_of(module), set()).update(
            stage_of(other) for other in imported if stage_of(other) != stage_of(module))
    return stages


def test_the_stage_graph_draws_each_subpackage_as_one_node():
    graph = {"dataloader._a.x": {"dataloader._b.y"}, "dataloader._b.y": {"dataloader._a.z"},
             "dataloader._a.z": set(), "dataloader.top": {"dataloader._a.x"}}
    assert find_cycle(graph) is None  # no module imports itself back...
    # ...but the two stages import each other.
    assert find_cycle(stage_graph(graph)) == ["dataloader._a", "dataloader._b", "dataloader._a"]


def test_no_stage_of_the_package_imports_another_back():
    # The stages are layered: a lower one never imports a higher one, even
    # through a third, so each can be read (and replaced) without those above.
    cycle = find_cycle(stage_graph(import_graph()))
    assert cycle is None, "import cycle between stages: " + " -> ".join(cycle)


def test_the_core_imports_only_itself_and_the_exceptions():
    graph = import_graph()
    upward = {
        (module, other)
        for module, imported in graph.items() if stage_of(module) == "dataloader._core"
        for other in imported if stage_of(other) not in ("dataloader._core", "dataloader._errors")
    }
    assert not upward, f"_core imports upward: {sorted(upward)}"
    assert not graph["dataloader._errors"], "the exceptions import nothing of the package"


# What makes the engines of one kind of worker: known to the kinds' module alone.
KIND_MODULES = {"dataloader._processes.kind", "dataloader._processes.epoch",
                "dataloader._processes.stream", "dataloader._core.epoch", "dataloader._core.stream"}


def test_only_the_kinds_module_and_the_kinds_make_engines():
    # A new kind of worker then touches its own module, the kinds' registry
    # and worker_type's values -- not the loader or the iterators.
    graph = import_graph()
    below = ("dataloader._core", "dataloader._processes")
    makers = {
        module for module, imported in graph.items()
        if imported & KIND_MODULES and not module.startswith(below)
    }
    # dataloader._auto is a kind: the measuring one, over the others' engines.
    allowed = {"dataloader._worker_kinds", "dataloader._auto", "dataloader._loading.streaming"}
    assert makers <= allowed, makers
    assert "dataloader._processes.kind" in graph["dataloader._worker_kinds"]


@pytest.mark.parametrize(
    "path",
    [path for path in sorted(PACKAGE.rglob("*")) if path.suffix in SOURCE_SUFFIXES],
    ids=lambda path: str(path.relative_to(ROOT)),
)
def test_no_source_file_is_over_the_line_limit(path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(ROOT)} has {lines} lines (limit {MAX_LINES})"


def test_every_module_is_in_the_architecture_table():
    text = (ROOT / "docs" / "architecture.md").read_text()
    listed = set(re.findall(r"`((?:_|sources/|kernels|transforms|torch)[\w/]*\.(?:py|pyx))`", text))
    missing = [
        str(path.relative_to(PACKAGE))
        for path in _modules().values()
        if path.name != "__init__.py" and str(path.relative_to(PACKAGE)) not in listed
    ]
    assert not missing, f"modules missing from docs/architecture.md: {missing}"
