"""Sequence sources: Parquet token rows vs ``datasets`` + torch, token windows vs a numpy loop.

Two measurements, each against its peer in the same run:

* ``parquet`` -- a Parquet file of tokenised text (``--rows`` rows, 1 M by
  default; each row one line of the Python standard library's sources,
  its UTF-8 bytes as token ids, so the lengths are real text's), read in
  shuffled batches of 256 by 2 workers and padded by the same Python
  collate function: ours is ``ParquetDataset`` in our ``DataLoader``; the
  peer is ``datasets.Dataset.from_parquet`` (its Arrow cache made before
  timing) in torch's ``DataLoader``. Also the same file streamed a row
  group at a time (``ParquetDataset.stream(shuffle=True)``: row groups
  and the rows within each shuffled), and our loader over that same
  ``datasets.Dataset`` (read through its Arrow table); and the native
  pipeline: ``ParquetDataset`` in batches of similar length under a
  token budget about a batch of 256's (``BucketBatchSampler``), padded by
  ``PadCollator``, reading the Parquet file, and again with the row
  groups decoded into ``cache_dir`` before timing (``fill_cache``, as the
  peer's Arrow cache is made before timing). The time from
  ``iter(loader)`` to the first batch (workers started, files opened, the
  row groups it touches decoded), and tokens per second over the
  ``--batches`` batches after it; medians of ``--repeats`` alternating
  runs, each loader's workers stopped before the next starts.
* ``tokens`` -- random windows of 1024 + 1 tokens from a flat ``uint16``
  token file (nanoGPT's layout), batches of 32 as int64 ``(x, y)``: ours is
  ``TokenDataset(stride=1)`` shuffled in our ``DataLoader`` on the calling
  thread; the peer is nanoGPT's ``get_batch`` loop slicing the memmap.

Run ``python benchmarks/sequences_sources.py``; results, with the load
average, go to ``benchmarks/results/sequences_sources.json``.
"""

from __future__ import annotations

import argparse
import statistics
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
from _common import load_average

from dataloader._cli.measure import print_table, write_json

RESULTS = Path(__file__).parent / "results"

BATCH_SIZE = 256
NUM_WORKERS = 2
SEQ_LEN = 1024
WINDOW_BATCH = 32


def text_lines(rows: int) -> list[bytes]:
    """``rows`` non-empty lines of the standard library's sources, repeated as needed."""
    lines: list[bytes] = []
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        lines += [line for line in path.read_bytes().splitlines() if line.strip()]
        if len(lines) >= rows:
            break
    return [lines[i % len(lines)] for i in range(rows)]


def write_parquet(path: Path, rows: int) -> int:
    """A file of ``input_ids`` rows (the lines' bytes), row groups of 64 Ki rows; its tokens."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    lines = text_lines(rows)
    offsets = np.cumsum([0] + [len(line) for line in lines], dtype=np.int32)
    values = np.frombuffer(b"".join(lines), np.uint8).astype(np.int32)
    ids = pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))
    pq.write_table(pa.table({"input_ids": ids}), path, row_group_size=1 << 16)
    return len(values)


def pad(rows: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """The Python padding collate both loaders run: ``(ids, lengths)``, zeros after each row."""
    lengths = np.array([len(row["input_ids"]) for row in rows])
    ids = np.zeros((len(rows), max(lengths.max(), 1)), np.int64)
    for i, row in enumerate(rows):
        ids[i, :lengths[i]] = row["input_ids"]
    return ids, lengths


def timed(loader: Iterable, batches: int) -> tuple[float, float]:
    """Seconds to the first batch, and tokens per second over the ``batches`` after it."""
    start = time.perf_counter()
    iterator = iter(loader)
    next(iterator)
    first = time.perf_counter() - start
    start, tokens = time.perf_counter(), 0
    for _ in range(batches):
        batch = next(iterator)
        lengths = batch["lengths"] if isinstance(batch, dict) else batch[1]
        tokens += int(lengths.sum())
    return first, tokens / (time.perf_counter() - start)


def parquet_loaders(path: Path) -> dict[str, Callable[[], Any]]:
    import datasets
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    import torch.utils.data

    from dataloader import BucketBatchSampler, DataLoader, PadCollator
    from dataloader.sources import ParquetDataset

    table = datasets.Dataset.from_parquet(str(path), cache_dir=str(path.parent / "hf"))
    lengths = pc.list_value_length(pq.read_table(path)["input_ids"]).to_numpy()
    budget = BATCH_SIZE * int(np.mean(lengths))  # about as many tokens as a batch of 256

    def ours() -> Any:
        return DataLoader(ParquetDataset(path), batch_size=BATCH_SIZE, shuffle=True, seed=0,
                          num_workers=NUM_WORKERS, collate_fn=pad)

    def ours_native() -> Any:
        collator = PadCollator(lengths=True)
        sampler = BucketBatchSampler(lengths, max_tokens=budget, padding=collator, seed=0)
        return DataLoader(ParquetDataset(path), batch_sampler=sampler, collate_fn=collator,
                          num_workers=NUM_WORKERS)

    cached = ParquetDataset(path, cache_dir=path.parent / "decoded")
    cached.fill_cache()

    def ours_native_cached() -> Any:
        collator = PadCollator(lengths=True)
        sampler = BucketBatchSampler(lengths, max_tokens=budget, padding=collator, seed=0)
        return DataLoader(ParquetDataset(path, cache_dir=cached.decoded.folder),
                          batch_sampler=sampler, collate_fn=collator, num_workers=NUM_WORKERS)

    def ours_streamed() -> Any:
        return DataLoader(ParquetDataset(path).stream(shuffle=True, seed=0),
                          batch_size=BATCH_SIZE, num_workers=NUM_WORKERS, collate_fn=pad)

    def ours_on_datasets() -> Any:
        return DataLoader(table, batch_size=BATCH_SIZE, shuffle=True, seed=0,
                          num_workers=NUM_WORKERS, collate_fn=pad)

    def theirs() -> Any:
        return torch.utils.data.DataLoader(table, batch_size=BATCH_SIZE, shuffle=True,
                                           num_workers=NUM_WORKERS, collate_fn=pad)

    return {"ParquetDataset, our DataLoader": ours,
            "ParquetDataset, bucketed by a token budget, PadCollator": ours_native,
            "the same, row groups decoded in cache_dir before": ours_native_cached,
            "ParquetDataset.stream, our DataLoader": ours_streamed,
            "datasets.Dataset, our DataLoader": ours_on_datasets,
            "datasets.Dataset, torch DataLoader": theirs}


def parquet(rows: int, batches: int, repeats: int, folder: Path) -> dict[str, Any]:
    path = folder / "tokens.parquet"
    tokens = write_parquet(path, rows)
    makers = parquet_loaders(path)
    firsts: dict[str, list[float]] = {name: [] for name in makers}
    rates: dict[str, list[float]] = {name: [] for name in makers}
    for n in range(repeats):
        for name in sorted(makers, reverse=n % 2 == 1):  # alternate who goes first
            loader = makers[name]()
            first, rate = timed(loader, batches)
            # Torch's iterator joins its workers when dropped; ours lets batches in
            # flight finish in the background, which the next loader timed would share
            # the cores with: close() waits for them.
            getattr(loader, "close", lambda: None)()
            del loader
            firsts[name].append(first)
            rates[name].append(rate)
    median_first = {name: statistics.median(values) for name, values in firsts.items()}
    median_rate = {name: statistics.median(values) for name, values in rates.items()}
    peer = "datasets.Dataset, torch DataLoader"
    print_table(["parquet: padded batches of 256, 2 workers", "first batch ms", "tokens/s",
                 "x peer tokens/s", "x peer first batch"],
                [[name, 1e3 * median_first[name], median_rate[name],
                  median_rate[name] / median_rate[peer], median_first[name] / median_first[peer]]
                 for name in makers])
    return {"rows": rows, "tokens": tokens, "first_batch_s": firsts, "tokens_per_s": rates}


def token_windows(path: Path, batches: int, seed: int) -> tuple[Callable[[], None], ...]:
    from dataloader import DataLoader
    from dataloader.sources import TokenDataset

    loader = DataLoader(TokenDataset(path, SEQ_LEN, stride=1), batch_size=WINDOW_BATCH,
                        shuffle=True, seed=seed)

    def ours() -> None:
        for _ in zip(range(batches), loader, strict=False):
            pass

    data = np.memmap(path, dtype=np.uint16, mode="r")
    rng = np.random.default_rng(seed)

    def loop() -> None:  # nanoGPT's get_batch
        for _ in range(batches):
            ix = rng.integers(len(data) - SEQ_LEN, size=WINDOW_BATCH)
            x = np.stack([data[i:i + SEQ_LEN].astype(np.int64) for i in ix])  # noqa: F841
            y = np.stack([data[i + 1:i + 1 + SEQ_LEN].astype(np.int64) for i in ix])  # noqa: F841

    return ours, loop


def tokens(batches: int, repeats: int, folder: Path) -> dict[str, Any]:
    path = folder / "train.bin"
    # 200 MB of tokens: random windows fall far apart, as in a real corpus.
    np.random.default_rng(0).integers(0, 50_257, 100_000_000, dtype=np.uint16).tofile(path)
    ours, loop = token_windows(path, batches, seed=0)
    contenders = {"TokenDataset, our DataLoader": ours, "nanoGPT get_batch loop": loop}
    rates: dict[str, list[float]] = {name: [] for name in contenders}
    for n in range(repeats):
        for name in sorted(contenders, reverse=n % 2 == 1):
            start = time.perf_counter()
            contenders[name]()
            rates[name].append(batches * WINDOW_BATCH * SEQ_LEN / (time.perf_counter() - start))
    median = {name: statistics.median(values) for name, values in rates.items()}
    peer = median["nanoGPT get_batch loop"]
    print_table([f"tokens: random windows of {SEQ_LEN}, batches of {WINDOW_BATCH}", "tokens/s",
                 "x loop"], [[name, rate, rate / peer] for name, rate in median.items()])
    return {"tokens_per_s": rates}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batches", type=int, default=200, help="batches timed per run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", choices=["parquet", "tokens"])
    args = parser.parse_args()
    result: dict[str, Any] = {"load_average_before": load_average()}
    with tempfile.TemporaryDirectory() as folder:
        if args.only in (None, "parquet"):
            result["parquet"] = parquet(args.rows, args.batches, args.repeats, Path(folder))
        if args.only in (None, "tokens"):
            result["tokens"] = tokens(args.batches, args.repeats, Path(folder))
    result["load_average_after"] = load_average()
    print(f"load average (1, 5, 15 min): before {result['load_average_before']}, "
          f"after {result['load_average_after']}")
    print(f"results: {write_json(RESULTS, 'sequences_sources', result)}")


if __name__ == "__main__":
    main()
