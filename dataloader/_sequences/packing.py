"""Packing: documents of varying length packed into rows of ``seq_len`` tokens.

Packing turns many items into fewer, so it is a stream transform, not a
collate or a map-style dataset: ``PackedDataset`` wraps a stream (an
iterable, a ``shard`` of one, an ``IterableDataset``) and is one itself,
iterated by each worker over its own share. A collate function sees one
batch of items and cannot carry a partly filled row to the next batch,
which another worker may load; the stream's iterator can, and saves it.

The iterator reads ``window`` documents at a time and places them, longest
first, in rows (first fit or best fit, ``dataloader._core.sequences``).
The least filled row of a window is carried into the next one instead of
being padded, unless the stream has ended. Its state is the source's state
where the window began, the documents carried into it and the rows of it
already given: a resumed iterator reads the window again, packs it the same
way and gives the rows after those (``docs/sequences.md``).

Elastic resume, over a ``shard`` of the documents: when a job stops, each
stream's window becomes a *piece*, ``{"depth", "owner", "owners", "start",
"given", "carried", "dtype"}``: the entries ``start`` to ``start + window -
1`` of stream ``owner`` of ``owners`` under the first ``depth`` levels of
the shard's progress, the documents carried into them, and the rows of
them given (the carried-on row counts as the window's last). The job of
another size deals the source entries no window reached to its streams
(the shard's levels) and the pieces round robin: a stream first reads each
of its pieces' documents again (``ShardedIterable.entry_items``), packs
them as their first stream did and gives the rows not given, the carried-on
one too, then packs its own entries (``dataloader._loading.elastic``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any

import numpy as np

from dataloader._core.sequences import assign_bins, pack_into
from dataloader._datasets.dataset import IterableDataset
from dataloader._datasets.hooks import announce_epoch, state_saver
from dataloader._datasets.worker_info import get_worker_info
from dataloader._loading.collate import default_collate
from dataloader._sequences.arguments import check_choice, check_positive

__all__ = ["PackedDataset", "PackingIterator", "collate_packed"]

METHODS = ("best_fit", "first_fit")
# The fields of a packed row (Hugging Face's and flash-attention's names).
TOKENS, POSITIONS, SEGMENTS, BOUNDARIES = "input_ids", "position_ids", "segment_ids", "cu_seqlens"


class PackedDataset(IterableDataset):
    """Documents packed into rows of ``seq_len`` tokens, each row a dict.

    A row holds ``"input_ids"`` (the documents one after the other, then
    ``pad_value``), ``"position_ids"`` (each token's position in its
    document), ``"segment_ids"`` (1 for the row's first document, 2 for its
    second..., 0 for the padding) and ``"cu_seqlens"`` (int32: where each
    document starts, then ``seq_len``; the padding, if any, is a segment of
    its own), so that attention never crosses documents. A document longer
    than ``seq_len`` is cut into pieces of ``seq_len``, each a document.
    Collate rows with :func:`collate_packed`. The same source gives the
    same rows; iterators save and restore their position
    (``state_dict``/``load_state_dict``), so a loader resumes mid-epoch.

    Parameters
    ----------
    source : iterable
        1-D integer arrays of tokens (or mappings holding one under
        ``key``). Wrap it in :func:`~dataloader.shard` to split it among
        ranks and workers; its iterator's ``state_dict`` (a shard's has one)
        makes resuming cheap, else the source is read again up to the
        saved position.
    seq_len : int
    window : int, default 1024
        Documents packed together.
    method : {"best_fit", "first_fit"}, default "best_fit"
        Each document, longest first, goes in the row it leaves least room
        in, or in the first row with room for it.
    key : str, optional
        The field of mapping items that holds the tokens.
    pad_value : int, default 0

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader import PackedDataset
    >>> documents = [np.arange(1, n + 1) for n in (3, 5, 2, 4)]
    >>> rows = list(PackedDataset(documents, seq_len=8, window=4))
    >>> [row["input_ids"].tolist() for row in rows]
    [[1, 2, 3, 4, 5, 1, 2, 3], [1, 2, 3, 4, 1, 2, 0, 0]]
    >>> rows[1]["position_ids"].tolist(), rows[1]["cu_seqlens"].tolist()
    ([0, 1, 2, 3, 0, 1, 0, 0], [0, 4, 6, 8])
    """

    def __init__(self, source: Iterable[Any], seq_len: int, *, window: int = 1024,
                 method: str = "best_fit", key: str | None = None, pad_value: int = 0) -> None:
        if not isinstance(source, Iterable):
            raise TypeError(f"source should be an iterable of token arrays, got "
                            f"{type(source).__name__}")
        self.source = source
        self.seq_len = check_positive("seq_len", seq_len)
        self.window = check_positive("window", window)
        self.method = check_choice("method", method, METHODS)
        self.key = key
        if not isinstance(pad_value, (int, np.integer)) or isinstance(pad_value, bool):
            raise TypeError(f"pad_value should be an integer, but got pad_value={pad_value!r}")
        self.pad_value = int(pad_value)
        self.epoch = 0
        # (epoch, pieces): the windows a job on other ranks (or workers) was packing when
        # it stopped in that epoch, dealt to this job's streams (dataloader._loading.elastic).
        self.elastic_pieces: tuple[int, list[dict[str, Any]]] | None = None

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iterators take; passed on to the source.

        Examples
        --------
        >>> import numpy as np
        >>> from dataloader import PackedDataset
        >>> packed = PackedDataset([np.arange(3)], seq_len=4)
        >>> packed.set_epoch(2)
        >>> packed.epoch
        2
        """
        self.epoch = int(epoch)
        announce_epoch(self.source, epoch)

    def pieces_of(self, worker: int, workers: int) -> list[dict[str, Any]]:
        """The pieces a stream gives before its own rows, in an epoch dealt again after an
        interruption (see the module docstring); none otherwise.

        Examples
        --------
        >>> import numpy as np
        >>> from dataloader import PackedDataset
        >>> PackedDataset([np.arange(3)], seq_len=4).pieces_of(0, 1)
        []
        """
        if self.elastic_pieces is None or self.elastic_pieces[0] != self.epoch:
            return []
        source: Any = self.source
        owner = source.rank + source.world_size * worker
        return self.elastic_pieces[1][owner::source.world_size * workers]

    def __iter__(self) -> PackingIterator:
        return PackingIterator(self)


class PackingIterator:
    """The rows of one pass over a :class:`PackedDataset`'s source; saves its position.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader import PackedDataset
    >>> packed = PackedDataset([np.arange(n) for n in (3, 5, 2, 4, 6)], seq_len=8, window=2)
    >>> first = iter(packed)
    >>> _ = next(first)
    >>> resumed = iter(packed)
    >>> resumed.load_state_dict(first.state_dict())
    >>> [row["input_ids"].tolist() for row in resumed] == [
    ...     row["input_ids"].tolist() for row in first]
    True
    """

    def __init__(self, packed: PackedDataset) -> None:
        self._packed = packed
        self._source: Iterator[Any] = iter(packed.source)
        self._save_source = state_saver(self._source)
        self._consumed = 0  # items read from the source (when it cannot save its state)
        self._ended = False
        # Where the window being given began, and the documents carried into it.
        self._window_start: Any = self._source_state()
        self._carried: list[np.ndarray] = []
        self._rows: list[dict[str, np.ndarray]] = []
        self._given = 0
        self._next_carry: list[np.ndarray] = []
        info = get_worker_info()
        self._pieces = packed.pieces_of(*((0, 1) if info is None else
                                          (info.id, info.num_workers)))
        # The piece being given, len(pieces) for this stream's own rows; -1 before the
        # first piece is read (by the first next()).
        self._piece = -1 if self._pieces else 0

    def __iter__(self) -> PackingIterator:
        return self

    def __next__(self) -> dict[str, np.ndarray]:
        while self._given == len(self._rows):
            if self._piece < len(self._pieces):
                self._enter(self._piece + 1, None)
                continue
            if self._ended and not self._next_carry:
                raise StopIteration
            self._window_start, self._carried = self._source_state(), self._next_carry
            self._rows, self._next_carry = self._pack_window(self._carried)
            self._given = 0
        self._given += 1
        return self._rows[self._given - 1]

    def _enter(self, piece: int, given: int | None) -> None:
        """Give piece ``piece``'s rows from its ``given``-th (default: the first not given
        by its first stream); past the last piece, this stream's own rows."""
        self._piece = piece
        if piece < len(self._pieces):
            self._rows = self._piece_rows(self._pieces[piece])
            self._given = int(self._pieces[piece]["given"] if given is None else given)

    def _piece_rows(self, piece: dict[str, Any]) -> list[dict[str, np.ndarray]]:
        """A piece's rows, packed as its first stream packed them, the row that stream
        carried on last."""
        packed = self._packed
        source: Any = packed.source
        items = source.entry_items(int(piece["depth"]), int(piece["owner"]),
                                   int(piece["owners"]), int(piece["start"]), packed.window)
        carried = [np.asarray(document, piece["dtype"]) for document in piece["carried"]]
        rows, _ = self._pack(self._documents(items), carried, len(items) < packed.window,
                             carry_as_row=True)
        return rows

    def state_dict(self) -> dict[str, Any]:
        """The source's state where the current window began, the documents carried
        into it, and how many of its rows were given (or, in a piece, the piece and
        its rows given)."""
        if self._piece < 0:
            return {"piece": 0, "given": int(self._pieces[0]["given"])}
        if self._piece < len(self._pieces):
            return {"piece": self._piece, "given": self._given}
        dtype = self._carried[0].dtype.str if self._carried else None
        return {"source": self._window_start, "given": self._given,
                "carried": [document.tolist() for document in self._carried], "dtype": dtype,
                "piece": self._piece}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue after the row :meth:`state_dict` was taken at."""
        self._source = iter(self._packed.source)
        piece = int(state.get("piece", len(self._pieces)))
        if piece < len(self._pieces):
            self._save_source = state_saver(self._source)
            self._consumed = 0
            self._ended = False
            self._window_start = self._source_state()
            self._carried, self._next_carry = [], []
            self._enter(piece, int(state["given"]))
            return
        self._piece = piece
        self._save_source = state_saver(self._source)
        self._consumed = 0
        if self._save_source is not None:
            self._source.load_state_dict(state["source"])  # type: ignore[attr-defined]
        else:
            self._consumed = int(state["source"])
            for _ in islice(self._source, self._consumed):
                pass
        self._ended = False
        self._window_start = state["source"]
        self._carried = [np.asarray(document, state["dtype"]) for document in state["carried"]]
        self._rows, self._next_carry = self._pack_window(self._carried)
        self._given = int(state["given"])

    def _source_state(self) -> Any:
        return self._save_source() if self._save_source is not None else self._consumed

    def _read_window(self) -> list[np.ndarray]:
        """Up to ``window`` documents from the source, cut to ``seq_len`` pieces."""
        items = list(islice(self._source, self._packed.window))
        first = self._consumed
        self._consumed += len(items)
        if len(items) < self._packed.window:
            self._ended = True
        return self._documents(items, first)

    def _documents(self, items: list[Any], first: int = 0) -> list[np.ndarray]:
        """The documents of ``items`` (the first being source item ``first``), cut to
        ``seq_len`` pieces."""
        packed = self._packed
        documents: list[np.ndarray] = []
        for position, item in enumerate(items, first):
            tokens = _tokens(item, packed.key, position)
            if documents and tokens.dtype != documents[0].dtype:
                raise TypeError(f"PackedDataset: document {position} is "
                                f"{tokens.dtype}, the ones before it {documents[0].dtype}")
            documents += [tokens[start:start + packed.seq_len]
                          for start in range(0, len(tokens), packed.seq_len)]
        return documents

    def _pack_window(self, carried: list[np.ndarray]) -> tuple[list[dict[str, Any]], list[Any]]:
        """This window's rows to give, and the documents of the row it carries on."""
        documents = self._read_window()
        return self._pack(documents, carried, self._ended)

    def _pack(self, documents: list[np.ndarray], carried: list[np.ndarray], ended: bool,
              carry_as_row: bool = False) -> tuple[list[dict[str, Any]], list[Any]]:
        """``documents`` packed after ``carried``: the rows to give, and the documents of
        the row carried on (``carry_as_row``: given last, as a row of its own)."""
        packed = self._packed
        if carried and documents:
            carried = [document.astype(documents[0].dtype) for document in carried]
        lengths = np.fromiter(map(len, documents), np.int64, len(documents))
        longest_first = np.argsort(-lengths, kind="stable")
        fill = np.zeros(len(documents) + 1, np.int64)
        fill[0] = sum(map(len, carried))
        bin_of = np.empty(len(documents), np.int64)
        rows = assign_bins(lengths[longest_first], fill, 1 if carried else 0, packed.seq_len,
                           packed.method == "best_fit", bin_of)
        # The carried documents come first in row 0, then each row's in the order placed.
        in_rows = [*carried, *(documents[i] for i in longest_first.tolist())]
        row_of = np.concatenate([np.zeros(len(carried), np.int64), bin_of])
        placed = np.argsort(row_of, kind="stable")
        in_rows = [in_rows[i] for i in placed.tolist()]
        row_ends = np.cumsum(np.bincount(row_of, minlength=rows))
        carry = -1
        if not ended and rows:
            least = int(np.argmin(fill[:rows]))
            carry = least if fill[least] < packed.seq_len else -1
        keep = [r for r in range(rows) if r != carry]
        if carry_as_row and carry >= 0:
            return _pack_rows(in_rows, row_ends, [*keep, carry], packed), []
        given = _pack_rows(in_rows, row_ends, keep, packed)
        first = 0 if carry <= 0 else int(row_ends[carry - 1])
        return given, in_rows[first:int(row_ends[carry])] if carry >= 0 else []


def _pack_rows(documents: list[np.ndarray], row_ends: np.ndarray, keep: list[int],
               packed: PackedDataset) -> list[dict[str, np.ndarray]]:
    """Rows ``keep`` of the documents (row ``r`` ends at document ``row_ends[r]``)."""
    if not keep:
        return []
    starts = np.concatenate([[0], row_ends[:-1]])
    chosen = [documents[d] for r in keep for d in range(starts[r], row_ends[r])]
    counts = np.fromiter(map(len, chosen), np.int64, len(chosen))
    ends = np.cumsum(row_ends[keep] - starts[keep])
    dtype = chosen[0].dtype
    shape = (len(keep), packed.seq_len)
    tokens, positions = np.empty(shape, dtype), np.empty(shape, np.int64)
    segments = np.empty(shape, np.int32)
    pad = np.asarray(packed.pad_value).astype(dtype).tobytes()
    pack_into(chosen, counts, ends, tokens, positions, segments, pad)
    rows = []
    first = 0
    for r, end in enumerate(ends.tolist()):
        boundaries = np.concatenate([[0], np.cumsum(counts[first:end])])
        if boundaries[-1] < packed.seq_len:
            boundaries = np.append(boundaries, packed.seq_len)
        rows.append({TOKENS: tokens[r], POSITIONS: positions[r], SEGMENTS: segments[r],
                     BOUNDARIES: boundaries.astype(np.int32)})
        first = end
    return rows


def _tokens(item: Any, key: str | None, position: int) -> np.ndarray:
    tokens = item[key] if key is not None else item
    if not isinstance(tokens, np.ndarray) or tokens.ndim != 1 or tokens.dtype.kind not in "iu":
        field = "" if key is None else f"[{key!r}]"
        described = (f"a {tokens.dtype} array of shape {tokens.shape}"
                     if isinstance(tokens, np.ndarray) else type(tokens).__name__)
        raise TypeError(f"PackedDataset: document {position}{field} should be a 1-D integer "
                        f"array, got {described}")
    return tokens


def collate_packed(rows: list[dict[str, np.ndarray]]) -> dict[str, Any]:
    """Packed rows as one batch, the document boundaries as flash-attention takes them.

    ``"input_ids"``, ``"position_ids"`` and ``"segment_ids"`` are stacked;
    ``"cu_seqlens"`` (int32) are the boundaries of every document of the
    flattened batch (``batch * seq_len`` tokens), and ``"max_seqlen"`` the
    longest document's length: the arguments of ``flash_attn_varlen_func``.

    Examples
    --------
    >>> import numpy as np
    >>> from dataloader import PackedDataset, collate_packed
    >>> rows = list(PackedDataset([np.arange(n) for n in (3, 5, 2)], seq_len=5, window=3))
    >>> batch = collate_packed(rows)
    >>> batch["input_ids"].shape, batch["cu_seqlens"].tolist(), batch["max_seqlen"]
    ((2, 5), [0, 5, 8, 10], 5)
    """
    if not rows:
        raise ValueError("collate_packed got an empty batch")
    batch = default_collate([{name: row[name] for name in (TOKENS, POSITIONS, SEGMENTS)}
                             for row in rows])
    seq_len = batch[TOKENS].shape[1]
    boundaries = [np.zeros(1, np.int64)]
    for r, row in enumerate(rows):
        boundaries.append(row[BOUNDARIES][1:].astype(np.int64) + r * seq_len)
    flat = np.concatenate(boundaries)
    batch[BOUNDARIES] = flat.astype(np.int32)
    batch["max_seqlen"] = int(np.diff(flat).max())
    return batch
