"""The mutation tooling's own logic (``tools/mutation``); ``make mutate`` runs it."""

import ast
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _import_tools():
    # The tools are importable from the repository root only, which is not on
    # sys.path under PYTHONSAFEPATH (`make test`). It is put there for this
    # import alone: left there, it would make worker processes started later
    # in the test run (spawn, forkserver) import the source tree's dataloader,
    # which has no built extensions, in place of the installed one.
    added = str(ROOT) not in sys.path
    if added:
        sys.path.insert(0, str(ROOT))
    try:
        from tools.mutation import hook, native, operators, python
    finally:
        if added:
            sys.path.remove(str(ROOT))
    return hook, native, operators, python


hook, native, operators, python = _import_tools()

SOURCE = textwrap.dedent('''
    """A docstring is never mutated."""

    LIMIT: int = 3


    def f(a: int, b: "int | None" = None) -> int:
        """Neither is this one."""
        if a < LIMIT and not b:
            return a + 1
        for _ in range(2):
            break
        raise ValueError(f"a={a - 1}")
''')


def names(source):
    return [mutant.name for mutant in operators.mutants(source)]


def test_one_mutant_per_site_and_none_in_strings_or_annotations():
    assert names(SOURCE) == [
        "<module>: `3`: 3 -> 4",
        "f: `a < LIMIT and not b`: and -> or",
        "f: `a < LIMIT`: < -> <=",
        "f: `not b`: drop not",
        "f: `return a + 1`: return None",
        "f: `a + 1`: + -> -",
        "f: `1`: 1 -> 2",
        "f: `2`: 2 -> 3",
        "f: `break`: break <-> continue",
    ]


def test_each_mutant_compiles_and_changes_only_its_site():
    original = ast.dump(ast.parse(SOURCE))
    dumps = set()
    for mutant in operators.mutants(SOURCE):
        tree = operators.mutated_tree(SOURCE, mutant.index)
        compile(tree, "<mutant>", "exec")
        dumps.add(ast.dump(tree))
    assert original not in dumps
    assert len(dumps) == len(operators.mutants(SOURCE))


def test_names_survive_edits_elsewhere_and_repeated_sites_are_numbered():
    shifted = "import os\n\n\n" + SOURCE
    assert names(shifted) == names(SOURCE)
    assert names("x = 1\ny = 1\n") == ["<module>: `1`: 1 -> 2", "<module>: `1`: 1 -> 2 #2"]


def test_the_hook_imports_the_mutant_instead_of_the_module(tmp_path, monkeypatch):
    (tmp_path / "mutated_example.py").write_text("def limit():\n    return 1 < 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    source = (tmp_path / "mutated_example.py").read_text()
    index = names(source).index("limit: `1 < 2`: < -> <=")
    finder_count = len(sys.meta_path)
    try:
        hook.install(f"mutated_example:{tmp_path / 'mutated_example.py'}:{index}")
        import mutated_example

        assert mutated_example.limit() is True  # 1 <= 2, from the mutant
        index = names(source).index("limit: `return 1 < 2`: return None")
        del sys.modules["mutated_example"]
        sys.meta_path.pop(0)
        hook.install(f"mutated_example:{tmp_path / 'mutated_example.py'}:{index}")
        import mutated_example

        assert mutated_example.limit() is None
    finally:
        sys.modules.pop("mutated_example", None)
        del sys.meta_path[: len(sys.meta_path) - finder_count]
    with pytest.raises(RuntimeError, match="imported before"):
        hook.install(f"pytest:{tmp_path / 'x.py'}:0")


def test_targets_and_accepted_survivors_name_real_modules_and_give_reasons():
    for module, args in python.TARGETS.items():
        assert python.module_path(module).is_file(), module
        for arg in args:
            if arg.startswith("tests/"):
                path, _, test = arg.partition("::")
                assert (ROOT / path).is_file(), arg
                assert not test or f"def {test}(" in (ROOT / path).read_text(), arg
    with open(python.ACCEPTED, "rb") as file:
        table = tomllib.load(file)
    assert set(table) <= set(python.TARGETS)
    for module, entries in table.items():
        known = set(names(python.module_path(module).read_text()))
        for entry in entries:
            assert entry["mutant"] in known, entry
            assert len(entry["reason"]) > 20, entry


def test_native_mutations_apply_exactly_once_and_name_their_tests():
    assert len(native.MUTATIONS) >= 8
    for mutation in native.MUTATIONS:
        text = (ROOT / mutation.path).read_text()
        assert text.count(mutation.old) == 1, mutation.name
        assert mutation.old != mutation.new
        assert all((ROOT / test).is_file() for test in mutation.tests), mutation.name
