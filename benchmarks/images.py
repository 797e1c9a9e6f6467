"""Ours vs torch on images: JPEG files to normalised NCHW batches.

Two chains over an ImageNet-like folder of real photographs
(``dataloader._images.samples.sample_image_folder(photographs="installed")``:
2,000 JPEGs of 400-500 x 300-375 pixels at quality 90, in 10 classes, cut
and downscaled from the camera photographs of two Debian wallpaper packages,
which ``make bench`` installs; scikit-image's smaller photographs when they
are absent), batches of 64 float32 ``(64, 3, 224, 224)`` tensors, 2 workers:

* ``train`` -- decode, RandomResizedCrop(224), random horizontal flip,
  to float, normalise, CHW; shuffled.
* ``eval``  -- decode, Resize(256), CenterCrop(224), to float, normalise, CHW.

``dataloader`` runs the chain as ``transform=`` on its worker threads and
collates with ``ImageCollator``; the training loop takes each batch with
``torch.from_dlpack``.  ``dataloader, ImageFolder transform`` is the same
chain written as torchvision users write it, ``ImageFolder(root,
transform=chain)`` with no loader transform: the loader runs the folder's
chain on the same fused batch path, and the benchmark shows that the two
ways run at the same speed.  torch runs the torchvision-style Pillow pipeline
(written out here: torchvision is not a dependency) in a map-style dataset
under ``torch.utils.data.DataLoader`` with 2 persistent worker processes.
The raw limit is libjpeg-turbo decode + resize of each file to 224x224 with
``dataloader.kernels`` in a ``ThreadPoolExecutor(2)``, no loader.

Each loader runs in a fresh Python process (which imports torch in both
cases, as a training script would): one warm-up epoch, then ``repeats``
timed epochs.  The processes run in ``rounds`` rounds (ours and torch
alternating, the raw limit after each round); the headline rate is the best
epoch of all rounds, the least disturbed on a shared machine, and the
median epoch is kept beside it.  CPU time per image (user + system, main
process and workers, over the timed epochs) is reported too: unlike the
rates, it hardly depends on what else the machine runs.

Peak RSS is the main process's peak plus, for torch, each worker process's
peak: each is the process's ``VmHWM``, read before the workers shut down
(see ``run_child`` for why not ``ru_maxrss``).  The sum counts the pages
the processes share once per process; the proportional set size (PSS,
shared pages divided among the processes mapping them) summed over the
processes at the end of the run is reported beside it.  The training loop
reads one value per page of every batch, so that the batch memory counts
for torch's main process as it does for ours.

Run ``python benchmarks/images.py`` (``--repeats``, ``--rounds``, ``--no-chart``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

# dataloader is imported inside the functions that use it: the torch child
# process must not load it, or its memory would count as torch's.

RESULTS = Path(__file__).parent / "results"

BATCH_SIZE = 64
NUM_WORKERS = 2
N_IMAGES = 2000
SIZE = 224
RESIZE = 256
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
CHAINS = ("train", "eval")
LIBRARIES = ("dataloader", "dataloader_folder", "torch")
LABELS = {"dataloader": "dataloader", "dataloader_folder": "dataloader, ImageFolder transform",
          "torch": "torch"}
CHART = Path(__file__).parents[1] / "docs" / "images" / "benchmark_images.png"
TARGETS = {"speedup_vs_torch": 3.0, "fraction_of_raw_limit": 0.85, "rss_ratio_vs_torch": 0.5,
           "folder_fraction_of_loader": 0.95}


# --- dataloader -------------------------------------------------------------

def ours_loader(root: Path, chain: str, folder_transform: bool = False):
    from dataloader import DataLoader, ImageCollator, ImageFolder
    from dataloader.transforms import (
        CenterCrop,
        Compose,
        Decode,
        Normalize,
        RandAugment,
        RandomErasing,
        RandomHFlip,
        RandomResizedCrop,
        Resize,
        ToChw,
        ToFloat,
    )

    erasing = []
    if chain == "train":
        steps = [RandomResizedCrop(SIZE), RandomHFlip()]
    elif chain == "randaugment":   # benchmarks/policies.py
        steps = [RandomResizedCrop(SIZE), RandomHFlip(), RandAugment(2, 9)]
        erasing = [RandomErasing(0.25)]
    else:
        steps = [Resize(RESIZE), CenterCrop(SIZE)]
    transform = Compose([Decode("RGB"), *steps, ToFloat(), Normalize(MEAN, STD), ToChw(),
                         *erasing])
    if folder_transform:   # torchvision's way: the chain belongs to the dataset
        return DataLoader(ImageFolder(root, transform=transform), batch_size=BATCH_SIZE,
                          shuffle=chain != "eval", num_workers=NUM_WORKERS, seed=0,
                          collate_fn=ImageCollator())
    return DataLoader(ImageFolder(root), batch_size=BATCH_SIZE, shuffle=chain != "eval",
                      num_workers=NUM_WORKERS, transform=transform, seed=0,
                      collate_fn=ImageCollator())


def ours_batches(loader):
    import torch

    for images, labels in loader:
        yield torch.from_dlpack(images), labels


# --- torch: the torchvision-style Pillow pipeline ----------------------------

class PillowImageFolder:
    """torchvision's ``ImageFolder`` with its usual Pillow transforms, written out.

    The crop parameters are sampled as ``RandomResizedCrop.get_params`` does
    (scale (0.08, 1), ratio (3/4, 4/3), ten tries, then the central crop),
    from torch's generator, which torch seeds per worker; then, as
    torchvision's ``resized_crop`` on a Pillow image, a crop and a resize.
    The ``randaugment`` chain adds ``RandAugment(2, 9)`` after the flip and
    ``RandomErasing(0.25)`` after the normalisation (``_pillow_augment.py``).
    """

    def __init__(self, root: Path, chain: str) -> None:
        import torch

        classes = sorted(p.name for p in Path(root).iterdir() if p.is_dir())
        self.samples = [(path, index) for index, name in enumerate(classes)
                        for path in sorted((Path(root) / name).iterdir())]
        self.chain = chain
        self.mean = torch.tensor(MEAN).view(3, 1, 1)
        self.std = torch.tensor(STD).view(3, 1, 1)

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int):
        from PIL import Image as PILImage

        path, label = self.samples[index]
        with PILImage.open(path) as file:
            image = file.convert("RGB")
        return pillow_tensor(image, self.chain, self.mean, self.std), label


def pillow_tensor(image, chain: str, mean, std):
    """torchvision's transforms of ``chain`` on an RGB Pillow image, as a normalised tensor."""
    import torch
    from PIL import Image as PILImage

    bilinear = PILImage.Resampling.BILINEAR
    if chain != "eval":
        top, left, height, width = random_resized_crop_params(image.height, image.width)
        image = image.crop((left, top, left + width, top + height))
        image = image.resize((SIZE, SIZE), bilinear)
        if torch.rand(1).item() < 0.5:
            image = image.transpose(PILImage.Transpose.FLIP_LEFT_RIGHT)
    else:
        scale = RESIZE / min(image.width, image.height)
        if image.width <= image.height:
            size = (RESIZE, int(image.height * scale))
        else:
            size = (int(image.width * scale), RESIZE)
        image = image.resize(size, bilinear)
        left = round((image.width - SIZE) / 2.0)
        top = round((image.height - SIZE) / 2.0)
        image = image.crop((left, top, left + SIZE, top + SIZE))
    if chain == "randaugment":
        from _pillow_augment import rand_augment, random_erasing

        image = rand_augment(image, 2, 9)
    tensor = torch.from_numpy(np.array(image, np.uint8, copy=True))
    tensor = tensor.permute(2, 0, 1).contiguous().float().div(255)
    tensor = tensor.sub_(mean).div_(std)
    return random_erasing(tensor, 0.25) if chain == "randaugment" else tensor


def random_resized_crop_params(height: int, width: int, scale=(0.08, 1.0),
                               ratio=(3 / 4, 4 / 3)) -> tuple[int, int, int, int]:
    """(top, left, crop height, crop width) as torchvision's ``RandomResizedCrop``."""
    import torch

    area = height * width
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target_area = area * torch.empty(1).uniform_(*scale).item()
        aspect = math.exp(torch.empty(1).uniform_(*log_ratio).item())
        w = round(math.sqrt(target_area * aspect))
        h = round(math.sqrt(target_area / aspect))
        if 0 < w <= width and 0 < h <= height:
            top = int(torch.randint(0, height - h + 1, size=(1,)).item())
            left = int(torch.randint(0, width - w + 1, size=(1,)).item())
            return top, left, h, w
    in_ratio = width / height
    if in_ratio < min(ratio):
        w, h = width, round(width / min(ratio))
    elif in_ratio > max(ratio):
        w, h = round(height * max(ratio)), height
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


def torch_loader(root: Path, chain: str):
    import torch.utils.data

    return torch.utils.data.DataLoader(
        PillowImageFolder(root, chain), batch_size=BATCH_SIZE, shuffle=chain != "eval",
        num_workers=NUM_WORKERS, persistent_workers=True)


# --- one loader in a fresh process ---------------------------------------------

def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def rollup_kib(pid: int) -> dict[str, int]:
    """The process's ``smaps_rollup`` fields in KiB (none once it has ended)."""
    try:
        lines = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
    except OSError:
        return {}
    return {fields[0].rstrip(":"): int(fields[1]) for fields in map(str.split, lines)
            if len(fields) == 3 and fields[2] == "kB"}


def pss_kib(pid: int) -> int:
    return rollup_kib(pid).get("Pss", 0)


def shared_memory_kib() -> int:
    """The machine's shared memory (``Shmem`` in ``/proc/meminfo``) in KiB.

    Pages of a shared-memory file count in a process's PSS only while it maps
    them; a batch in flight between processes may be mapped by none.
    """
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Shmem:"):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads) from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_child(library: str, chain: str, root: Path, repeats: int) -> dict:
    """Time ``repeats`` epochs after a warm-up; CPU time, peak and proportional memory.

    Peaks are ``VmHWM``, the high-water mark of each process's own memory:
    ``ru_maxrss`` would do for the main process only if it were not carried
    over from the parent through fork and exec (Linux keeps it across
    ``execve``), and ``RUSAGE_CHILDREN`` gives the largest child's peak, not
    the sum of the workers' (it would also count the build check the
    editable install runs).
    """
    import multiprocessing

    import torch

    baseline_kib = _status_kib(os.getpid(), "VmHWM")
    ours = library.startswith("dataloader")
    loader = (ours_loader(root, chain, library == "dataloader_folder") if ours
              else torch_loader(root, chain))
    batches = ours_batches if ours else iter

    def epoch() -> int:
        n = 0
        for images, _labels in batches(loader):
            assert images.shape[1:] == (3, SIZE, SIZE) and images.dtype == torch.float32
            # Read one value per 4 KiB page, as a training step reads the
            # whole batch: its pages then count in this process's RSS (torch
            # batches arrive in shared memory that is mapped, not yet read).
            float(images.reshape(-1)[::1024].sum())
            n += images.shape[0]
        return n

    n_images = epoch()   # warm-up: starts torch's persistent workers, warms the page cache
    workers = [p.pid for p in multiprocessing.active_children()]
    pids = [os.getpid(), *workers]
    cpu_start = sum(cpu_seconds(pid) for pid in pids)
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        epoch()
        seconds.append(time.perf_counter() - start)
    cpu = sum(cpu_seconds(pid) for pid in pids) - cpu_start
    worker_peaks_kib = [_status_kib(pid, "VmHWM") for pid in workers]
    pss_total_kib = sum(pss_kib(pid) for pid in pids)
    main_kib = _status_kib(os.getpid(), "VmHWM")
    close = getattr(loader, "close", None)
    if close is not None:
        close()
    return {
        "images": n_images, "epoch_seconds": seconds,
        "cpu_ms_per_image": cpu * 1e3 / (n_images * repeats),
        "peak_rss_mib": (main_kib + sum(worker_peaks_kib)) / 1024,
        "main_peak_rss_mib": main_kib / 1024,
        "worker_peak_rss_mib": [kib / 1024 for kib in worker_peaks_kib],
        "pss_at_end_mib": pss_total_kib / 1024,
        "baseline_rss_mib": baseline_kib / 1024,
    }


def run_fresh(library: str, chain: str, root: Path, repeats: int) -> dict:
    command = [sys.executable, __file__, "--child", library, chain, str(root), str(repeats)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{library} {chain} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- the raw limit -----------------------------------------------------------------

def raw_limit(root: Path, repeats: int) -> tuple[list[float], list[float]]:
    """Images/s and CPU ms per image of read + decode + resize to 224x224 in 2 threads,
    no loader, per pass."""
    from dataloader import kernels
    from dataloader._images.samples import image_paths

    paths = image_paths(root)

    def work(path: Path) -> np.ndarray:
        return kernels.resize(kernels.decode(path.read_bytes(), mode="RGB"), (SIZE, SIZE))

    rates, cpu_ms = [], []
    with ThreadPoolExecutor(max_workers=NUM_WORKERS) as pool:
        list(pool.map(work, paths))
        for _ in range(repeats):
            start, cpu_start = time.perf_counter(), time.process_time()
            list(pool.map(work, paths))
            rates.append(len(paths) / (time.perf_counter() - start))
            cpu_ms.append((time.process_time() - cpu_start) * 1e3 / len(paths))
    return rates, cpu_ms


# --- the comparison ------------------------------------------------------------------

def machine_description() -> dict:
    try:
        system = platform.freedesktop_os_release().get("PRETTY_NAME", platform.system())
    except OSError:
        system = platform.platform()
    from dataloader._cli.measure import machine

    return {**machine(), "os": system}


def versions() -> dict:
    import PIL
    import torch

    import dataloader

    return {"python": platform.python_version(), "dataloader": dataloader.__version__,
            "torch": torch.__version__, "numpy": np.__version__, "Pillow": PIL.__version__}


def summary(runs: list[dict]) -> dict:
    """One library and chain over all rounds: best and median epoch rates, memory."""
    rates = [run["images"] / seconds for run in runs for seconds in run["epoch_seconds"]]
    return {"images_per_s": max(rates), "images_per_s_median": statistics.median(rates),
            "peak_rss_mib": max(run["peak_rss_mib"] for run in runs),
            "pss_at_end_mib": max(run["pss_at_end_mib"] for run in runs),
            "cpu_ms_per_image": min(run["cpu_ms_per_image"] for run in runs), "runs": runs}


def compare(repeats: int, rounds: int = 3, n_images: int = N_IMAGES,
            chart: Path | None = CHART) -> dict:
    """Run every chain and library in ``rounds`` rounds of fresh processes, the limit between.

    The headline rate of each is its best epoch over all rounds (the least
    disturbed on a shared machine); the median epoch is kept beside it.
    """
    from dataloader._cli.measure import print_table, write_json
    from dataloader._images.samples import sample_image_folder

    root = sample_image_folder(n_images, photographs="installed")
    load = [os.getloadavg()]
    runs = {chain: {library: [] for library in LIBRARIES} for chain in CHAINS}
    limit_rates, limit_cpu = [], []
    for round_ in range(rounds):
        for chain in CHAINS:
            for library in LIBRARIES:
                runs[chain][library].append(run_fresh(library, chain, root, repeats))
                load.append(os.getloadavg())
            print(f"  images round {round_ + 1}/{rounds}: {chain} done", flush=True)
        rates, cpu = raw_limit(root, repeats)
        limit_rates += rates
        limit_cpu += cpu
        load.append(os.getloadavg())
    limit = max(limit_rates)
    chains, rows = {}, []
    for chain in CHAINS:
        ours, theirs = summary(runs[chain]["dataloader"]), summary(runs[chain]["torch"])
        folder = summary(runs[chain]["dataloader_folder"])
        chains[chain] = entry = {
            "dataloader": ours, "dataloader_folder": folder, "torch": theirs,
            "folder_fraction_of_loader": folder["images_per_s"] / ours["images_per_s"],
            "folder_fraction_of_loader_medians":
                folder["images_per_s_median"] / ours["images_per_s_median"],
            "speedup_vs_torch": ours["images_per_s"] / theirs["images_per_s"],
            "speedup_vs_torch_medians":
                ours["images_per_s_median"] / theirs["images_per_s_median"],
            "fraction_of_raw_limit": ours["images_per_s"] / limit,
            "fraction_of_raw_limit_medians":
                ours["images_per_s_median"] / statistics.median(limit_rates),
            "cpu_ratio_torch_over_ours": theirs["cpu_ms_per_image"] / ours["cpu_ms_per_image"],
            "rss_ratio_vs_torch": ours["peak_rss_mib"] / theirs["peak_rss_mib"],
            "pss_ratio_vs_torch": ours["pss_at_end_mib"] / theirs["pss_at_end_mib"],
        }
        rows.append([chain, f"{ours['images_per_s']:,.0f}/s",
                     f"{folder['images_per_s']:,.0f}/s ({entry['folder_fraction_of_loader']:.2f}), "
                     f"{folder['cpu_ms_per_image']:.2f} CPU ms",
                     f"{theirs['images_per_s']:,.0f}/s",
                     f"{entry['speedup_vs_torch']:.2f}x", f"{entry['fraction_of_raw_limit']:.2f}",
                     f"{ours['cpu_ms_per_image']:.2f}", f"{theirs['cpu_ms_per_image']:.2f}",
                     f"{entry['cpu_ratio_torch_over_ours']:.2f}x",
                     f"{ours['peak_rss_mib']:,.0f} MiB", f"{theirs['peak_rss_mib']:,.0f} MiB",
                     f"{entry['rss_ratio_vs_torch']:.2f}", f"{entry['pss_ratio_vs_torch']:.2f}"])
    command = "python benchmarks/images.py" + (
        f" --repeats {repeats}" if repeats != 5 else "") + (
        f" --rounds {rounds}" if rounds != 3 else "")
    result = {
        "command": command, "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_description(), "versions": versions(), "images": n_images,
        "image_root": str(root), "photographs": photo_source(root), "batch_size": BATCH_SIZE,
        "num_workers": NUM_WORKERS,
        "epochs_per_run": repeats, "rounds": rounds, "raw_limit_images_per_s": limit,
        "raw_limit_passes_images_per_s": limit_rates,
        "raw_limit_cpu_ms_per_image": min(limit_cpu), "load_average_1_5_15": load,
        "chains": chains, "targets": TARGETS,
    }
    print(f"\n{n_images} JPEGs (400-500 x 300-375, q90, {result['photographs']} photographs) "
          f"-> float32 (64, 3, 224, 224) batches, "
          f"{NUM_WORKERS} workers; best epoch of {rounds} fresh processes x {repeats} epochs; "
          f"raw limit (read + decode + resize, 2 threads, no loader) {limit:,.0f} images/s, "
          f"{min(limit_cpu):.2f} CPU ms/image")
    print_table(["chain", "dataloader", "ImageFolder transform (of loader's)", "torch",
                 "speed-up", "of raw limit", "CPU ms/img ours",
                 "CPU ms/img torch", "CPU ratio", "peak RSS ours",
                 "peak RSS torch", "RSS ratio", "PSS ratio"], rows)
    print("medians of the epochs: " + ", ".join(
        f"{chain} {chains[chain]['dataloader']['images_per_s_median']:,.0f}/s against "
        f"{chains[chain]['torch']['images_per_s_median']:,.0f}/s "
        f"({chains[chain]['speedup_vs_torch_medians']:.2f}x, "
        f"{chains[chain]['fraction_of_raw_limit_medians']:.2f} of the median limit; "
        f"ImageFolder transform {chains[chain]['dataloader_folder']['images_per_s_median']:,.0f}"
        f"/s, {chains[chain]['folder_fraction_of_loader_medians']:.2f} of the loader's)"
        for chain in CHAINS))
    print("CPU ms/img: user + system time of the main process and its workers over the timed "
          "epochs, per image (the lowest run); CPU ratio: torch's over ours")
    print("peak RSS: the main process's peak + each worker process's peak (torch), the "
          "highest over the rounds; PSS: summed over the processes at the end of a run")
    print(f"load average (1 min) during the runs: "
          f"{min(x[0] for x in load):.1f} to {max(x[0] for x in load):.1f} "
          f"on {os.cpu_count()} CPUs")
    print(f"wrote {write_json(RESULTS, 'compare_torch_images', result)}")
    if chart is not None:
        print(f"wrote {draw_chart(result, chart)}")
    return result


def photo_source(root: Path) -> str:
    """Which photographs the folder was cut from (its marker file says)."""
    from dataloader._images.samples import MARKER

    return str(json.loads((root / MARKER).read_text())["photos"])


def draw_chart(result: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chains = result["chains"]
    colors = {"dataloader": "#1f77b4", "dataloader_folder": "#6baed6", "torch": "#ff7f0e"}
    n = len(LIBRARIES)
    fig, (speed, memory) = plt.subplots(1, 2, figsize=(10, 4.6),
                                        gridspec_kw={"width_ratios": [3, 2]})
    x = np.arange(len(CHAINS))
    for k, library in enumerate(LIBRARIES):
        rates = [chains[c][library]["images_per_s"] for c in CHAINS]
        bars = speed.bar(x + (k - (n - 1) / 2) * 0.27, rates, 0.27, label=LABELS[library],
                         color=colors[library])
        speed.bar_label(bars, fmt="{:,.0f}", fontsize=8)
        for j, (key, style) in enumerate([("peak_rss_mib", {}),
                                          ("pss_at_end_mib", {"alpha": 0.45, "hatch": "//"})]):
            values = [chains[c][library][key] for c in CHAINS]
            bars = memory.bar(x + (n * j + k - (2 * n - 1) / 2) * 0.14, values, 0.14,
                              color=colors[library], **style)
            memory.bar_label(bars, fmt="{:,.0f}", fontsize=7)
    limit = result["raw_limit_images_per_s"]
    speed.axhline(limit, color="0.3", linestyle="--", linewidth=1)
    speed.text(len(CHAINS) - 0.55, limit, f"raw limit {limit:,.0f}/s\n(decode + resize,\n"
               "2 threads, no loader)", va="bottom", ha="right", fontsize=8, color="0.3")
    speed.set_ylim(0, max(limit, *(chains[c]["dataloader"]["images_per_s"] for c in CHAINS))
                   * 1.3)
    speed.set_title("images/s, best epoch (higher is better)", fontsize=10)
    memory.set_title("MiB: peak RSS (sum of processes' peaks),\nPSS at the end (hatched)",
                     fontsize=10)
    labels = [f"{c}: {chains[c]['speedup_vs_torch']:.1f}x torch, "
              f"{chains[c]['fraction_of_raw_limit']:.2f} of limit\nCPU per image "
              f"{chains[c]['dataloader']['cpu_ms_per_image']:.2f} ms vs "
              f"{chains[c]['torch']['cpu_ms_per_image']:.2f} ms" for c in CHAINS]
    speed.set_xticks(x, labels, fontsize=8)
    memory.set_xticks(x, [f"{c}\nRSS ratio {chains[c]['rss_ratio_vs_torch']:.2f}, "
                          f"PSS {chains[c]['pss_ratio_vs_torch']:.2f}" for c in CHAINS],
                      fontsize=8)
    speed.legend(fontsize=8, loc="upper left")
    v, m = result["versions"], result["machine"]
    load = result["load_average_1_5_15"]
    fig.suptitle(f"{result['images']:,} JPEGs -> normalised float32 NCHW batches of "
                 f"{result['batch_size']}, {result['num_workers']} workers", fontsize=11)
    fig.text(0.5, 0.012,
             f"{result['command']}   ({result['date'][:16].replace('T', ' ')} UTC)\n"
             f"{m['os']}, {m['machine']}, {m['cpus']} CPUs shared (load average "
             f"{min(x[0] for x in load):.1f} to {max(x[0] for x in load):.1f});  "
             f"Python {v['python']}, dataloader {v['dataloader']}, torch {v['torch']}, "
             f"Pillow {v['Pillow']}, numpy {v['numpy']}",
             ha="center", fontsize=7.5, color="0.25", linespacing=1.5)
    fig.tight_layout(rect=(0, 0.07, 1, 0.95))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed epochs per process")
    parser.add_argument("--rounds", type=int, default=3,
                        help="fresh processes per chain and library")
    parser.add_argument("--no-chart", action="store_true",
                        help=f"do not redraw {CHART.relative_to(CHART.parents[2])}")
    args = parser.parse_args()
    compare(args.repeats, args.rounds, chart=None if args.no_chart else CHART)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        # The fresh process of run_fresh().
        _library, _chain, _root, _repeats = sys.argv[2:6]
        print(json.dumps(run_child(_library, _chain, Path(_root), int(_repeats))))
    else:
        main()
