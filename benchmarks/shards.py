"""Tar shards: ours vs webdataset + torch's DataLoader, raw reads vs ``cat``, memory.

Three measurements over shards of generated photographs (``dataloader._images.samples``,
packed with ``TarWriter``), in one run:

* ``train``  -- shards to normalised float32 NCHW batches of 64 through the
  train chain (RandomResizedCrop(224), RandomHFlip), 2 workers, a shuffle
  buffer of 256: ours is ``TarDataset(fields=("jpg", "cls"))`` with the
  native chain and ``ImageCollator``; the peer is ``webdataset.WebDataset``
  (``.shuffle(256).decode("pil").to_tuple("jpg", "cls")``) with the
  torchvision-style Pillow pipeline of ``images.py`` in torch's DataLoader,
  persistent workers. Best epoch after a warm-up.
* ``raw``    -- every sample of every shard read and grouped, no decoding,
  one stream, against ``cat shards > /dev/null`` (both after a warm-up
  read, so from the page cache), in alternating rounds; medians of the
  rates and of the CPU time (the CPU fraction is the figure a loaded
  machine disturbs least).
* ``memory`` -- peak RSS of a fresh process streaming the shards with a
  shuffle buffer of 256, through the train chain and with no decoding, at
  two shard sizes (8 and 32 MB, so that both workers have shards at either
  size): the peak depends on the buffer and the batches in flight, not on
  the shard size.

Run ``python benchmarks/shards.py`` (``--only raw`` for one measurement);
results, with the load average, go to ``benchmarks/results/shards.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from dataloader._cli.measure import print_table, write_json
from dataloader._images.samples import sample_image_folder

RESULTS = Path(__file__).parent / "results"

BATCH_SIZE = 64
NUM_WORKERS = 2
BUFFER = 256
SIZE = 224
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def make_shards(n_images: int, shard_mb: int) -> list[str]:
    """The generated image folder packed into shards of ``shard_mb`` MB (cached)."""
    from dataloader._images.folder import ImageFolder
    from dataloader.sources import TarWriter

    folder = sample_image_folder(n_images)
    out = folder.with_name(f"{folder.name}-shards-{shard_mb}mb")
    done = out / "complete"
    if done.exists():
        return json.loads(done.read_text())
    out.mkdir(exist_ok=True)
    with TarWriter(str(out / "train-{:04d}.tar"), shard_size=shard_mb * 10**6) as writer:
        for n, (path, label) in enumerate(ImageFolder(folder).samples):
            writer.write({"__key__": f"{n:07d}", "jpg": Path(path).read_bytes(), "cls": label})
    done.write_text(json.dumps(writer.shards))
    return writer.shards


def ours_loader(shards: list[str]):
    from dataloader import DataLoader, ImageCollator
    from dataloader.sources import TarDataset
    from dataloader.transforms import (
        Compose,
        Decode,
        Normalize,
        RandomHFlip,
        RandomResizedCrop,
        ToChw,
        ToFloat,
    )

    train = Compose([Decode("RGB"), RandomResizedCrop(SIZE), RandomHFlip(), ToFloat(),
                     Normalize(MEAN, STD), ToChw()])
    dataset = TarDataset(shards, shuffle_buffer=BUFFER, shuffle_shards=True,
                         fields=("jpg", "cls"))
    return DataLoader(dataset, batch_size=BATCH_SIZE, num_workers=NUM_WORKERS,
                      transform=train, collate_fn=ImageCollator(), seed=0)


class _PillowTrain:
    """The torchvision-style train transform of ``images.py`` on a Pillow image (picklable)."""

    def __call__(self, image):
        import torch
        from images import pillow_tensor

        return pillow_tensor(image, "train", torch.tensor(MEAN).view(3, 1, 1),
                             torch.tensor(STD).view(3, 1, 1))


def theirs_loader(shards: list[str]):
    import torch.utils.data
    import webdataset as wds

    dataset = (wds.WebDataset(shards, shardshuffle=len(shards), nodesplitter=None,
                              workersplitter=wds.split_by_worker, empty_check=False)
               .shuffle(BUFFER).decode("pil").to_tuple("jpg", "cls")
               .map_tuple(_PillowTrain(), int))
    return torch.utils.data.DataLoader(dataset, batch_size=BATCH_SIZE, num_workers=NUM_WORKERS,
                                       persistent_workers=True)


def epoch_rates(make, shards: list[str], repeats: int) -> list[float]:
    import torch

    loader = make(shards)

    def epoch() -> int:
        n = 0
        for images, _ in loader:
            images = images if isinstance(images, torch.Tensor) else torch.from_dlpack(images)
            assert images.shape[1:] == (3, SIZE, SIZE)
            n += images.shape[0]
        return n

    epoch()
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        n = epoch()
        rates.append(n / (time.perf_counter() - start))
    getattr(loader, "close", lambda: None)()
    return rates


def raw_rates(shards: list[str], rounds: int) -> dict[str, list[float]]:
    """MB/s and CPU seconds of reading and grouping every sample, and of ``cat shards > /dev/null``.

    Both read the same files from the page cache (each once before timing);
    the two alternate, each going first in every other round, so that the
    load of the machine falls on both alike: compare medians.
    """
    from dataloader.sources import TarDataset

    def ours() -> None:
        for _sample in TarDataset(shards):
            pass

    def cat() -> None:
        subprocess.run(["cat", *shards], stdout=subprocess.DEVNULL, check=True)

    def cpu(who: int) -> float:
        usage = resource.getrusage(who)
        return usage.ru_utime + usage.ru_stime

    total = sum(os.path.getsize(shard) for shard in shards)
    contenders = {"ours": (ours, resource.RUSAGE_SELF), "cat": (cat, resource.RUSAGE_CHILDREN)}
    figures: dict[str, list[float]] = {f"{name}_{unit}": [] for name in contenders
                                       for unit in ("mb_s", "cpu_s")}
    cat()
    ours()
    for n in range(rounds):
        for name in sorted(contenders, reverse=n % 2 == 1):
            run, who = contenders[name]
            used, start = cpu(who), time.perf_counter()
            run()
            figures[f"{name}_mb_s"].append(total / 1e6 / (time.perf_counter() - start))
            figures[f"{name}_cpu_s"].append(cpu(who) - used)
    return figures


def raw_loader(shards: list[str]):
    from dataloader import DataLoader
    from dataloader.sources import TarDataset

    return DataLoader(TarDataset(shards, shuffle_buffer=BUFFER), batch_size=BATCH_SIZE,
                      num_workers=NUM_WORKERS, collate_fn=len)


def peak_rss_mib(shards: list[str], loader: str) -> float:
    """Peak RSS of a new process streaming ``shards`` through ``ours_loader`` or ``raw_loader``."""
    done = subprocess.run([sys.executable, __file__, "--child", loader, json.dumps(shards)],
                          capture_output=True, text=True, check=True)
    return int(done.stdout.split()[-1]) / 1024


def child(loader: str, shards: list[str]) -> None:
    """Stream ``shards`` through ``loader``; print this process's peak RSS in KiB."""
    for _batch in {"ours_loader": ours_loader, "raw_loader": raw_loader}[loader](shards):
        pass
    with open("/proc/self/status") as status:
        print(next(line for line in status if line.startswith("VmHWM")).split()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3, help="timed epochs of train")
    parser.add_argument("--rounds", type=int, default=15, help="alternating rounds of raw")
    parser.add_argument("--only", choices=["train", "raw", "memory"],
                        help="run one of the three measurements")
    args = parser.parse_args()
    # The default set is about 75 MB: both sizes leave every worker shards to read.
    small, large = make_shards(args.images, 8), make_shards(args.images, 32)
    result: dict = {"images": args.images, "shards": {"8MB": len(small), "32MB": len(large)},
                    "load_average": os.getloadavg()}
    if args.only in (None, "train"):
        train(small, args.repeats, result)
    if args.only in (None, "raw"):
        raw = raw_rates(small, args.rounds)
        median = {name: statistics.median(values) for name, values in raw.items()}
        result["raw"] = {**raw, "fraction_of_cat": median["ours_mb_s"] / median["cat_mb_s"],
                         "cpu_fraction_of_cat": median["cat_cpu_s"] / median["ours_cpu_s"]}
        print_table([f"raw read (median of {args.rounds})", "MB/s", "CPU ms"],
                    [["TarDataset, no decoding", median["ours_mb_s"], 1e3 * median["ours_cpu_s"]],
                     ["cat > /dev/null", median["cat_mb_s"], 1e3 * median["cat_cpu_s"]],
                     ["fraction of cat", result["raw"]["fraction_of_cat"],
                      result["raw"]["cpu_fraction_of_cat"]]])
    if args.only in (None, "memory"):
        memory = {size: {"train": peak_rss_mib(shards, "ours_loader"),
                         "no_decoding": peak_rss_mib(shards, "raw_loader")}
                  for size, shards in (("8MB", small), ("32MB", large))}
        result["peak_rss_mib"] = memory
        print_table(["shard size", "peak RSS MiB, train", "no decoding"],
                    [[k, v["train"], v["no_decoding"]] for k, v in memory.items()])
    print(f"load average at the end: {os.getloadavg()}")
    print(f"results: {write_json(RESULTS, 'shards', result)}")


def train(small: list[str], repeats: int, result: dict) -> None:
    ours = epoch_rates(ours_loader, small, repeats)
    rows = [["train: dataloader TarDataset", max(ours), "1.00"]]
    result["train"] = {"dataloader": ours}
    try:
        theirs = epoch_rates(theirs_loader, small, repeats)
    except ImportError as exc:
        print(f"webdataset + torch skipped: {exc}")
    else:
        result["train"]["webdataset_torch"] = theirs
        rows.append(["train: webdataset + torch", max(theirs), f"{max(theirs) / max(ours):.2f}"])
        result["speedup_vs_webdataset"] = max(ours) / max(theirs)
    print_table(["images/s (best epoch)", "rate", "vs ours"], rows)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], json.loads(sys.argv[3]))
    else:
        main()
