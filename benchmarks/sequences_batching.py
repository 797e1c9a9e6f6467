"""Sequence batching: packing against Grain's, and the bucketed sampler's padding waste.

The documents' lengths come from text found on this machine: every Python
module of the standard library and every text file under
``/usr/share/doc``, counted in word and punctuation tokens (``\\w+`` and
each other non-space character, about what a subword tokenizer makes of
English and code), each document cut into pieces of ``seq_len`` as a
packer does, resampled to the sizes below.

- Packing into ``seq_len=2048``: ``PackedDataset`` (best fit and first fit
  over a window of ``WINDOW`` documents) against Grain's
  ``BestFitPackIterDataset`` and ``FirstFitPackIterDataset`` given as many
  bins as those documents fill: the padding fraction of the rows and rows
  per second, iterating the whole stream on one thread.
- The bucketed sampler at a token budget: the padding fraction of its
  batches against sorting the whole epoch by length, and against batches
  of items drawn at random.

Run with ``python benchmarks/sequences_batching.py``; JSON into
``benchmarks/results/sequences_batching.json``.
"""

from __future__ import annotations

import argparse
import re
import sysconfig
import time
from pathlib import Path

import numpy as np

from dataloader import BucketBatchSampler, PackedDataset
from dataloader._cli.measure import print_table, write_json

try:
    from _common import load_average
except ImportError:  # run as a module: python -m benchmarks.sequences_batching
    from benchmarks._common import load_average

RESULTS = Path(__file__).parent / "results"
SEQ_LEN = 2048
WINDOW = 1024
DOCUMENTS = 20_000
ITEMS = 1_000_000
BUDGETS = (16_384, 65_536)
_TOKEN = re.compile(r"\w+|[^\w\s]")


def text_lengths(seq_len: int) -> np.ndarray:
    """Token counts of the text files on this machine, cut into pieces of ``seq_len``."""
    roots = [Path(sysconfig.get_paths()["stdlib"]), Path("/usr/share/doc")]
    counts = []
    for root in roots:
        for path in root.rglob("*"):
            if path.suffix not in (".py", ".txt", ".md", ".rst", "") or not path.is_file():
                continue
            try:
                text = path.read_text(errors="strict")
            except (OSError, UnicodeDecodeError):
                continue
            tokens = len(_TOKEN.findall(text))
            counts += [seq_len] * (tokens // seq_len) + ([tokens % seq_len] if tokens % seq_len
                                                         else [])
    return np.array(counts, dtype=np.int64)


def padding(rows: int, tokens: int, seq_len: int) -> float:
    return 1 - tokens / (rows * seq_len)


def ours(documents: list[np.ndarray], method: str) -> tuple[int, float]:
    start = time.perf_counter()
    rows = sum(1 for _ in PackedDataset(documents, SEQ_LEN, window=WINDOW, method=method))
    return rows, time.perf_counter() - start


def grains(documents: list[np.ndarray], bins: int, best_fit: bool) -> tuple[int, float]:
    import grain
    from grain import experimental

    packer = (experimental.BestFitPackIterDataset if best_fit
              else experimental.FirstFitPackIterDataset)
    source = grain.MapDataset.source([{"tokens": d} for d in documents]).to_iter_dataset()
    packed = packer(source, length_struct={"tokens": SEQ_LEN}, num_packing_bins=bins,
                    shuffle_bins=False)
    start = time.perf_counter()
    rows = sum(1 for _ in packed)
    return rows, time.perf_counter() - start


def packing_rows(lengths: np.ndarray, rng: np.random.Generator) -> list[list]:
    drawn = rng.choice(lengths, DOCUMENTS)
    documents = [np.arange(n, dtype=np.int32) + 1 for n in drawn.tolist()]
    tokens = int(drawn.sum())
    # Grain's window is in bins: as many as WINDOW documents fill.
    bins = max(round(WINDOW * drawn.mean() / SEQ_LEN), 1)
    table = []
    for name, run in (("dataloader best fit", lambda: ours(documents, "best_fit")),
                      ("dataloader first fit", lambda: ours(documents, "first_fit")),
                      (f"grain best fit ({bins} bins)", lambda: grains(documents, bins, True)),
                      (f"grain first fit ({bins} bins)", lambda: grains(documents, bins, False))):
        rows, seconds = run()
        table.append([name, rows, f"{padding(rows, tokens, SEQ_LEN):.3%}", rows / seconds])
    return table


def waste(batches: list, lengths: np.ndarray) -> float:
    padded = sum(len(batch) * int(lengths[batch].max()) for batch in batches)
    return 1 - int(lengths[np.concatenate(batches)].sum()) / padded


def sampler_rows(lengths: np.ndarray, rng: np.random.Generator) -> list[list]:
    items = rng.choice(lengths, ITEMS)
    table = []
    for budget in BUDGETS:
        start = time.perf_counter()
        batches = list(BucketBatchSampler(items, max_tokens=budget))
        seconds = time.perf_counter() - start
        bucketed = [np.array(batch) for batch in batches]
        whole = [np.array(batch) for batch in BucketBatchSampler(
            items, max_tokens=budget, window=len(items), shuffle=False)]
        drawn = np.array_split(rng.permutation(len(items)), len(bucketed))
        shares = [waste(batches, items) for batches in (bucketed, whole, drawn)]
        table.append([budget, len(bucketed), *(f"{share:.2%}" for share in shares),
                      f"{shares[0] - shares[1]:.2%}", seconds])
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    rng = np.random.default_rng(0)
    lengths = text_lengths(SEQ_LEN)
    print(f"{len(lengths):,} documents of text on this machine: median "
          f"{int(np.median(lengths))} tokens, mean {lengths.mean():.0f}; load {load_average()}")
    packing = packing_rows(lengths, rng)
    print(f"\nPacking {DOCUMENTS:,} documents into rows of {SEQ_LEN} (window {WINDOW}), "
          "one thread")
    print_table(["packer", "rows", "padding", "rows/s"], packing)
    for ours_row, grains_row in ((packing[0], packing[2]), (packing[1], packing[3])):
        print(f"{ours_row[0]}: rows/s {ours_row[3] / grains_row[3]:.1f}x Grain's, "
              f"{ours_row[1] / grains_row[1]:.4f}x its rows for the same tokens")
    print(f"load {load_average()}")
    sampler = sampler_rows(lengths, rng)
    print(f"\nBucketBatchSampler over {ITEMS:,} items: padding of its batches")
    print_table(["max_tokens", "batches", "bucketed", "whole sort", "random", "difference",
                 "epoch's batches, s"], sampler)
    print(f"load {load_average()}")
    write_json(RESULTS, "sequences_batching", {
        "load_average": load_average(),
        "packing": [dict(zip(["packer", "rows", "padding", "rows_per_second"], row,
                             strict=True)) for row in packing],
        "sampler": [dict(zip(["max_tokens", "batches", "bucketed", "whole_sort", "random",
                              "difference", "seconds"], row, strict=True)) for row in sampler],
    })


if __name__ == "__main__":
    main()
