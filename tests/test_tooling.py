"""The checks that keep the tree tidy run with the suite: ruff, mypy, and the
benchmark list of ``make bench``."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run_tool(*command):
    return subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)


def test_ruff_finds_nothing():
    pytest.importorskip("ruff", reason="ruff is in the test extra")
    result = run_tool("ruff", "check", "--no-cache", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_finds_nothing_in_the_package():
    pytest.importorskip("mypy", reason="mypy is in the test extra")
    # The files and options are in pyproject.toml's [tool.mypy].
    result = run_tool("mypy", "--no-incremental")
    assert result.returncode == 0, result.stdout + result.stderr


def makefile_target(name):
    """The recipe lines of ``name`` in the Makefile."""
    lines = (ROOT / "Makefile").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"{name}:", line))
    recipe = []
    for line in lines[start + 1:]:
        if not line.startswith("\t"):
            break
        recipe.append(line.strip())
    return recipe


def test_make_bench_runs_every_benchmark():
    # Files starting with _ are helpers (the HTTP server), not benchmarks.
    scripts = {path.name for path in (ROOT / "benchmarks").glob("*.py")
               if not path.name.startswith("_")}
    run = [match for line in makefile_target("bench")
           for match in re.findall(r"benchmarks/(\w+\.py)", line)]
    assert scripts, "no benchmark scripts found"
    assert sorted(run) == sorted(set(run)), f"a benchmark runs twice: {run}"
    assert set(run) == scripts
