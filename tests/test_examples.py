"""Every example runs as a script, within a deadline, and prints what it should."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parent.parent / "examples"
DEADLINE_SECONDS = 120

# script: patterns its output must match, in order.
EXPECTED = {
    "basic_loop.py": [r"epoch 0: 16 batches, 1000 items", r"epoch 1: 16 batches, 1000 items",
                      r"fetched 2000 items, collated 32 batches"],
    "http_dataset.py": [r"HttpDataset: 6 batches of \(8, 3, 64, 64\)",
                        r"AsyncDataset epoch 0: 6 batches", r"AsyncDataset epoch 1: 6 batches"],
    "object_store.py": [r"24 objects, first key blue/000.jpg",
                        r"batch 2: \(8, 3, 64, 64\) float32, classes \[0\]"],
    "open_files.py": [r"thread workers, a handle each: 12000 of 12000 records right",
                      r"thread workers, os.pread: 12000 of 12000 records right",
                      r"process workers, a handle each: 12000 of 12000 records right",
                      r"process workers, os.pread: 12000 of 12000 records right"],
    "getitems.py": [r"20 batches from 20 __getitems__ calls", r"sum of first column: 399960000"],
    "image_folder.py": [r"60 images, classes \['blue', 'green', 'red'\]",
                        r"batch \(16, 3, 64, 64\) torch\.float32"],
    "mixed_transforms.py": [r"3 batches of \(8, 3, 64, 64\) float32",
                            r"same batches with 2 workers and with none: True"],
    "train_classifier.py": [r"epoch 0: loss", r"epoch 3: loss [\d.]+, accuracy (0\.9\d|1\.00)"],
    # A uniform guess over 512 tokens loses ln(512) = 6.24.
    "train_text.py": [r"2000 paragraphs, \d+ tokens, \d+ batches", r"epoch 0: loss",
                      r"epoch 2: loss [0-4]\.\d\d"],
    "sample_data.py": [r"wrote 48 JPEGs under train/"],
}


# What an example needs beyond the package (its optional extras).
REQUIRES = {
    "image_folder.py": ["torch"],
    "train_classifier.py": ["torch"],
    "train_text.py": ["torch", "pyarrow", "tokenizers"],
    "http_dataset.py": ["aiohttp"],
    "object_store.py": ["obstore"],
}


def test_every_example_is_tested():
    scripts = {path.name for path in EXAMPLES.glob("*.py")}
    # distributed_train.py runs under torchrun below; demo.py is `make demo`.
    untested = scripts - set(EXPECTED) - {"distributed_train.py", "demo.py"}
    assert not untested, f"examples without a test: {sorted(untested)}"


@pytest.mark.parametrize("script", sorted(EXPECTED))
def test_example(script, tmp_path):
    for module in REQUIRES.get(script, []):
        pytest.importorskip(module)
    # Run as a user would: the script's own folder on sys.path.
    env = {key: value for key, value in os.environ.items() if key != "PYTHONSAFEPATH"}
    result = subprocess.run([sys.executable, str(EXAMPLES / script)], capture_output=True,
                            text=True, timeout=DEADLINE_SECONDS, cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    position = 0
    for pattern in EXPECTED[script]:
        found = re.compile(pattern).search(result.stdout, position)
        assert found, f"{script}: no {pattern!r} after position {position} in:\n{result.stdout}"
        position = found.end()


@pytest.mark.parametrize("flags", [[], ["--stream"]], ids=["map-style", "streaming"])
def test_distributed_example_under_torchrun(flags, tmp_path):
    pytest.importorskip("torch")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               str(EXAMPLES / "distributed_train.py"), "--epochs", "2", "--workers", "1",
               "--checkpoint", str(tmp_path / "ckpt.json"), *flags]
    env = {key: value for key, value in os.environ.items() if key != "PYTHONSAFEPATH"}
    result = subprocess.run(command, capture_output=True, text=True, timeout=DEADLINE_SECONDS,
                            cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    for rank in (0, 1):
        assert re.search(f"rank {rank} epoch 1: \\d+ steps, mean loss",
                         result.stdout), result.stdout
