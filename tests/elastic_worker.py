"""One rank of a torchrun job stopped and resized (run by test_elastic_torchrun.py, not
collected by pytest).

Usage: python -m torch.distributed.run --standalone --nproc_per_node=R elastic_worker.py
CONFIG_JSON

Two loaders run in step, as a training loop takes its batches: a map-style
dataset under ``DistributedSampler`` and a stream (``shard`` of an
``interleave`` of tar shards with a shuffle buffer and a plain stream).
After every step each rank saves, with ``torch.save`` to its own file
(written whole, then renamed), both loaders' ``state_dict()`` and the
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
    return mapped, stream


def save(path, record):
    partial = path.with_suffix(".partial")
    torch.save(record, partial)
    os.replace(partial, path)


def run(config, rank, ranks, phase):
    out = Path(config["directory"])
    kinds = config["kinds"][0 if phase == "run" else 1]
    mapped, stream = loaders(config, rank, ranks, kinds)
    if phase == "resume":
        records = [torch.load(path, weights_only=False)
                   for path in sorted(out.glob("run-rank*.pt"))]
        for loader, key in ((mapped, "map"), (stream, "stream")):
            loader.load_state_dict(merge_states([record[key] for record in records]))
    elif phase == "dcp-resume":
        import torch.distributed.checkpoint as dcp

        state = {"map": LoaderCheckpoint(mapped), "stream": LoaderCheckpoint(stream)}
        dcp.load(state, checkpoint_id=str(out / "dcp"))
    if phase == "run":  # every rank has a state before any is killed
        save(out / f"run-rank{rank}.pt", {"map": mapped.state_dict(),
                                          "stream": stream.state_dict(),
                                          "map_ids": [], "stream_ids": []})
        dist.barrier()
    iterators = [iter(mapped), iter(stream)]
    ids = [[], []]
    batches = [0, 0]
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

            dcp.save({"map": LoaderCheckpoint(mapped), "stream": LoaderCheckpoint(stream)},
                     checkpoint_id=str(out / "dcp"))
            torch.save({"map_ids": ids[0], "stream_ids": ids[1]}, out / f"run-rank{rank}.pt")
            break
        if phase == "run":
            save(out / f"run-rank{rank}.pt", {"map": mapped.state_dict(),
                                              "stream": stream.state_dict(),
                                              "map_ids": list(ids[0]),
                                              "stream_ids": list(ids[1])})
    if phase in ("resume", "dcp-resume"):
        torch.save({"map_ids": ids[0], "stream_ids": ids[1], "map_batches": batches[0],
                    "stream_batches": batches[1]}, out / f"resume-rank{rank}.pt")
    mapped.close()
    stream.close()


def main():
    config = json.loads(sys.argv[1])
    dist.init_process_group("gloo")
    run(config, dist.get_rank(), dist.get_world_size(), config["phase"])
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
