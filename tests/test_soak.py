"""Soak under faults: many epochs in random modes, with failures injected everywhere.

Each epoch draws a mode ``(num_workers, item_concurrency)``, a batch size,
an error policy, and faults: ``__getitem__``, ``transform`` and
``collate_fn`` that raise, items that sleep, corrupt images (decoded with
``dataloader.kernels.decode`` in the transform), early breaks, and loaders
and iterators dropped on other threads. Every delivered batch must be the
expected one, every error of the expected type and of an item of its
batch; at the end no thread or file descriptor is left behind and the
resident memory has stayed within a bound after warm-up.

The short runs are part of ``make test``; ``make soak`` runs the long ones.
The seed is random unless ``SOAK_SEED`` is set, and is printed on failure.
"""

import gc
import io
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image as PILImage

from dataloader import DataLoader, kernels

N_ITEMS = 40
# Resident memory may grow by this much after the warm-up epochs.
RSS_BOUND = 64 << 20
WARM_UP = 10


def soak_seed():
    return int(os.environ.get("SOAK_SEED") or random.SystemRandom().randrange(2**32))


def thread_count():
    return len(os.listdir("/proc/self/task"))


def fd_count():
    return len(os.listdir("/proc/self/fd"))


def rss_bytes():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def settle(count, baseline, seconds=10.0):
    """``count()`` once it is back to ``baseline`` (pools join in the background)."""
    deadline = time.monotonic() + seconds
    while (value := count()) > baseline and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.01)
    return value


def png(value, corrupt):
    buffer = io.BytesIO()
    PILImage.new("RGB", (4, 3), (value, value, value)).save(buffer, "PNG")
    data = buffer.getvalue()
    return data[: len(data) // 2] if corrupt else data


class Faults:
    """One epoch's dataset, transform and collate, with the faults it injects.

    Every injected error carries the index of its item (``error.index``);
    ``expected_errors`` maps an index to the type its item raises.
    """

    def __init__(self, rng, images):
        self.fetch_fail = set(rng.sample(range(N_ITEMS), rng.randint(0, 3)))
        self.transform_fail = set(rng.sample(range(N_ITEMS), rng.randint(0, 3)))
        self.corrupt = {i for i in range(N_ITEMS) if images[i][1]}
        self.collate_fail = set(rng.sample(range(N_ITEMS), rng.randint(0, 2)))
        self.sleeps = {i: rng.choice([0.0, 0.0, 0.0, 0.0005, 0.002]) for i in range(N_ITEMS)}
        self.images = images

    def __len__(self):
        return N_ITEMS

    def __getitem__(self, index):
        if self.sleeps[index]:
            time.sleep(self.sleeps[index])
        if index in self.fetch_fail:
            error = KeyError(index)
            error.index = index
            raise error
        return self.images[index][0]

    def transform(self, index, data):
        if index in self.transform_fail:
            error = RuntimeError(f"transform of {index}")
            error.index = index
            raise error
        try:
            pixels = kernels.decode(data)
        except ValueError as error:
            error.index = index
            raise
        return index, pixels[:2, :2, 0]

    def collate(self, items):
        indices = [index for index, _ in items]
        failing = sorted(self.collate_fail.intersection(indices))
        if failing:
            error = ZeroDivisionError(f"collate of {indices}")
            error.index = failing[0]
            raise error
        return np.array(indices), np.stack([pixels for _, pixels in items])

    def item_error(self, index):
        """The type of error item ``index`` raises in fetch or transform, or None."""
        if index in self.fetch_fail:
            return KeyError
        if index in self.transform_fail:
            return RuntimeError
        if index in self.corrupt:
            return ValueError
        return None


def check_epoch(rng, faults, mode, on_error):
    """Run one epoch (maybe cut short) and check everything it delivered."""
    num_workers, item_concurrency = mode
    batch_size = rng.randint(1, 7)
    prefetch_factor = rng.randint(1, 3)
    if num_workers == 0 and item_concurrency == 1:
        prefetch_factor = None  # nothing loads ahead: torch's ValueError
    loader = DataLoader(
        faults, batch_size=batch_size, num_workers=num_workers,
        item_concurrency=item_concurrency, prefetch_factor=prefetch_factor,
        transform=faults.transform, collate_fn=faults.collate, on_error=on_error,
    )
    batches = [list(range(start, min(start + batch_size, N_ITEMS)))
               for start in range(0, N_ITEMS, batch_size)]
    stop = rng.randrange(len(batches) + 1) if rng.random() < 0.3 else len(batches)
    it = iter(loader)
    for position, indices in enumerate(batches[:stop]):
        failing = {i: faults.item_error(i) for i in indices if faults.item_error(i)}
        if on_error == "skip":
            indices = [i for i in indices if i not in failing]
            failing = {}
        if not indices:
            continue  # a batch whose every item was skipped is passed over
        if not failing and faults.collate_fail.intersection(indices):
            failing = {min(faults.collate_fail.intersection(indices)): ZeroDivisionError}
        try:
            got_indices, pixels = next(it)
        except (KeyError, RuntimeError, ValueError, ZeroDivisionError) as error:
            index = getattr(error, "index", None)
            assert index in failing, (position, indices, failing, error)
            assert type(error) is failing[index], (position, index, error)
            if faults.item_error(index):
                # Whichever way and on however many threads the items load,
                # the batch raises its lowest failing item's error.
                assert index == min(failing), (indices, error)
            continue
        assert not failing, (position, indices, failing)
        assert got_indices.tolist() == indices, (position, got_indices, indices)
        np.testing.assert_array_equal(pixels, np.broadcast_to(
            np.array(indices, np.uint8)[:, None, None], (len(indices), 2, 2)))
    if stop == len(batches):
        with pytest.raises(StopIteration):
            next(it)
    # Dispose of the loader: here, on another thread, or by close().
    how = rng.choice(["drop", "thread", "close"])
    if how == "close":
        loader.close()
    elif how == "thread":
        held = [loader, it]
        del loader, it
        dropper = threading.Thread(target=held.clear)
        dropper.start()
        dropper.join()


MODES = [(0, 1), (0, 2), (0, 4), (1, 1), (2, 1), (3, 1), (2, 2), (2, 4), (1, 3)]


def run_soak(seed, epochs):
    rng = random.Random(seed)
    images = [(png(i, corrupt), corrupt) for i in range(N_ITEMS)
              for corrupt in [rng.random() < 0.08]]
    gc.collect()
    threads, fds = thread_count(), fd_count()
    warm_rss = None
    for epoch in range(epochs):
        if epoch == WARM_UP:
            gc.collect()
            warm_rss = rss_bytes()
        faults = Faults(rng, images)
        mode = rng.choice(MODES)
        on_error = rng.choice(["raise", "raise", "skip"])
        try:
            check_epoch(rng, faults, mode, on_error)
        except BaseException as exc:
            exc.add_note(f"soak epoch {epoch}, mode {mode}, on_error={on_error!r}")
            raise
    assert settle(thread_count, threads) <= threads, "threads left behind"
    assert settle(fd_count, fds) <= fds, "file descriptors left behind"
    if warm_rss is not None:
        gc.collect()
        growth = rss_bytes() - warm_rss
        assert growth < RSS_BOUND, f"resident memory grew by {growth >> 20} MiB after warm-up"


@pytest.mark.parametrize(
    "epochs", [pytest.param(60, id="short"), pytest.param(600, id="long", marks=pytest.mark.soak)]
)
def test_soak_under_faults(epochs):
    seed = soak_seed()
    try:
        run_soak(seed, epochs)
    except BaseException as exc:
        print(f"soak seed: {seed} (rerun with SOAK_SEED={seed})")
        exc.add_note(f"soak seed {seed}: rerun with SOAK_SEED={seed}")
        raise


@pytest.mark.parametrize(
    "rounds", [pytest.param(12, id="short"), pytest.param(150, id="long", marks=pytest.mark.soak)]
)
def test_soak_keyboard_interrupts(rounds):
    """Ctrl-C delivered while the consumer waits, in a fresh interpreter."""
    seed = soak_seed()
    script = Path(__file__).with_name("soak_interrupts.py")
    result = subprocess.run(
        [sys.executable, str(script), str(seed), str(rounds)],
        capture_output=True, text=True, timeout=120 + rounds * 2,
    )
    assert result.returncode == 0, (
        f"soak seed {seed} (rerun with SOAK_SEED={seed})\n{result.stdout}\n{result.stderr}"
    )
    assert "interrupts delivered" in result.stdout
