"""One rank of a torchrun job (run by test_distributed.py, not collected by pytest).

Usage: python -m torch.distributed.run --standalone --nproc_per_node=2
distributed_worker.py {map,stream,stream-unsized,tar} OUTPUT_DIR

Each rank iterates its loader for two epochs, the ranks all_gather what
they saw, and rank 0 checks disjointness, cover and equal batch counts
(and, for tar shards of uneven sizes in OUTPUT_DIR, equal sample counts),
then writes "ok" to OUTPUT_DIR/result.txt.
"""

import sys
from itertools import chain
from pathlib import Path

import torch.distributed as dist

from dataloader import DataLoader, DistributedSampler, IterableDataset, shard

# Odd, and with batch_size=5 the shards' batch counts differ (11 and 10).
N = 101


class Unsized(IterableDataset):
    """A stream without __len__, shorter on higher ranks (as files of uneven sizes are)."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))


def build(scenario, output):
    if scenario == "tar":
        from dataloader.sources import TarDataset

        shards = sorted(str(path) for path in output.glob("*.tar"))
        dataset = TarDataset(shards, shuffle_shards=True, shuffle_buffer=4, seed=1).shard()
        return DataLoader(dataset, batch_size=4, num_workers=2, equal_batches=True,
                          transform=lambda position, sample: int(sample["cls"]))
    if scenario == "map":
        return DataLoader(list(range(N)), batch_size=8, num_workers=2,
                          sampler=DistributedSampler(range(N), seed=3))
    if scenario == "stream":
        return DataLoader(shard(range(N), dist.get_rank(), dist.get_world_size()),
                          batch_size=5, num_workers=2, equal_batches=True)
    rank, world = dist.get_rank(), dist.get_world_size()
    return DataLoader(shard(Unsized(N - 17 * rank), rank, world),
                      batch_size=8, num_workers=2, equal_batches=True)


def check(scenario, gathered):
    for epoch in range(2):
        seen = [ranks[epoch] for ranks in gathered]
        counts = {len(batches) for batches in seen}
        assert len(counts) == 1, f"batch counts differ: {counts}"
        items = [list(chain.from_iterable(batches)) for batches in seen]
        if scenario == "tar":
            samples = {len(rank_items) for rank_items in items}
            assert len(samples) == 1, f"sample counts differ: {samples}"
        if scenario == "map":
            everything = list(chain.from_iterable(items))
            assert set(everything) == set(range(N)), "the ranks do not cover the dataset"
            assert len(everything) - len(set(everything)) == 1, "more than the padding repeats"
        else:
            for a in range(len(items)):
                for b in range(a + 1, len(items)):
                    assert not set(items[a]) & set(items[b]), "ranks share items"
            for rank_items in items:
                assert len(rank_items) == len(set(rank_items)), "an item repeats on a rank"
    if scenario == "map":
        assert gathered[0][0] != gathered[0][1], "the epochs have the same order"


def main():
    scenario, output = sys.argv[1], Path(sys.argv[2])
    dist.init_process_group("gloo")
    loader = build(scenario, output)
    epochs = [[batch.tolist() for batch in loader] for _ in range(2)]
    gathered = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, epochs)
    if dist.get_rank() == 0:
        check(scenario, gathered)
        output.joinpath("result.txt").write_text("ok")
    loader.close()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
