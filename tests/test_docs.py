"""The documentation builds with ``mkdocs build --strict``, and the code its pages show runs."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
DOCS = ROOT / "docs"
TIMEOUT = 300
# Pages whose ```python blocks run, in order, as one script each (in a
# folder holding a small ``train/`` image folder). Other pages show
# fragments of larger programs.
RUNNABLE_PAGES = ["index.md", "quickstart.md", "datasets.md", "execution.md", "from-torch.md",
                  "recipes.md"]


def test_mkdocs_build_strict(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings_handlers.python")
    site = tmp_path / "site"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stderr
    assert (site / "index.html").is_file()
    # The hook's pictures, and the API reference generated from the docstrings.
    assert (site / "images" / "transforms" / "random_resized_crop.png").is_file()
    assert (site / "images" / "kernels_chart.svg").is_file()
    reference = (site / "api" / "transforms" / "index.html").read_text()
    assert "RandomResizedCrop" in reference and "scale=" in reference


def python_blocks(page: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", page.read_text(), re.S | re.M)


@pytest.mark.parametrize("name", RUNNABLE_PAGES)
def test_page_code_runs(name, tmp_path):
    blocks = python_blocks(DOCS / name)
    assert blocks, f"{name} has no python blocks"
    if any(re.search(r"^\s*(import|from) torch", block, re.M) for block in blocks):
        pytest.importorskip("torch")
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from sample_data import image_folder
    finally:
        sys.path.remove(str(ROOT / "examples"))
    image_folder(tmp_path / "train", per_class=6)
    script = tmp_path / "page.py"
    script.write_text("\n".join(blocks))
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                            text=True, timeout=TIMEOUT)
    assert result.returncode == 0, result.stderr


def test_every_page_is_in_the_nav():
    config = (ROOT / "mkdocs.yml").read_text()
    pages = {str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md")}
    missing = {page for page in pages if f": {page}" not in config}
    assert not missing, f"pages missing from mkdocs.yml's nav: {sorted(missing)}"
