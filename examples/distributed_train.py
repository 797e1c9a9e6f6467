"""Data-parallel training with one process per rank: sampler, streams, resume.

One machine, two processes on CPU (gloo)::

    python -m torch.distributed.run --standalone --nproc_per_node=2 \\
        examples/distributed_train.py --epochs 3

Two machines with 4 processes each: run on every machine, with its own
``--node_rank`` (0 on the machine at MASTER_ADDR)::

    python -m torch.distributed.run --nnodes=2 --nproc_per_node=4 \\
        --node_rank=0 --master_addr=10.0.0.1 --master_port=29500 \\
        examples/distributed_train.py --epochs 3 --checkpoint /shared/ckpt.json

Interrupt it (Ctrl-C) and run the same command again: it resumes from the
last checkpoint (written every ``--checkpoint-every`` batches and at the
end of each epoch) at the batch after the last one trained on before it,
with the same batches an uninterrupted run would have seen from there. ``--stream`` trains from a
streaming dataset split with ``shard`` instead of a map-style dataset.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from dataloader import DataLoader, Dataset, DistributedSampler, IterableDataset, item_seed, shard

N_SAMPLES, N_FEATURES = 4096, 16


class Regression(Dataset):
    """Samples of y = x . w + noise, generated from the index (no files needed)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.weights = np.random.default_rng(0).normal(size=N_FEATURES).astype(np.float32)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> tuple[np.ndarray, np.float32]:
        rng = np.random.default_rng(index)
        x = rng.normal(size=N_FEATURES).astype(np.float32)
        return x, np.float32(x @ self.weights + 0.01 * rng.normal())


class RegressionStream(IterableDataset):
    """The same samples as a stream (as lines of a file would be)."""

    def __init__(self, n: int) -> None:
        self.items = Regression(n)

    def __iter__(self):
        return (self.items[index] for index in range(len(self.items)))


def build_loader(args: argparse.Namespace, seed: int) -> DataLoader:
    if args.stream:
        # Each rank keeps every world_size-th sample; its workers split that again.
        # equal_batches stops every rank at the shortest rank's batch count.
        stream = shard(RegressionStream(N_SAMPLES), dist.get_rank(), dist.get_world_size())
        return DataLoader(stream, batch_size=args.batch_size, num_workers=args.workers,
                          equal_batches=True)
    dataset = Regression(N_SAMPLES)
    sampler = DistributedSampler(dataset, seed=seed)  # rank and world size from torch.distributed
    return DataLoader(dataset, batch_size=args.batch_size, sampler=sampler,
                      num_workers=args.workers, transform=jitter(seed))


def jitter(seed: int):
    """A random augmentation, reproducible per (seed, epoch, index) even after a resume."""
    epoch = {"value": 0}

    def transform(index: int, item):
        x, y = item
        rng = np.random.default_rng(item_seed(seed, epoch["value"], index))
        return x + rng.normal(scale=0.01, size=x.shape).astype(np.float32), y

    transform.epoch = epoch
    return transform


def save(path: Path, model: torch.nn.Module, loader: DataLoader) -> None:
    """Rank 0 writes the checkpoint; every rank's loader is in the same position."""
    if dist.get_rank() != 0:
        return
    state = {
        "model": {k: v.tolist() for k, v in model.state_dict().items()},
        "loader": loader.state_dict(),
    }
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(state))
    os.replace(temporary, path)


def load(path: Path, model: torch.nn.Module, loader: DataLoader) -> None:
    if not path.exists():
        return
    state = json.loads(path.read_text())
    model.load_state_dict({k: torch.tensor(v) for k, v in state["model"].items()})
    loader.load_state_dict(state["loader"])
    print(f"rank {dist.get_rank()}: resuming epoch {state['loader']['epoch']} "
          f"at batch {state['loader']['batches']}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--checkpoint", type=Path, default=Path("distributed_train.json"))
    parser.add_argument("--checkpoint-every", type=int, default=20, help="batches")
    args = parser.parse_args()

    dist.init_process_group("gloo")  # "nccl" on GPUs
    torch.manual_seed(args.seed)
    model = torch.nn.Linear(N_FEATURES, 1)
    # DistributedDataParallel averages gradients across ranks at every step.
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
    loader = build_loader(args, args.seed)
    load(args.checkpoint, model, loader)

    # After a resume, loader.epoch is the interrupted epoch (or the next one).
    for epoch in range(loader.epoch, args.epochs):
        if isinstance(loader.sampler, DistributedSampler):
            loader.sampler.set_epoch(epoch)  # as with torch; the loader would also do it
        if loader.transform is not None:
            loader.transform.epoch["value"] = epoch
        epoch_loss, steps = 0.0, 0
        for x, y in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(
                ddp(torch.from_numpy(x)).squeeze(1), torch.from_numpy(y))
            loss.backward()
            optimizer.step()
            epoch_loss += loss.item()
            steps += 1
            if steps % args.checkpoint_every == 0:
                save(args.checkpoint, model, loader)
        save(args.checkpoint, model, loader)
        figures = loader.stats()
        print(f"rank {dist.get_rank()} epoch {epoch}: {steps} steps, mean loss "
              f"{epoch_loss / max(steps, 1):.4f}, waited {figures['wait']['seconds']:.2f} s, "
              f"fetched {figures['fetch']['count']} items", flush=True)

    loader.close()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
