"""Jobs under torchrun killed at a random step and resumed on another number of ranks.

Each case runs ``elastic_worker.py`` twice: N ranks until SIGKILL (every
rank at one step, or one rank alone while the others run on until torchrun
stops the job), then M ranks from the N ranks' last saved states, with
other worker counts and kinds. Over the epoch, the sample ids delivered
(those in the saved states, then the resumed job's) are the epoch's
samples exactly: the map-style dataset's, the stream's as an
uninterrupted epoch gives them, and the tar shards' split among the
ranks.
"""

import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from dataloader.sources import TarWriter  # noqa: E402

WORKER = Path(__file__).with_name("elastic_worker.py")
sys.path.insert(0, str(WORKER.parent))
import elastic_worker  # noqa: E402

# (N, M, who is killed, map-style (before, after), stream (before, after), tar shards
# (before, after)): every worker kind on both sides, kinds and counts changing with
# the ranks.
CASES = [
    (2, 3, "all", ("thread2", "process2"), ("0", "thread3"), ("process2", "thread1")),
    (3, 2, "one", ("process2", "0"), ("thread2", "process1"), ("0", "process2")),
    (4, 1, "all", ("0", "thread2"), ("process1", "0"), ("thread1", "thread3")),
    (1, 4, "one", ("thread1", "thread2"), ("thread2", "0"), ("thread3", "0")),
    (2, 2, "one", ("0", "process2"), ("process2", "thread2"), ("thread2", "process1")),
]


def write_shards(directory, scale=1):
    """Tar shards of samples labelled 0, 1, ...; the number of samples."""
    label = 0
    for n, count in enumerate([9, 14, 6, 11] * scale):
        with TarWriter(str(directory / f"s-{n}.tar")) as writer:
            for _ in range(count):
                writer.write({"__key__": f"{label:05d}", "cls": label})
                label += 1
    return label


def stream_epoch(directory, scale, epoch=0):
    """The stream's ids over an uninterrupted epoch (one reader)."""
    source = elastic_worker.stream_source(directory, scale)
    source.set_epoch(epoch)
    return Counter(elastic_worker.sample_id(None, item) for item in source)


def torchrun(nproc, config, expect_ok=True):
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone",
         f"--nproc_per_node={nproc}", "--monitor-interval=0.1", str(WORKER),
         json.dumps(config)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    if expect_ok:
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    else:
        assert result.returncode != 0, "the job was to be killed"
    return result


def delivered(directory, prefix):
    records = [torch.load(path, weights_only=False)
               for path in sorted(directory.glob(f"{prefix}-rank*.pt"))]
    return records


def check_epoch(tmp_path, resumed_ranks, samples, scale=1):
    before = delivered(tmp_path, "run")
    after = delivered(tmp_path, "resume")
    assert len(after) == resumed_ranks
    epochs = {
        "map": lambda epoch: Counter(range(elastic_worker.MAP_SIZE * scale)),
        "stream": lambda epoch: stream_epoch(tmp_path, scale, epoch),
        "tar": lambda epoch: Counter(range(samples)),
    }
    for key, epoch_of in epochs.items():
        for epoch, records in delivered_epochs(key, before, after):
            assert Counter(i for record in records for i in record[f"{key}_ids"]) == \
                epoch_of(epoch), f"{key}, epoch {epoch}"
    # With equal_batches, every resumed rank stops at the same batch, and no sample
    # comes twice (those after the shortest rank's last are left out).
    for _, records in delivered_epochs("tar_equal", before, after):
        equal = Counter(i for record in records for i in record["tar_equal_ids"])
        assert max(equal.values()) == 1 and set(equal) <= set(range(samples))
    assert len({record["tar_equal_batches"] for record in after}) == 1, "unequal batch counts"
    assert len({record["map_batches"] for record in after}) == 1, "unequal batch counts"


def delivered_epochs(key, before, after):
    """``[(epoch, records)]``: one epoch, stopped and resumed; or, when every rank had
    ended the epoch before the job was stopped (the merged state is of the next one),
    the first epoch in the stopped job and the next in the resumed one."""
    if all(key in record and record[key]["epoch"] == 1 for record in before):
        return [(0, before), (1, after)]
    return [(0, before + after)]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}to{c[1]}-{c[2]}" for c in CASES])
def test_killed_job_resumed_on_other_ranks_delivers_each_sample_once(tmp_path, case):
    kill_and_resume(tmp_path, case, scale=1, seed=0)


# Larger epochs, killed later, over several seeds of the kill step and victim.
@pytest.mark.soak
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}to{c[1]}-{c[2]}" for c in CASES])
def test_killed_larger_job_resumed_on_other_ranks(tmp_path, case, seed):
    kill_and_resume(tmp_path, case, scale=10, seed=seed)


def kill_and_resume(tmp_path, case, scale, seed):
    ranks, resumed, who, map_kinds, stream_kinds, tar_kinds = case
    samples = write_shards(tmp_path, scale)
    rng = random.Random(f"{case}{seed}")
    kill_ranks = list(range(ranks)) if who == "all" else [rng.randrange(ranks)]
    config = {"directory": str(tmp_path), "phase": "run", "scale": scale,
              "kill_step": rng.randint(2, 5 * scale), "kill_ranks": kill_ranks,
              "kinds": [[map_kinds[0], stream_kinds[0], tar_kinds[0]],
                        [map_kinds[1], stream_kinds[1], tar_kinds[1]]]}
    torchrun(ranks, config, expect_ok=False)
    assert len(list(tmp_path.glob("run-rank*.pt"))) == ranks
    torchrun(resumed, {**config, "phase": "resume"})
    check_epoch(tmp_path, resumed, samples, scale)


def test_distributed_checkpoint_resumes_on_other_ranks(tmp_path):
    pytest.importorskip("torch.distributed.checkpoint")
    samples = write_shards(tmp_path)
    config = {"directory": str(tmp_path), "phase": "dcp", "kill_step": 3, "kill_ranks": [],
              "kinds": [["thread2", "0", "thread2"], ["0", "thread2", "process2"]]}
    torchrun(2, config)
    torchrun(3, {**config, "phase": "dcp-resume"})
    check_epoch(tmp_path, 3, samples)

