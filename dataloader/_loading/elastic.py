"""Elastic resumption: an epoch stopped on N ranks continues on M, each sample once.

Each rank's ``loader.state_dict()`` says, under ``"elastic"``, which share
of the epoch the rank holds (its rank, the number of ranks, the batch size,
and for a stream its number of workers) besides how many batches it
delivered. :func:`merge_states` puts the ranks' states together into one
*global* state: the epoch's progress as a stack of levels
(``dataloader._sampling.remainder``), one integer per rank (or stream) and
level, never a list of samples. ``loader.load_state_dict(global_state)`` on
any rank of a job of any size takes that rank's share of what remains:

* map-style, under ``DistributedSampler``: the remaining positions of the
  epoch's order are dealt to the new ranks in equal counts (padded by
  wrapping round, or cut with ``drop_last``, as the sampler's shares are);
* a ``shard()`` stream: the remaining source positions are dealt to the
  new job's streams (ranks times workers), each reading the source again
  and keeping its own;
* a ``BucketBatchSampler``: the remaining positions of the epoch's batch
  order, dealt as a ``DistributedSampler``'s positions are;
* a ``TarDataset`` split among ranks: the shards no stream started, dealt
  to the new streams as a shard's positions are, and the *pieces* the
  streams were in the middle of (the rest of each open shard, each
  buffered sample), dealt round robin (``dataloader.sources._tar_work``);
* a ``PackedDataset`` over a ``shard()``: the source positions no window
  reached, dealt as a shard's, and each window being given as a piece
  (where it began, the documents carried into it, its rows given), packed
  again by the stream it is dealt to (``dataloader._sequences.packing``).

The later stages' components are known here by the attributes they take
a deal on (``elastic_deal`` and ``epoch_positions``, ``elastic_work``,
``elastic_pieces``): this stage imports none of them.

The next epoch is the ordinary one for the new number of ranks.
:func:`gather_state` all-gathers and merges in a running job, and
:class:`LoaderCheckpoint` is the loader's entry in a
``torch.distributed.checkpoint`` state dict. See ``docs/distributed.md``,
"Resuming on another number of ranks".
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dataloader._datasets.dataset import ShardedIterable
from dataloader._sampling.distributed import DistributedSampler, RankGroup
from dataloader._sampling.remainder import UNBOUNDED, Deal, Level, dealt_size
from dataloader.sources._tar_work import TarWork, shard_order, stream_left

if TYPE_CHECKING:
    from dataloader._loader import DataLoader

__all__ = ["FORMAT", "LoaderCheckpoint", "describe_rank", "gather_state", "merge_states",
           "prepare_load"]

FORMAT = "dataloader-elastic"
_VERSION = 1


# -- each rank's description of its share ------------------------------------


def describe_rank(loader: DataLoader) -> dict[str, Any] | None:
    """The rank's share of its epoch, kept in ``loader.state_dict()`` under ``"elastic"``;
    ``None`` when the loader's epochs cannot be dealt again (none of a
    ``DistributedSampler``, ``BucketBatchSampler``, ``shard``, ``TarDataset`` or
    ``PackedDataset`` over a ``shard``; or a batch sampler of the user's)."""
    # The components of later stages are known by what they take a deal on (this stage
    # imports none of them): a BucketBatchSampler, a TarDataset, a PackedDataset.
    if hasattr(loader.batch_sampler, "epoch_positions"):
        return _describe_buckets(loader.batch_sampler)
    if loader.batch_size is None and loader.batch_sampler is not None:
        return None
    batch_size = loader.batch_size if loader.batch_size is not None else 1
    sampler, dataset = loader.sampler, loader.dataset
    if isinstance(sampler, DistributedSampler):
        view: dict[str, Any] = {
            "kind": "sampler", "rank": sampler.rank, "ranks": sampler.num_replicas,
            "batch_size": batch_size, "drop_last": sampler.drop_last,
            "dataset": {"length": len(sampler.dataset), "shuffle": sampler.shuffle,
                        "seed": sampler.seed},
            "deal": None,
        }
        if sampler.elastic_deal is not None:
            epoch, deal = sampler.elastic_deal
            view["deal"] = {"epoch": epoch, "levels": [lv.to_list() for lv in deal.levels],
                            "size": deal.size}
        return view
    if hasattr(dataset, "elastic_work"):  # a TarDataset, its shards split among ranks
        view = {
            "kind": "tar", "rank": dataset.rank, "ranks": dataset.world_size,
            "streams": max(loader.num_workers, 1), "batch_size": batch_size,
            "dataset": {"shards": len(dataset.shards), "shuffle_shards": dataset.shuffle_shards,
                        "seed": dataset.seed},
            "deal": None,
        }
        if dataset.elastic_work is not None:
            epoch, work = dataset.elastic_work
            view["deal"] = {"epoch": epoch, "levels": [lv.to_list() for lv in work.levels],
                            "pieces": work.pieces}
        return view
    if isinstance(dataset, ShardedIterable):
        return _describe_shard(loader, dataset, batch_size)
    if hasattr(dataset, "elastic_pieces") and isinstance(dataset.source, ShardedIterable):
        view = _describe_shard(loader, dataset.source, batch_size)
        view["kind"] = "packed"
        view["dataset"].update(seq_len=dataset.seq_len, window=dataset.window,
                               method=dataset.method)
        if view["deal"] is not None:
            pieces = dataset.elastic_pieces
            view["deal"]["pieces"] = pieces[1] if pieces is not None else []
        return view
    return None


def _describe_shard(loader: DataLoader, dataset: ShardedIterable,
                    batch_size: int) -> dict[str, Any]:
    source = dataset.source
    length: int | None
    try:
        length = len(source)  # type: ignore[arg-type]
    except TypeError:
        length = None
    view: dict[str, Any] = {
        "kind": "shard", "rank": dataset.rank, "ranks": dataset.world_size,
        "streams": max(loader.num_workers, 1), "batch_size": batch_size,
        "dataset": {"source": type(source).__name__, "length": length,
                    "seed": getattr(source, "seed", None)},
        "deal": None,
    }
    if dataset.elastic_levels is not None:
        epoch, levels = dataset.elastic_levels
        view["deal"] = {"epoch": epoch, "levels": [lv.to_list() for lv in levels]}
    return view


def _describe_buckets(sampler: Any) -> dict[str, Any]:
    """A ``BucketBatchSampler``'s share: its positions of the epoch's batch order, one
    batch each, as a ``DistributedSampler``'s are of the sample order."""
    view: dict[str, Any] = {
        "kind": "buckets", "rank": sampler.rank, "ranks": sampler.num_replicas,
        "batch_size": 1, "drop_last": sampler.drop_last,
        "dataset": {"length": len(sampler.lengths), "shuffle": sampler.shuffle,
                    "seed": sampler.seed, "batch_size": sampler.batch_size,
                    "max_tokens": sampler.max_tokens, "window": sampler.window},
        "positions": {"epoch": sampler.epoch, "size": sampler.epoch_positions()},
        "deal": None,
    }
    if sampler.elastic_deal is not None:
        epoch, deal = sampler.elastic_deal
        view["deal"] = {"epoch": epoch, "levels": [lv.to_list() for lv in deal.levels],
                        "size": deal.size}
    return view


# -- merging -----------------------------------------------------------------


def merge_states(states: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One global state of a job from every rank's ``loader.state_dict()``.

    The result (small, JSON-serialisable, the same whichever rank merges)
    says which samples of the current epoch every rank together delivered,
    by positions in the epoch's order: ``loader.load_state_dict`` of it on
    any rank of a job of any size continues the epoch with this rank's
    share of the rest, each remaining sample dealt to exactly one rank and
    every rank given as many as the others. Works for map-style datasets
    under ``DistributedSampler`` or ``BucketBatchSampler``, ``shard()``
    streams, ``TarDataset.shard()`` and ``PackedDataset`` over a ``shard()``.

    Parameters
    ----------
    states : sequence of dict
        ``loader.state_dict()`` of every rank of the stopped job, in any
        order, taken at any batch (ranks need not be at the same step).

    Returns
    -------
    dict
        The global state.

    Raises
    ------
    ValueError
        When a rank is missing or repeated, or the states are of different
        epochs, seeds, datasets, numbers of ranks or kinds of loader (the
        message names what differs), or a state cannot be dealt again.

    Examples
    --------
    >>> from dataloader import DataLoader, DistributedSampler, merge_states
    >>> def loader(rank, ranks):
    ...     sampler = DistributedSampler(range(10), ranks, rank, seed=5)
    ...     return DataLoader(range(10), batch_size=2, sampler=sampler)
    >>> old = [loader(rank, 2) for rank in range(2)]           # a job on 2 ranks
    >>> seen = [next(iter(one)).tolist() for one in old]       # each delivers a batch, stops
    >>> merged = merge_states([one.state_dict() for one in old])
    >>> new = [loader(rank, 3) for rank in range(3)]           # resumed on 3 ranks
    >>> for one in new:
    ...     one.load_state_dict(merged)
    >>> rest = [[batch.tolist() for batch in one] for one in new]
    >>> [len(batches) for batches in rest]                      # the 6 left, in equal shares
    [1, 1, 1]
    >>> delivered = sum(seen, []) + [i for batches in rest for batch in batches for i in batch]
    >>> sorted(delivered) == list(range(10))
    True
    """
    if not states:
        raise ValueError("merge_states needs the state of every rank, got none")
    views = [_view(i, state) for i, state in enumerate(states)]
    first = views[0]
    for key, what in (("kind", "kinds of loader"), ("ranks", "numbers of ranks"),
                      ("dataset", "datasets"), ("streams", "numbers of workers")):
        _same(views, lambda view, key=key: view[1].get(key), what)
    ranks = first[1]["ranks"]
    by_rank: dict[int, tuple[Mapping[str, Any], dict[str, Any]]] = {}
    for state, view in views:
        if view["rank"] in by_rank:
            raise ValueError(f"two states are of rank {view['rank']}: pass each rank's once")
        by_rank[view["rank"]] = (state, view)
    missing = sorted(set(range(ranks)) - set(by_rank))
    if missing:
        raise ValueError(f"the states of rank(s) {missing} of {ranks} are missing")
    epoch = min(int(state["epoch"]) for state, _ in views)
    for rank, (state, _) in sorted(by_rank.items()):
        if int(state["epoch"]) != epoch and not _completed(state, epoch):
            other = next(r for r, (s, _) in by_rank.items() if int(s["epoch"]) == epoch)
            raise ValueError(
                f"the states are of different epochs: rank {other} is in epoch {epoch}, rank "
                f"{rank} in epoch {state['epoch']} (batch {state['batches']})"
            )
    deal = _deal_of(by_rank, epoch)
    levels = [Level.from_list(saved) for saved in deal["levels"]] if deal else []
    seeds = {state["seed"] for state, _ in views}
    kind = first[1]["kind"]
    pieces: list[Any] = []
    if kind in ("sampler", "buckets"):
        level = _sampler_level(by_rank, epoch, levels)
    elif kind == "tar":
        level, pieces = _tar_level(by_rank, epoch, levels, deal["pieces"] if deal else [])
    elif kind == "packed":
        level, pieces = _packed_level(by_rank, epoch, levels, deal["pieces"] if deal else [])
    else:
        level = _shard_level(by_rank, epoch, levels)
    if not levels and not any(level.to_list()[2]) and not pieces:
        levels = []  # nothing delivered yet: the new ranks' ordinary epoch
    elif level.remaining() == 0 and not pieces:
        epoch, levels = epoch + 1, []
    else:
        levels = [*levels, level]
    merged = {
        "format": FORMAT, "version": _VERSION, "kind": kind, "epoch": epoch,
        # The loaders' own seeds (per-item randomness, not the order) pass on when the
        # ranks agree; else each new rank keeps its own.
        "seed": seeds.pop() if len(seeds) == 1 else None, "dataset": first[1]["dataset"],
        "levels": [lv.to_list() for lv in levels],
    }
    if kind in ("tar", "packed"):
        merged["pieces"] = pieces if levels else []
    return merged


def _view(i: int, state: Any) -> tuple[Mapping[str, Any], dict[str, Any]]:
    if isinstance(state, Mapping) and state.get("format") == FORMAT:
        raise ValueError(f"states[{i}] is already a merged state: load it, or merge the "
                         "ranks' own states")
    if not isinstance(state, Mapping) or "epoch" not in state:
        raise ValueError(f"states[{i}] is not a DataLoader state_dict")
    view = state.get("elastic")
    if view is None:
        raise ValueError(
            f"states[{i}] does not say which share of the epoch its rank held: only the "
            "states of a DataLoader over a DistributedSampler or a BucketBatchSampler, a "
            "shard() stream, a TarDataset or a PackedDataset over a shard() can be resumed "
            "on other ranks"
        )
    return state, view


def _same(views: list, value: Any, what: str) -> None:
    reference = value(views[0])
    for _, view in views:
        if value((_, view)) != reference:
            raise ValueError(
                f"the states are of different {what}: rank {views[0][1]['rank']} has "
                f"{reference!r}, rank {view['rank']} has {value((_, view))!r}"
            )


def _completed(state: Mapping[str, Any], epoch: int) -> bool:
    """Whether ``state`` was saved after the last batch of ``epoch``."""
    return int(state["epoch"]) == epoch + 1 and int(state["batches"]) == 0


def _deal_of(by_rank: dict, epoch: int) -> dict[str, Any] | None:
    """The deal ``epoch`` was already dealt by (its levels, a tar epoch's pieces), as
    every rank agrees; ``None`` for an epoch never dealt again."""
    deals = {json.dumps(view["deal"]) for _, view in by_rank.values()
             if view["deal"] is not None and view["deal"]["epoch"] == epoch}
    if len(deals) > 1:
        raise ValueError(f"the states disagree on how epoch {epoch} was dealt to their ranks: "
                         "they are of different jobs")
    return json.loads(deals.pop()) if deals else None


def _sampler_level(by_rank: dict, epoch: int, levels: list[Level]) -> Level:
    _, view = by_rank[0]
    ranks = view["ranks"]
    size: int | None
    if levels:
        size = next(v["deal"]["size"] for _, v in by_rank.values()
                    if v["deal"] is not None and v["deal"]["epoch"] == epoch)
    elif view["kind"] == "buckets":  # the epoch's batch count, from a rank planning it
        size = next((v["positions"]["size"] for s, v in by_rank.values()
                     if v["positions"]["epoch"] == epoch and int(s["epoch"]) == epoch), None)
        if size is None:  # no rank started the epoch: nothing of it was delivered
            return Level(ranks, None, [0] * ranks)
    else:
        length = view["dataset"]["length"]
        size = (length // ranks if view["drop_last"] else -(-length // ranks)) * ranks
    delivered = []
    for rank in range(ranks):
        state, view = by_rank[rank]
        count = len(range(rank, size, ranks))
        if _completed(state, epoch):
            delivered.append(count)
        else:
            delivered.append(min(int(state["batches"]) * view["batch_size"], count))
    return Level(ranks, size, delivered)


def _shard_level(by_rank: dict, epoch: int, levels: list[Level]) -> Level:
    _, view = by_rank[0]
    ranks, streams = view["ranks"], view["streams"]
    size = levels[-1].remaining() if levels else view["dataset"]["length"]
    delivered = [0] * (ranks * streams)
    for rank in range(ranks):
        state, _ = by_rank[rank]
        saved = state.get("streams") or {}
        for worker in range(streams):
            owner = rank + ranks * worker
            if _completed(state, epoch):
                delivered[owner] = UNBOUNDED  # cut to the stream's count by the level
                continue
            stream = saved.get(str(worker), saved.get(worker))
            if stream is None:
                continue
            iterator = stream.get("iterator") or {}
            if "yielded" not in iterator:
                raise ValueError(f"rank {rank}'s stream {worker} does not say how many items "
                                 "it delivered: not the state of a shard() iterator")
            delivered[owner] = int(iterator["yielded"])
    return Level(ranks * streams, size, delivered)


def _tar_level(by_rank: dict, epoch: int, levels: list[Level],
               dealt: list[list[int]]) -> tuple[Level, list[list[int]]]:
    """The whole shards each stream of a ``TarDataset`` started, and the pieces left
    (``dataloader.sources._tar_work``)."""
    _, view = by_rank[0]
    ranks, streams, described = view["ranks"], view["streams"], view["dataset"]
    owners = ranks * streams
    order = shard_order(described["shards"], described["shuffle_shards"], described["seed"],
                        epoch)
    work = TarWork(levels, dealt)
    delivered = [0] * owners
    pieces: list[list[int]] = []
    for rank in range(ranks):
        state, _ = by_rank[rank]
        saved = state.get("streams") or {}
        for worker in range(streams):
            owner = rank + ranks * worker
            if _completed(state, epoch):
                delivered[owner] = UNBOUNDED  # cut to the stream's count by the level
                continue
            stream = saved.get(str(worker), saved.get(worker))
            iterator = None if stream is None else stream.get("iterator")
            if stream is not None and (not isinstance(iterator, Mapping)
                                       or "buffer" not in iterator):
                raise ValueError(f"rank {rank}'s stream {worker} does not say where it was in "
                                 "its shards: not the state of a TarDataset iterator")
            reads = work.reads(order, owner, owners)
            delivered[owner], left = stream_left(reads, work.pieces_of(owner, owners), iterator)
            pieces += left
    size = levels[-1].remaining() if levels else described["shards"]
    return Level(owners, size, delivered), pieces


def _packed_level(by_rank: dict, epoch: int, levels: list[Level],
                  dealt: list[dict[str, Any]]) -> tuple[Level, list[dict[str, Any]]]:
    """The source entries each stream of a ``PackedDataset`` read into its windows, and
    the pieces left: the windows being given, and the pieces not finished
    (``dataloader._sequences.packing``)."""
    _, view = by_rank[0]
    ranks, streams, window = view["ranks"], view["streams"], view["dataset"]["window"]
    owners = ranks * streams
    delivered = [0] * owners
    pieces: list[dict[str, Any]] = []
    for rank in range(ranks):
        state, _ = by_rank[rank]
        saved = state.get("streams") or {}
        for worker in range(streams):
            owner = rank + ranks * worker
            if _completed(state, epoch):
                delivered[owner] = UNBOUNDED  # cut to the stream's count by the level
                continue
            mine = dealt[owner::owners]
            stream = saved.get(str(worker), saved.get(worker))
            iterator = None if stream is None else stream.get("iterator")
            if stream is not None and (not isinstance(iterator, Mapping)
                                       or "given" not in iterator):
                raise ValueError(f"rank {rank}'s stream {worker} does not say which rows it "
                                 "gave: not the state of a PackedDataset iterator")
            piece = len(mine) if iterator is None else int(iterator.get("piece", len(mine)))
            if iterator is None:
                pieces += mine
            elif piece < len(mine):
                pieces += [dict(mine[piece], given=int(iterator["given"])), *mine[piece + 1:]]
            else:
                source = iterator["source"]
                if not isinstance(source, Mapping) or "yielded" not in source:
                    raise ValueError(f"rank {rank}'s stream {worker} does not say where its "
                                     "window began: not a PackedDataset over a shard()")
                start = int(source["yielded"])
                delivered[owner] = start + window
                pieces.append({"depth": len(levels), "owner": owner, "owners": owners,
                               "start": start, "given": int(iterator["given"]),
                               "carried": iterator["carried"], "dtype": iterator["dtype"]})
    size = levels[-1].remaining() if levels else view["dataset"]["length"]
    return Level(owners, size, delivered), pieces


# -- loading a share ----------------------------------------------------------


def prepare_load(loader: DataLoader, state: Mapping[str, Any]) -> Mapping[str, Any]:
    """What ``loader.load_state_dict(state)`` loads: this rank's share of a merged state
    (the sampler or shard is told the epoch's deal), or ``state`` itself (a rank's own
    state taken inside a dealt epoch restores that deal)."""
    if isinstance(state, Mapping) and state.get("format") == FORMAT:
        return _load_share(loader, state)
    view = state.get("elastic") if isinstance(state, Mapping) else None
    if view is not None and view.get("deal") is not None:
        deal = view["deal"]
        levels = [Level.from_list(saved) for saved in deal["levels"]]
        _set_deal(loader, view["kind"], int(deal["epoch"]), levels, deal.get("size"),
                  deal.get("pieces", []))
    return state


def _load_share(loader: DataLoader, state: Mapping[str, Any]) -> dict[str, Any]:
    if state.get("version") != _VERSION:
        raise ValueError(f"a merged state of version {state.get('version')!r}, this library "
                         f"reads version {_VERSION}")
    kind, saved = state["kind"], state["dataset"]
    here = describe_rank(loader)
    if here is None or here["kind"] != kind:
        needs = _NEEDS[kind]
        raise ValueError(f"the merged state is of a loader over {needs}; this loader is not one "
                         "(or it has a batch_sampler of its own)")
    if "length" in saved and here["dataset"]["length"] != saved["length"]:
        raise ValueError(f"the merged state is of a dataset of {saved['length']} samples, this "
                         f"loader's has {here['dataset']['length']}")
    if kind == "sampler":
        if here["dataset"]["shuffle"] != saved["shuffle"]:
            raise ValueError(
                f"the merged state was saved with shuffle={saved['shuffle']}, this loader's "
                f"DistributedSampler has shuffle={here['dataset']['shuffle']}"
            )
        loader.sampler.seed = saved["seed"]
    elif here["dataset"] != saved:
        raise ValueError(f"the merged state is of {_NEEDS[kind]} over {saved}, this loader's "
                         f"is over {here['dataset']}")
    epoch = int(state["epoch"])
    levels = [Level.from_list(level) for level in state["levels"]]
    _set_deal(loader, kind, epoch, levels, None, state.get("pieces", []))
    seed = state["seed"] if state["seed"] is not None else loader.seed
    loaded: dict[str, Any] = {"format": 1, "epoch": epoch, "batches": 0, "seed": seed}
    if kind == "buckets":
        sampler = loader.batch_sampler
        loaded["batch_sampler"] = {"seed": saved["seed"], "epoch": epoch,
                                   "num_replicas": sampler.num_replicas}
    return loaded


# What a merged state of each kind needs of the loader it is loaded into.
_NEEDS = {"sampler": "a DistributedSampler", "shard": "a shard() stream",
          "buckets": "a BucketBatchSampler", "tar": "a TarDataset",
          "packed": "a PackedDataset over a shard()"}


def _set_deal(loader: DataLoader, kind: str, epoch: int, levels: list[Level],
              size: int | None, pieces: list[Any]) -> None:
    if kind in ("sampler", "buckets"):
        sampler: Any = loader.sampler if kind == "sampler" else loader.batch_sampler
        if not levels:
            sampler.elastic_deal = None
            return
        if size is None:
            size = dealt_size(levels[-1].remaining(), sampler.num_replicas,
                              pad=not sampler.drop_last)
        sampler.elastic_deal = (epoch, Deal(levels, sampler.num_replicas, size))
    elif kind == "tar":
        tar: Any = loader.dataset
        tar.elastic_work = (epoch, TarWork(levels, pieces)) if levels else None
    elif kind == "packed":
        packed: Any = loader.dataset
        packed.source.elastic_levels = (epoch, levels) if levels else None
        packed.elastic_pieces = (epoch, pieces) if levels else None
    else:
        dataset: Any = loader.dataset
        dataset.elastic_levels = (epoch, levels) if levels else None


# -- in a running job -----------------------------------------------------------


def gather_state(loader: DataLoader) -> dict[str, Any]:
    """The merged state of every rank's loader, on every rank (a collective call).

    Every rank calls it at the same point (as a checkpoint is taken); the
    ranks all-gather their ``state_dict()`` through a gloo group of their
    own (never the job's default group) and each merges them. Without an
    initialised ``torch.distributed`` it merges this process's state alone.

    Examples
    --------
    >>> from dataloader import DataLoader, DistributedSampler, gather_state
    >>> sampler = DistributedSampler(range(6), num_replicas=1, rank=0, shuffle=False)
    >>> loader = DataLoader(range(6), batch_size=2, sampler=sampler)
    >>> first = next(iter(loader))
    >>> state = gather_state(loader)
    >>> state["epoch"], state["levels"]
    (0, [[1, 6, [2]]])
    """
    own = loader.state_dict()
    group = _groups.get(loader)
    if group is None:
        group = _groups[loader] = RankGroup()
    if not group.ready():
        return merge_states([own])
    return merge_states(group.gather(own))


# Each loader's own gloo group for gathering, made by its first gather (on every
# rank, in the same order, as torch's new_group requires) and kept for the next.
_groups: weakref.WeakKeyDictionary[Any, RankGroup] = weakref.WeakKeyDictionary()


class LoaderCheckpoint:
    """A loader's entry in a checkpoint that a job of another size can resume from.

    For ``torch.distributed.checkpoint`` (it is ``Stateful``): its
    ``state_dict()`` gathers every rank's state (:func:`gather_state`, a
    collective call, made by ``dcp.save`` on every rank) as one JSON
    string, the same on every rank; ``load_state_dict`` gives the loader
    this rank's share of it. ``dcp.load`` asks ``state_dict()`` first for
    the structure to load into, so it gathers once more.

    Parameters
    ----------
    loader : DataLoader

    Examples
    --------
    >>> from dataloader import DataLoader, DistributedSampler, LoaderCheckpoint
    >>> sampler = DistributedSampler(range(6), num_replicas=1, rank=0, shuffle=False)
    >>> loader = DataLoader(range(6), batch_size=2, sampler=sampler)
    >>> first = next(iter(loader))
    >>> saved = LoaderCheckpoint(loader).state_dict()       # dcp.save({"loader": ...})
    >>> resumed = DataLoader(range(6), batch_size=2,
    ...                      sampler=DistributedSampler(range(6), 1, 0, shuffle=False))
    >>> LoaderCheckpoint(resumed).load_state_dict(saved)    # dcp.load({"loader": ...})
    >>> [batch.tolist() for batch in resumed]
    [[2, 3], [4, 5]]
    """

    def __init__(self, loader: DataLoader) -> None:
        self.loader = loader

    def state_dict(self) -> dict[str, str]:
        return {"global_state": json.dumps(gather_state(self.loader))}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        saved = state["global_state"]
        self.loader.load_state_dict(json.loads(saved) if isinstance(saved, str) else saved)
