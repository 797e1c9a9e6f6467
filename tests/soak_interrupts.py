"""Ctrl-C (SIGINT) delivered while the consumer waits in ``next()``; run by test_soak.py.

Usage: ``python soak_interrupts.py SEED ROUNDS``. Each round iterates a
loader in a random mode while a timer thread sends SIGINT to the main
thread (``signal.pthread_kill`` or ``os.kill``) at a random moment. The
iterator must stay usable after each ``KeyboardInterrupt``: the batches
received are the expected ones in order, none twice, and at most one per
interrupt is missing (an interrupt landing outside ``next()`` can lose the
batch it had just returned; on the direct path it loses the batch it was
loading). Exits non-zero on any violation.
"""

import faulthandler
import gc
import os
import random
import signal
import sys
import threading
import time

from dataloader import DataLoader

MODES = [(0, 1), (0, 4), (1, 1), (2, 1), (2, 4)]


class Slow:
    def __init__(self, n, delay):
        self.n = n
        self.delay = delay

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        time.sleep(self.delay)
        return index


def interrupt_later(rng, main, go):
    """A thread that sends SIGINT a random moment after ``go`` is set."""
    delay = rng.uniform(0.001, 0.05)
    use_kill = rng.random() < 0.5

    def fire():
        go.wait()
        time.sleep(delay)
        if use_kill:
            os.kill(os.getpid(), signal.SIGINT)
        else:
            signal.pthread_kill(main, signal.SIGINT)

    thread = threading.Thread(target=fire)
    thread.start()
    return thread


def run_round(rng):
    num_workers, item_concurrency = rng.choice(MODES)
    n, batch_size = rng.randint(8, 24), rng.randint(1, 4)
    loader = DataLoader(Slow(n, rng.choice([0.001, 0.005, 0.01])), batch_size=batch_size,
                        num_workers=num_workers, item_concurrency=item_concurrency)
    expected = [list(range(s, min(s + batch_size, n))) for s in range(0, n, batch_size)]
    received, interrupts = [], 0
    it = iter(loader)
    go = threading.Event()
    main = threading.main_thread().ident
    timers = [interrupt_later(rng, main, go) for _ in range(rng.randint(1, 3))]
    go.set()
    # One step at a time, every step inside the one try: an interrupt landing
    # anywhere, between two steps too, is counted (outside such a try, as when
    # the timers were joined after the loop, it would end the script).
    stage, joined, grace = "iterate", 0, 0
    while stage != "done":
        try:
            if stage == "iterate":
                try:
                    received.append(next(it).tolist())
                except StopIteration:
                    stage = "join"
            elif stage == "join" and joined < len(timers):
                timers[joined].join()
                joined += 1
            elif grace < 20:
                # A signal sent with os.kill may have gone to another thread,
                # whose C handler only flags it: the main thread raises it at
                # a bytecode boundary, soon but not at once on a loaded machine.
                stage = "grace"
                time.sleep(0.005)
                grace += 1
            else:
                stage = "done"
        except KeyboardInterrupt:
            interrupts += 1
    positions = [expected.index(batch) for batch in received]
    assert positions == sorted(set(positions)), (received, expected)
    assert len(expected) - len(received) <= interrupts, (received, expected, interrupts)
    loader.close()
    return interrupts


def main(seed, rounds):
    # KeyboardInterrupt even when started with SIGINT ignored (nohup, some CI
    # runners): Python would keep the inherited SIG_IGN.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # A hang prints every thread's stack instead of timing out silently.
    faulthandler.dump_traceback_later(60 + rounds, exit=True)
    rng = random.Random(seed)
    baseline = len(os.listdir("/proc/self/task"))
    delivered = sum(run_round(rng) for _ in range(rounds))
    gc.collect()
    deadline = time.monotonic() + 10
    while len(os.listdir("/proc/self/task")) > baseline and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(os.listdir("/proc/self/task")) <= baseline, "threads left behind"
    print(f"{rounds} rounds, {delivered} interrupts delivered")


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
