"""One rank of a torchrun job stopped and resized (run by test_elastic_torchrun.py, not
collected by pytest).

Usage: python -m torch.distributed.run --standalone --nproc_per_node=R elastic_worker.py
CONFIG_JSON

Four loaders run in step, as a training loop takes its batches: a map-style
dataset under ``DistributedSampler``, a stream (``shard`` of an
``interleave`` of tar shards with a shuffle buffer and a plain stream), and
the tar shards split among the ranks (``TarDataset.shard``), alone and with
``equal_batches=True`` (the ranks agreeing on their batch count).
After every step each rank saves, with ``torch.save`` to its own file
(written whole, then renamed), every loader's ``state_dict()`` and the
sample ids the loaders delivered up to that state, as a job checkpoints
its model with them.

``phase`` "run": at step ``kill_step`` the ranks in ``kill_ranks`` kill
themselves (SIGKILL) after taking their batches and before saving them;
the others go on until torchrun stops the job. ``phase`` "resume": every
rank reads all the stopped ranks' files, loads its share of the merged
states and runs to the end of the epoch, saving what it delivered.
``phase`` "dcp": the same, through ``torch.distributed.checkpoint`` and
``LoaderCheckpoint`` (``dcp_save`` steps, then the job stops cleanly).
"""

import json
import os
import signal
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from dataloader import (
    DataLoader,
    DistributedSampler,
    IterableDataset,
    LoaderCheckpoint,
    interleave,
    merge_states,
    shard,
)
from dataloader.sources import TarDataset

MAP_SIZE = 288  # 12 * 24 (times the scale): shares and remainders divide by 1 to 4 ranks
MAP_BATCH = 12
STREAM_BATCH = 4
TAR_BATCH = 1  # more steps than the largest kill step: the tar epoch is never over before it
# The loaders, in the order of the kinds in a config and of the records' keys.
NAMES = ("map", "stream", "tar", "tar_equal")


class Numbers(IterableDataset):
    """Ids ``start`` to ``start + n - 1``, as a stream without a length."""

    def __init__(self, start, n):
        self.start, self.n = start, n

    def __iter__(self):
        return iter(range(self.start, self.start + self.n))


def stream_source(directory, scale=1):
    shards = sorted(str(path) for path in Path(directory).glob("*.tar"))
    tar = TarDataset(shards, shuffle_buffer=5 * scale, shuffle_shards=True, seed=1,
                     fields=("cls",))
    return interleave([tar, Numbers(10**6, 80 * scale)], probabilities=[0.6, 0.4], seed=2)


def tar_shards(directory, rank, ranks):
    """The tar shards split among the ranks: each rank reads its own shards."""
    shards = sorted(str(path) for path in Path(directory).glob("*.tar"))
    return TarDataset(shards, shuffle_buffer=3, shuffle_shards=True, seed=4,
                      fields=("cls",)).shard(rank, ranks)


def sample_id(position, sample):
    """A tar sample's ``(cls,)`` tuple or a number: its id."""
    return sample[0] if isinstance(sample, tuple) else sample


def workers(kind):
    """``"0"``, ``"thread2"`` or ``"process2"``: DataLoader keyword arguments."""
    if kind == "0":
        return {"num_workers": 0}
    for name in ("thread", "process"):
        if kind.startswith(name):
            return {"num_workers": int(kind[len(name):]), "worker_type": name}
    raise ValueError(kind)


def loaders(config, rank, ranks, kinds):
    scale = config.get("scale", 1)
    dataset = list(range(MAP_SIZE * scale))
    sampler = DistributedSampler(dataset, ranks, rank, seed=3)
    mapped = DataLoader(dataset, batch_size=MAP_BATCH, sampler=sampler, timeout=120,
                        **workers(kinds[0]))
    stream = DataLoader(shard(stream_source(config["directory"], scale), rank, ranks),
                        batch_size=STREAM_BATCH, timeout=120,
                        transform=sample_id, **workers(kinds[1]))
    tar = DataLoader(tar_shards(config["directory"], rank, ranks), batch_size=TAR_BATCH,
                     timeout=120, transform=sample_id, **workers(kinds[2]))
    tar_equal = DataLoader(tar_shards(config["directory"], rank, ranks), batch_size=TAR_BATCH,
                           timeout=120, transform=sample_id, equal_batches=True,
                           **workers(kinds[2]))
    return mapped, stream, tar, tar_equal


def save(path, record):
    partial = path.with_suffix(".partial")
    torch.save(record, partial)
    os.replace(partial, path)


def run(config, rank, ranks, phase):
    out = Path(config["directory"])
    kinds = config["kinds"][0 if phase == "run" else 1]
    every = dict(zip(NAMES, loaders(config, rank, ranks, kinds), strict=True))
    if phase == "resume":
        records = [torch.load(path, weights_only=False)
                   for path in sorted(out.glob("run-rank*.pt"))]
        for key, loader in every.items():
            loader.load_state_dict(merge_states([record[key] for record in records]))
    elif phase == "dcp-resume":
        import torch.distributed.checkpoint as dcp

        state = {key: LoaderCheckpoint(loader) for key, loader in every.items()}
        dcp.load(state, checkpoint_id=str(out / "dcp"))
    ids = [[] for _ in NAMES]
    if phase == "run":  # every rank has a state before any is killed
        save(out / f"run-rank{rank}.pt", record_of(every, ids))
        dist.barrier()
    iterators = [iter(loader) for loader in every.values()]
    batches = [0 for _ in NAMES]
    step = 0
    while any(it is not None for it in iterators):
        step += 1
        for i, iterator in enumerate(iterators):
            if iterator is None:
                continue
            batch = next(iterator, None)
            if batch is None:
                iterators[i] = None
                continue
            ids[i].extend(int(x) for x in batch.tolist())
            batches[i] += 1
        if phase == "run" and step == config["kill_step"] and rank in config["kill_ranks"]:
            os.kill(os.getpid(), signal.SIGKILL)
        if phase == "dcp" and step == config["kill_step"]:
            import torch.distributed.checkpoint as dcp

            dcp.save({key: LoaderCheckpoint(loader) for key, loader in every.items()},
                     checkpoint_id=str(out / "dcp"))
            torch.save({f"{key}_ids": own for key, own in zip(NAMES, ids, strict=True)},
                       out / f"run-rank{rank}.pt")
            break
        if phase == "run":
            save(out / f"run-rank{rank}.pt", record_of(every, ids))
    if phase in ("resume", "dcp-resume"):
        record = {f"{key}_ids": own for key, own in zip(NAMES, ids, strict=True)}
        record.update({f"{key}_batches": n for key, n in zip(NAMES, batches, strict=True)})
        torch.save(record, out / f"resume-rank{rank}.pt")
    for loader in every.values():
        loader.close()


def record_of(every, ids):
    """What a rank saves after a step: every loader's state and the ids delivered."""
    record = {key: loader.state_dict() for key, loader in every.items()}
    record.update({f"{key}_ids": list(own) for key, own in zip(NAMES, ids, strict=True)})
    return record


def main():
    config = json.loads(sys.argv[1])
    dist.init_process_group("gloo")
    run(config, dist.get_rank(), dist.get_world_size(), config["phase"])
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
