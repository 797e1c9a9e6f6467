"""``dataloader pack``: image folders and JSON-lines indexes written as tar shards."""

import json
import subprocess
import sys

import pytest
from conftest import encode, natural_image

from dataloader import ImageFolder
from dataloader._cli.main import main
from dataloader.sources import TarDataset


@pytest.fixture
def folder(tmp_path):
    """Two classes of five JPEGs (about 3 KB each)."""
    root = tmp_path / "images"
    for index in range(10):
        directory = root / ("cat" if index % 2 else "dog")
        directory.mkdir(parents=True, exist_ok=True)
        data = encode(natural_image(40 + index, 48, seed=index), "JPEG", quality=90)
        (directory / f"{index}.jpg").write_bytes(data)
    return root


def test_an_image_folder_becomes_shards_of_images_and_classes(folder, tmp_path, capsys):
    out = tmp_path / "shards"
    assert main(["pack", str(folder), str(out), "--shard-size", "8KB"]) == 0
    shards = sorted(str(path) for path in out.glob("shard-*.tar"))
    assert len(shards) > 2
    assert f"10 samples in {len(shards)} shards" in capsys.readouterr().out
    samples = list(TarDataset(shards, fields=("jpg", "cls")))
    reference = ImageFolder(folder)
    assert samples == [(data, label) for data, label in
                       (reference[i] for i in range(len(reference)))]


def test_a_shuffled_index_with_labels_and_fields(folder, tmp_path):
    index = tmp_path / "index.jsonl"
    files = sorted(folder.rglob("*.jpg"))
    index.write_text("".join(
        json.dumps({"path": str(path.relative_to(tmp_path)), "label": n, "caption": f"c{n}"}) + "\n"
        for n, path in enumerate(files)))
    out = tmp_path / "out"
    assert main(["pack", str(index), str(out), "--prefix", "val", "--shuffle", "--seed", "1"]) == 0
    shards = sorted(str(path) for path in out.glob("val-*.tar"))
    assert len(shards) == 1
    samples = list(TarDataset(shards, fields=("jpg", "cls", "json")))
    assert sorted(label for _, label, _ in samples) == list(range(len(files)))
    assert [label for _, label, _ in samples] != list(range(len(files)))
    for data, label, extra in samples:
        assert data == files[label].read_bytes() and extra == {"caption": f"c{label}"}


def test_pack_errors(tmp_path, capsys):
    assert main(["pack", str(tmp_path / "missing"), str(tmp_path / "o")]) == 2
    assert main(["pack", str(tmp_path), str(tmp_path / "o"), "--shard-size", "lots"]) == 2
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    assert main(["pack", str(bad), str(tmp_path / "o")]) == 1
    assert "bad.jsonl, line 1: not JSON" in capsys.readouterr().err


def test_pack_subprocess_shows_progress(folder, tmp_path):
    result = subprocess.run([sys.executable, "-m", "dataloader", "pack", str(folder),
                             str(tmp_path / "o")], capture_output=True, text=True, timeout=120,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert "pack" in result.stderr and "10" in result.stderr
