"""The documentation builds with ``mkdocs build --strict``, and the code its pages show runs."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dataloader._media.samples import sample_audio, sample_video

ROOT = Path(__file__).parent.parent
DOCS = ROOT / "docs"
TIMEOUT = 300
# Pages whose ```python blocks run, in order, as one script each (in a
# folder holding a small ``train/`` image folder, ``photo.jpg``, and the
# sample ``clip.mp4`` and ``talk.m4a``), each
# ``print(...)  # text`` asserting what it prints. Other pages show
# fragments of larger programs.
RUNNABLE_PAGES = ["README.md", *(f"docs/{name}" for name in [
    "index.md", "quickstart.md", "datasets.md", "execution.md", "from-torch.md", "recipes.md",
    "sequences.md"])]


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


# ``print(...)   # what it prints``: a page's claim, checked when the page runs.
CLAIM = re.compile(r"^(\s*)print\((.*)\)\s+# (.*?)\s*$")
CHECK_CLAIMS = '''
def __claim(expected, *values):
    shown = " ".join(map(str, values))
    print(shown)
    if shown != expected:
        raise AssertionError(f"the page says {expected!r}, the code prints {shown!r}")
'''


def checked_claims(code: str) -> str:
    """``code`` with each ``print(...)  # text`` line asserting it prints ``text``."""
    return "\n".join(
        f"{found[1]}__claim({found[3]!r}, {found[2]})" if (found := CLAIM.match(line)) else line
        for line in code.splitlines()
    )


def test_a_claim_that_does_not_hold_fails_its_page(tmp_path):
    script = tmp_path / "page.py"
    script.write_text(CHECK_CLAIMS + checked_claims("print(1 + 1, 'x')   # 2 x\nprint(3)  # 4"))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                            timeout=TIMEOUT)
    assert result.stdout.splitlines() == ["2 x", "3"]
    assert "the page says '4', the code prints '3'" in result.stderr


@pytest.mark.parametrize("name", RUNNABLE_PAGES)
def test_page_code_runs(name, tmp_path):
    blocks = python_blocks(ROOT / name)
    assert blocks, f"{name} has no python blocks"
    if any(re.search(r"^\s*(import|from) torch", block, re.M) for block in blocks):
        pytest.importorskip("torch")
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from sample_data import image_folder
    finally:
        sys.path.remove(str(ROOT / "examples"))
    image_folder(tmp_path / "train", per_class=6)
    (tmp_path / "photo.jpg").write_bytes((tmp_path / "train" / "red" / "000.jpg").read_bytes())
    sample_video(tmp_path, "clip.mp4")
    sample_audio(tmp_path, "talk.m4a")
    script = tmp_path / "page.py"
    script.write_text(CHECK_CLAIMS + checked_claims("\n".join(blocks)))
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                            text=True, timeout=TIMEOUT)
    assert result.returncode == 0, result.stderr


def test_every_page_is_in_the_nav():
    config = (ROOT / "mkdocs.yml").read_text()
    pages = {str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md")}
    missing = {page for page in pages if f": {page}" not in config}
    assert not missing, f"pages missing from mkdocs.yml's nav: {sorted(missing)}"
