"""The same items through every execution mode, batch for batch against torch.

Hypothesis draws an item structure (``differential_items``: nested dicts,
tuples, lists, namedtuples and dataclasses over Python numbers, strings,
bytes, ``None``, numpy scalars, numpy arrays of every dtype and layout, and
torch tensors), a dataset of such items (map-style, a stream, or a
``shard`` of one) and the loader's options. Every batch the loader
delivers must be what ``torch.utils.data.default_collate`` makes of the
same items, or an error where torch's raises, after the documented
differences (``differential_reference``).

Batches are consumed as a training loop consumes them, each epoch in its
own way: each dropped before the next is taken (so slots and pooled
buffers are reused), the last few held, all held, or converted with
``torch.from_dlpack`` / ``np.asarray`` / ``torch.from_numpy`` with only the
views kept. What is held at the end of an epoch is checked again after the
next epoch, after the loader is closed, and after a second loader resumed
from a ``state_dict`` saved mid-epoch has run. One loader serves three
epochs (its worker processes mostly persistent), so slots, pools and
pinned buffers are reused across epochs.

``make test`` runs a few examples per mode; ``HYPOTHESIS_PROFILE=soak``
(``make soak``) runs thousands.
"""

import collections
import copy
import dataclasses
import json
import os
import warnings
from contextlib import ExitStack
from unittest import mock

import numpy as np
import pytest
from differential_items import ARRAY_DTYPES, TENSOR_DTYPES, Items, ItemStream, itemsize
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from dataloader import DataLoader, shard
from dataloader._loading.rows import ROW_MIN_BYTES

torch = pytest.importorskip("torch")
from differential_reference import (  # noqa: E402  (imports torch)
    BATCH_ERRORS,
    Expected,
    Failure,
    array_leaves,
    canonical,
    leaf_forms,
)

# Hypothesis describes the strategy of structures at length.
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")

# Examples per test: default_collate against torch's, each loader mode, each
# spawn mode (spawned workers take seconds to start).
COLLATE_EXAMPLES, MODE_EXAMPLES, SPAWN_EXAMPLES = {
    "soak": (5000, 1500, 60),
}.get(os.environ.get("HYPOTHESIS_PROFILE", "default"), (200, 25, 2))
EPOCHS = 3
SEED = 11
NO_ACCELERATOR = "'pin_memory' argument is set as true but no accelerator is found"
# Items of at most this many bytes of arrays, datasets of at most this many.
ITEM_BYTES, DATASET_BYTES = 600 * 1024, 6 * 1024 * 1024


def checked(max_examples):
    return settings(max_examples=max_examples, deadline=None, suppress_health_check=[
        HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])


# -- structures -------------------------------------------------------------------------


def big_shape(dtype, ndim, delta):
    """About ``ROW_MIN_BYTES`` (when items are collated item by item): ``delta``
    elements off it in 1-d, just over it in 2-d and 3-d."""
    count = ROW_MIN_BYTES // itemsize(dtype) + delta
    if ndim == 1:
        return (count,)
    return (-(-count // 16), 16) if ndim == 2 else (-(-count // 16), 4, 4)


def shapes(dtype, big):
    if big:
        return st.builds(big_shape, st.just(dtype), st.sampled_from([1, 2, 3]),
                         st.sampled_from([0, 0, -1, 1, 2500]))
    return st.one_of(st.just(()), st.sampled_from([(0,), (3, 0), (0, 2, 2)]),
                     st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple))


def arrays(big=False):
    return st.sampled_from(ARRAY_DTYPES).flatmap(lambda dtype: st.tuples(
        st.just("array"), st.just(dtype), shapes(dtype, big),
        st.sampled_from(["C", "C", "C", "F", "sliced", "reversed"]), RARELY))


def tensors(big=False):
    return st.sampled_from(TENSOR_DTYPES).flatmap(lambda dtype: st.tuples(
        st.just("tensor"), st.just(dtype), shapes(dtype, big), st.sampled_from(["C", "C", "T"])))


RARELY = st.sampled_from([False, False, False, False, False, True])
numbers = st.one_of(
    st.tuples(st.just("int"), st.sampled_from(["small", "small", "int64"])),
    st.just(("float",)), st.just(("bool",)),
    st.tuples(st.just("scalar"), st.sampled_from(ARRAY_DTYPES)),
)
text = st.sampled_from([("str",), ("bytes",)])
# Leaves torch's default_collate refuses, in every batch or in some.
refused = st.sampled_from([("none",), ("int", "huge")])
leaves = st.one_of(arrays(), arrays(), arrays(big=True), tensors(), tensors(big=True), numbers,
                   numbers, text, refused)
KEYS = st.sampled_from(["label", "name", "image", "mask", "a", "b", 0, 1])


def fields(children, min_size=0):
    return st.lists(st.tuples(KEYS, children), min_size=min_size, max_size=5,
                    unique_by=lambda pair: pair[0]).map(tuple)


def containers(children):
    parts = st.lists(children, max_size=4).map(tuple)
    return st.one_of(
        st.tuples(st.just("dict"), fields(children), RARELY),
        st.tuples(st.just("dict"), fields(children), RARELY),
        st.tuples(st.just("tuple"), parts, RARELY),
        st.tuples(st.just("list"), parts, RARELY),
        st.tuples(st.just("namedtuple"), st.lists(children, max_size=3).map(tuple)),
        st.tuples(st.just("dataclass"), st.lists(children, min_size=1, max_size=2).map(tuple)),
    )


def item_bytes(node):
    """How many bytes of arrays and tensors an item of ``node`` holds."""
    kind = node[0]
    if kind in ("array", "tensor"):
        return itemsize(node[1]) * (int(np.prod(node[2])) + 1)
    if kind == "dict":
        return sum(item_bytes(child) for _, child in node[1])
    if kind in ("tuple", "list", "namedtuple", "dataclass"):
        return sum(item_bytes(child) for child in node[1])
    return 0


def with_image(parts, image, position):
    """A record with a large array or tensor (an image) at ``position`` among its fields."""
    parts = [part for part in parts if part[0] != "image"]
    position = min(position, len(parts))
    return ("dict", (*parts[:position], ("image", image), *parts[position:]), False)


# Two thirds of the structures are records, as training items are: a dict of
# labels, names and arrays (an image among them, or not), in every order. The
# others are anything.
structures = st.one_of(
    st.tuples(st.just("dict"), fields(leaves, min_size=2), RARELY),
    st.builds(with_image, fields(leaves, min_size=1), st.one_of(arrays(True), tensors(True)),
              st.integers(0, 5)),
    st.recursive(leaves, containers, max_leaves=8),
).filter(lambda node: item_bytes(node) <= ITEM_BYTES)

# Such items once failed from the third batch on with worker processes, when
# each batch was dropped before the next was taken.
LABELLED_IMAGE = ("dict", (("label", ("int", "small")), ("name", ("str",)),
                           ("image", ("array", "uint8", (64, 64, 3), "C", False))), False)


# -- consuming batches as training does ---------------------------------------------------


def view_of(leaf, position):
    """A training loop's view of an array or tensor of a batch, sharing its memory."""
    if isinstance(leaf, np.ndarray):
        if any(stride < 0 for stride in leaf.strides):
            return np.asarray(leaf)  # an item's own array (unbatched): torch takes none such
        return [torch.from_dlpack, np.asarray, torch.from_numpy][position % 3](leaf)
    if leaf.dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2):
        return torch.from_dlpack(leaf)  # numpy has no such dtype
    return [torch.from_dlpack, np.asarray][position % 2](leaf)


class Kept:
    """A batch held by the consumer, or views of its arrays, with their form on arrival."""

    def __init__(self, batch, form, views):
        self.views = views
        if views:
            self.value = [view_of(leaf, k) for k, leaf in enumerate(array_leaves(batch))]
            self.form = leaf_forms(form)
        else:
            self.value, self.form = batch, form

    def verify(self, when):
        if self.views:
            assert [canonical(view)[2:] for view in self.value] == self.form, \
                f"kept views of a batch changed {when}"
        else:
            assert canonical(self.value) == self.form, f"a kept batch changed {when}"


class Epoch:
    """The outcomes one epoch must deliver: in order, or, when arrival order is
    free, as a multiset (each stream's batches still in their stream's order)."""

    def __init__(self, streams, ordered):
        self.ordered = ordered
        self.count = sum(map(len, streams))
        if ordered:
            self.left = [form for stream in streams for form in stream]
            return
        self.left = collections.Counter(form for stream in streams for form in stream)
        self.place = {form: (s, j) for s, stream in enumerate(streams)
                      for j, form in enumerate(stream) if self.left[form] == 1}
        self.last = {}

    def take(self, form):
        if self.ordered:
            position = self.count - len(self.left)
            assert self.left, f"batch {position}: one more than the epoch's {self.count}"
            assert form == self.left[0], f"batch {position} of {self.count}: not torch's"
            del self.left[0]
            return
        assert self.left[form] > 0, "a batch not expected, or once too often"
        self.left[form] -= 1
        if form in self.place:
            stream, position = self.place[form]
            assert self.last.get(stream, -1) < position, "a stream's batches out of order"
            self.last[stream] = position

    def remaining(self):
        return len(self.left) if self.ordered else sum(self.left.values())

    def finish(self):
        assert self.remaining() == 0, f"{self.remaining()} batches missing"

    def snapshot(self):
        """What is left of the epoch, for a loader resumed from here."""
        rest = copy.copy(self)
        rest.left = self.left.copy()
        if not self.ordered:
            rest.last = dict(self.last)
        return rest


@dataclasses.dataclass(frozen=True)
class Pattern:
    """How the consumer treats one epoch's batches: ``drop`` each before the next,
    ``hold`` the last ``keep``, hold ``all``, or keep ``views`` of their arrays and
    drop the batches. The last ``carry`` kept are checked again after the next epoch."""

    how: str
    keep: int = 0
    carry: int = 0


END = object()


def next_outcome(iterator):
    try:
        return next(iterator)
    except StopIteration:
        return END
    except BATCH_ERRORS as error:
        return Failure(error)


def run_epoch(loader, epoch, pattern, *, save_at=None, warns=False):
    """Consume one epoch of ``loader`` as ``pattern`` says, checking every batch.

    Returns the batches (or views) kept to be checked again later, and
    ``(state, rest of the epoch)`` saved after ``save_at`` batches.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        iterator = iter(loader)
    assert any(NO_ACCELERATOR in str(warning.message) for warning in caught) == warns
    held, saved, taken = collections.deque(), None, 0
    while True:
        if taken == save_at and loader.in_order:
            saved = json.loads(json.dumps(loader.state_dict())), epoch.snapshot()
        elif taken == save_at and 0 < taken < epoch.count:
            # Delivered batches are not a prefix of the order: no position to save.
            with pytest.raises(ValueError, match="in_order=False"):
                loader.state_dict()
        outcome = next_outcome(iterator)
        if outcome is END:
            break
        taken += 1
        failed = isinstance(outcome, Failure)
        form = outcome.form if failed else canonical(outcome)
        epoch.take(form)
        if pattern.how != "drop" and not failed:
            held.append(Kept(outcome, form, views=pattern.how == "views"))
            if pattern.how == "hold" and len(held) > pattern.keep:
                held.popleft().verify("while later batches were loaded")
        del outcome  # a dropped batch is gone before the next is taken
    del iterator
    epoch.finish()
    for kept in held:
        kept.verify("while later batches of its epoch were loaded")
    return list(held)[len(held) - pattern.carry:] if pattern.carry else [], saved


# -- the modes ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Mode:
    """How the loader runs: its dataset's kind and its workers."""

    dataset: str = "map"  # "map", "stream" (split by worker info) or "shard"
    workers: str | None = None  # None (the consumer loads), "thread" or "process"
    lanes: bool = False  # item_concurrency > 1
    in_order: bool = True
    context: str | None = None  # multiprocessing_context


MODES = {
    "direct": Mode(),
    "lanes": Mode(lanes=True),
    "threads": Mode(workers="thread"),
    "threads+lanes": Mode(workers="thread", lanes=True),
    "processes": Mode(workers="process"),
    "processes+lanes": Mode(workers="process", lanes=True),
    "threads-unordered": Mode(workers="thread", in_order=False),
    "processes-unordered": Mode(workers="process", in_order=False),
    "stream": Mode(dataset="stream"),
    "stream+lanes": Mode(dataset="stream", lanes=True),
    "stream-threads": Mode(dataset="stream", workers="thread"),
    "stream-processes": Mode(dataset="stream", workers="process"),
    "shard-threads": Mode(dataset="shard", workers="thread"),
    "shard-processes+lanes": Mode(dataset="shard", workers="process", lanes=True),
}
SPAWN_MODES = {
    "spawn": Mode(workers="process", context="spawn"),
    "stream-spawn": Mode(dataset="stream", workers="process", context="spawn"),
}


@dataclasses.dataclass(frozen=True)
class Case:
    """Everything drawn for one example besides the mode."""

    structure: tuple
    n: int
    batch_size: int | None
    drop_last: bool = False
    order: str | tuple = "sequential"  # "sequential", "shuffle" or a sampler's indices
    num_workers: int = 2
    item_concurrency: int = 3
    prefetch_factor: int = 2
    persistent: bool = True  # persistent_workers; processes otherwise end with each epoch
    pin: str = "off"  # "off", "warn" (no accelerator) or "stand-in" (StandInAccelerator)
    shard: tuple = (0, 1)  # (rank, world_size)
    patterns: tuple = (Pattern("drop"),) * EPOCHS
    resume: tuple | None = None  # (epoch, batches taken when the state is saved)


patterns = st.one_of(
    st.just(Pattern("drop")),
    st.builds(Pattern, st.just("hold"), st.integers(1, 4), st.integers(0, 2)),
    st.builds(Pattern, st.just("all"), st.just(0), st.integers(0, 3)),
    st.builds(Pattern, st.just("views"), st.just(0), st.integers(0, 3)),
)


@st.composite
def cases(draw, mode):
    structure = draw(structures)
    n = draw(st.integers(1, max(1, min(40, DATASET_BYTES // max(item_bytes(structure), 1)))))
    order = "sequential"
    if mode.dataset == "map":
        order = draw(st.one_of(
            st.sampled_from(["sequential", "shuffle"]),
            st.lists(st.integers(0, n - 1), min_size=1, max_size=n + 5).map(tuple)))
    batch_size = draw(st.sampled_from([3, 1, 2, 4, 5, 6, 7, None]))
    world = draw(st.integers(1, 3))
    return Case(
        structure=structure, n=n, batch_size=batch_size,
        drop_last=batch_size is not None and draw(st.booleans()), order=order,
        num_workers=draw(st.integers(1, 3)), item_concurrency=draw(st.integers(2, 4)),
        prefetch_factor=draw(st.integers(1, 3)), persistent=draw(st.sampled_from([True, False])),
        pin=draw(st.sampled_from(["off", "off", "warn", "stand-in"])),
        shard=(draw(st.integers(0, world - 1)), world),
        patterns=tuple(draw(patterns) for _ in range(EPOCHS)),
        resume=draw(st.none() | st.tuples(st.integers(0, EPOCHS - 1), st.integers(0, 12))),
    )


def sampling(case):
    """The loader's options that choose the order of a map-style epoch."""
    options = {"batch_size": case.batch_size, "drop_last": case.drop_last}
    if case.order == "shuffle":
        options.update(shuffle=True, seed=SEED)
    elif case.order != "sequential":
        options["sampler"] = list(case.order)
    return options


def make_loader(case, mode):
    options = {
        "num_workers": case.num_workers if mode.workers else 0,
        "item_concurrency": case.item_concurrency if mode.lanes else 1,
        "pin_memory": case.pin != "off", "in_order": mode.in_order,
    }
    if mode.workers:
        options.update(worker_type=mode.workers, prefetch_factor=case.prefetch_factor,
                       persistent_workers=case.persistent, timeout=120)
        if mode.context:
            options["multiprocessing_context"] = mode.context
    if mode.dataset == "map":
        return DataLoader(Items(case.structure, case.n), **sampling(case), **options)
    options.update(batch_size=case.batch_size, drop_last=case.drop_last)
    if mode.dataset == "stream":
        return DataLoader(ItemStream(case.structure, case.n), **options)
    source = ItemStream(case.structure, case.n, split=False)
    return DataLoader(shard(source, *case.shard), **options)


def index_batches(case, mode, epochs):
    """Each epoch's batches of indices, stream by stream."""
    if mode.dataset == "map":
        # The direct path's order: every other mode must follow it.
        collate = list if case.batch_size is not None else (lambda index: [index])
        loader = DataLoader(range(case.n), collate_fn=collate, **sampling(case))
        return [[[list(batch) for batch in loader]] for _ in range(epochs)]
    indices = list(range(case.n))
    if mode.dataset == "shard":
        rank, world = case.shard
        indices = indices[rank::world]
    count = case.num_workers if mode.workers else 1
    size = case.batch_size or 1
    epoch = []
    for stream in (indices[worker::count] for worker in range(count)):
        epoch.append([stream[start:start + size] for start in range(0, len(stream), size)
                      if not (case.drop_last and len(stream) - start < size)])
    return [epoch] * epochs


class StandInAccelerator:
    """torch told it has an accelerator, whose pinned memory is a copy (the machine
    running the suite has none), as in test_pinning.py."""

    def __enter__(self):
        self._patches = ExitStack()
        for name, value in [("is_available", lambda: True),
                            ("current_accelerator", lambda *a: torch.device("cuda")),
                            ("current_device_index", lambda: 0),
                            ("set_device_index", lambda index: None)]:
            self._patches.enter_context(mock.patch.object(torch.accelerator, name, value))
        self._patches.enter_context(
            mock.patch.object(torch.Tensor, "pin_memory", lambda tensor, *a: tensor.clone()))
        return self

    def __exit__(self, *exc):
        self._patches.close()


def describe(case, mode):
    for how in sorted({pattern.how for pattern in case.patterns}):
        event(f"consumed: {how}")
    event(f"pin_memory: {case.pin}")
    if case.batch_size is None:
        event("batch_size=None")
    elif case.batch_size > 1 and item_bytes(case.structure) >= ROW_MIN_BYTES:
        event("collated item by item")
    event(f"resumed: {case.resume is not None and mode.in_order}")


def by_turn(streams):
    """The workers' batches as torch delivers them in order: batch ``j`` of every
    stream before batch ``j + 1`` of any, an ended stream leaving the turns."""
    rounds = max(map(len, streams), default=0)
    return [stream[j] for j in range(rounds) for stream in streams if j < len(stream)]


def check_mode(case, mode):
    """Run ``case`` in ``mode``: three epochs of one loader, then a second loader
    resumed from the state saved mid-epoch, every batch against torch's."""
    describe(case, mode)
    expect = Expected(case.structure, case.batch_size is not None, case.pin == "stand-in")
    plans = index_batches(case, mode, EPOCHS + 1)

    def epoch(number):
        streams = [[expect(batch) for batch in stream] for stream in plans[number]]
        if mode.dataset == "map" and not mode.in_order:
            streams = [[form] for form in streams[0]]  # in any order
        elif mode.in_order:
            streams = [by_turn(streams)]
        return Epoch(streams, mode.in_order)

    warns = case.pin == "warn"
    with ExitStack() as context:
        if case.pin == "stand-in":
            context.enter_context(StandInAccelerator())
        loader = context.enter_context(make_loader(case, mode))
        if mode.dataset == "map":
            assert len(loader) == len(plans[0][0])
        carried, saved = [], None
        for number, pattern in enumerate(case.patterns):
            save_at = None
            if case.resume is not None and case.resume[0] == number:
                save_at = min(case.resume[1], sum(map(len, plans[number])))
            kept, state = run_epoch(loader, epoch(number), pattern, save_at=save_at, warns=warns)
            for earlier in carried:
                earlier.verify("while the next epoch ran")
            carried, saved = kept, saved or state
        loader.close()
        for earlier in carried:
            earlier.verify("after its loader was closed")
        if saved is None:
            return
        # A new loader resumed from the saved state: the rest of that epoch, and the next.
        (state, rest), number = saved, case.resume[0]
        resumed = context.enter_context(make_loader(case, mode))
        resumed.load_state_dict(state)
        kept = []
        if state["epoch"] == number:
            # The rest of the epoch; nothing when a stream's last batch was
            # delivered before the state was saved, but not its end.
            kept, _ = run_epoch(resumed, rest, case.patterns[number], warns=warns)
        else:  # saved after the epoch's last batch: the next epoch's start
            assert (state["epoch"], state["batches"], rest.remaining()) == (number + 1, 0, 0)
        kept += run_epoch(resumed, epoch(number + 1), case.patterns[-1], warns=warns)[0]
        for earlier in carried + kept:
            earlier.verify("after a resumed loader ran")


# -- the tests --------------------------------------------------------------------------------


@checked(COLLATE_EXAMPLES)
@given(structure=structures, indices=st.lists(st.integers(0, 40), min_size=1, max_size=7))
def test_default_collate_and_default_convert_give_torchs_batches(structure, indices):
    Expected(structure, batched=True, pinned=False)(indices)
    Expected(structure, batched=False, pinned=False)(indices[:1])


@pytest.mark.timeout(600 + 4 * MODE_EXAMPLES)
@pytest.mark.parametrize("mode", MODES.values(), ids=MODES.keys())
@checked(MODE_EXAMPLES)
@given(data=st.data())
@example(data=None)
def test_every_mode_gives_torchs_batches_however_they_are_consumed(mode, data):
    if data is None:
        case = Case(LABELLED_IMAGE, 23, 3, patterns=(
            Pattern("drop"), Pattern("views", carry=2), Pattern("hold", keep=2, carry=1)),
            resume=(1, 4))
    else:
        case = data.draw(cases(mode))
    check_mode(case, mode)


@pytest.mark.timeout(600 + 30 * SPAWN_EXAMPLES)
@pytest.mark.parametrize("mode", SPAWN_MODES.values(), ids=SPAWN_MODES.keys())
@checked(SPAWN_EXAMPLES)
@given(data=st.data())
def test_spawned_workers_give_torchs_batches(mode, data):
    check_mode(data.draw(cases(mode)), mode)


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("array", [np.int64(3), np.array(0.5), np.arange(3.0)[:1][::-1]],
                         ids=["numpy scalar", "0-d", "reversed"])
def test_pinning_an_item(array, num_workers):
    # Unbatched (batch_size=None), items are pinned as they come; torch pins a
    # numpy scalar, converted, as a 0-d tensor.
    items = [{"x": array, "y": index} for index in range(4)]
    with StandInAccelerator(), DataLoader(items, batch_size=None, pin_memory=True,
                                          num_workers=num_workers) as loader:
        pinned = [item["x"] for item in loader]
    assert all(x.shape == np.shape(array) and x.tolist() == array.tolist() for x in pinned)
