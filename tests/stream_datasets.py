"""Iterable datasets shared by the streaming tests (threads, processes, interleaving,
torch's dataset utilities): streams split between workers as torch users split them."""

from dataloader import IterableDataset, get_worker_info


class Range(IterableDataset):
    """Items ``offset .. offset + n - 1``, split between workers by worker info as torch
    users do; the item ``failing_at`` raises KeyError instead."""

    def __init__(self, n, failing_at=None, offset=0):
        self.n = n
        self.failing_at = failing_at
        self.offset = offset

    def __len__(self):
        return self.n

    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        for value in range(self.offset + start, self.offset + self.n, step):
            if value == self.failing_at:
                raise KeyError(f"item {value} is broken")
            yield value


class Resumable:
    """An iterator over ``items`` with ``state_dict`` / ``load_state_dict``."""

    def __init__(self, items):
        self.items, self.next = list(items), 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.next >= len(self.items):
            raise StopIteration
        self.next += 1
        return self.items[self.next - 1]

    def state_dict(self):
        return {"next": self.next}

    def load_state_dict(self, state):
        self.next = state["next"]


class Uneven(IterableDataset):
    """Worker w streams 2 * (w + 1) items (w + 1 batches of 2), resumably: a plain torch
    ``IterableDataset``, delivered by turn under ``in_order``. Worker 0 first waits for
    ``hold`` (an event, a thread's or a process's) when given one."""

    def __init__(self, hold=None):
        self.hold = hold

    def __iter__(self):
        info = get_worker_info()
        if info.id == 0 and self.hold is not None:
            self.hold.wait(30)
        return Resumable(range(info.id * 100, info.id * 100 + 2 * (info.id + 1)))


# Uneven's batches with 3 workers, delivered by turn.
BY_TURN = [[0, 1], [100, 101], [200, 201], [102, 103], [202, 203], [204, 205]]
