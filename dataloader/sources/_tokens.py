"""``TokenDataset``: fixed-length windows of a flat file of token ids."""

from __future__ import annotations

import operator
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from dataloader._datasets.dataset import Dataset
from dataloader.sources._common import item_index

__all__ = ["TokenDataset"]

# Token ids become int64, the index type of torch's embeddings and losses.
OUTPUT_DTYPE = np.int64


class TokenDataset(Dataset[tuple]):
    """Windows of ``seq_len + 1`` tokens of a flat token file, as ``(input, target)``.

    The file is what nanoGPT's ``prepare.py`` (and Megatron's, without its
    index) writes: the token ids of the whole corpus one after the other,
    as raw ``uint16`` (or ``uint32``) values. It is memory-mapped, never
    read whole. Item ``i`` is the window starting at token ``i * stride``,
    split as nanoGPT's ``get_batch`` splits it: ``input`` is its first
    ``seq_len`` tokens and ``target`` the same shifted by one, both
    ``int64``; a batch is ``(inputs, targets)``, two ``(batch_size,
    seq_len)`` arrays. Windows cross documents, as nanoGPT's do; given
    ``documents``, the start of each document, an item also has
    ``positions``: each input token's position within its document,
    restarting at 0 at every document's first token (the ``position_ids``
    from which variable-length attention finds the documents, so that no
    token attends across them).

    A batch's windows are cut out of the mapping in one gather
    (``__getitems__``).

    Parameters
    ----------
    path_or_array : str, path or 1-D integer array
        A raw token file, or the tokens themselves (an ``np.memmap`` too,
        though worker processes then receive a copy of the tokens, and
        only the path of a file given by its path).
    seq_len : int
        Tokens of an input (the window holds one more, for the last target).
    stride : int, optional
        Tokens from one window's start to the next; ``seq_len`` by default
        (every token is a target once). ``stride=1`` gives every window, as
        nanoGPT's random offsets draw them, with ``shuffle=True``.
    dtype : numpy dtype, default ``numpy.uint16``
        The file's token type (ignored for an array).
    documents : 1-D integer array, str or path, optional
        The sorted offsets of the documents' first tokens (or a ``.npy``
        file of them); the tokens before the first offset form a document.

    Raises
    ------
    FileNotFoundError, OSError
        A file that cannot be opened.
    ValueError
        ``seq_len`` or ``stride`` not positive, a file shorter than one
        window, a file size that is not a whole number of tokens, document
        offsets not increasing or out of the file.
    TypeError
        An array that is not 1-D integers.
    IndexError
        An index out of range.

    Examples
    --------
    >>> import numpy as np, pathlib, tempfile
    >>> from dataloader import DataLoader
    >>> from dataloader.sources import TokenDataset
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "train.bin"
    >>> np.arange(10, dtype=np.uint16).tofile(path)
    >>> dataset = TokenDataset(path, seq_len=4)
    >>> len(dataset), dataset[1]
    (2, (array([4, 5, 6, 7]), array([5, 6, 7, 8])))
    >>> x, y = next(iter(DataLoader(TokenDataset(path, seq_len=3, stride=1), batch_size=2)))
    >>> x.tolist(), y.tolist()
    ([[0, 1, 2], [1, 2, 3]], [[1, 2, 3], [2, 3, 4]])
    >>> with_documents = TokenDataset(path, seq_len=4, documents=[0, 3, 7])
    >>> with_documents[1][2]
    array([1, 2, 3, 0])
    """

    # Windows are numpy slices of a mapping: microseconds each, fewer than a
    # worker process would spend receiving a request; worker_type="auto" keeps threads.
    native_loading = True

    def __init__(
        self,
        path_or_array: str | os.PathLike[str] | np.ndarray,
        seq_len: int,
        *,
        stride: int | None = None,
        dtype: Any = np.uint16,
        documents: str | os.PathLike[str] | Sequence[int] | np.ndarray | None = None,
    ) -> None:
        self.seq_len = _positive(seq_len, "seq_len")
        self.stride = self.seq_len if stride is None else _positive(stride, "stride")
        self.dtype = np.dtype(dtype)
        self.path = os.fspath(path_or_array) if isinstance(path_or_array, (str, os.PathLike)) \
            else None
        self.tokens = _mapped(self.path, self.dtype) if self.path else _token_array(path_or_array)
        window = self.seq_len + 1
        if len(self.tokens) < window:
            raise ValueError(
                f"seq_len={self.seq_len} needs windows of {window} tokens, but "
                f"{self.path or 'the array'} has {len(self.tokens)} tokens")
        self.documents = None if documents is None else _document_starts(
            documents, len(self.tokens))
        self._window = np.arange(window, dtype=np.int64)

    # A mapped file travels to a worker process as its path, not its tokens.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if self.path is not None:
            del state["tokens"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self.path is not None:
            self.tokens = _mapped(self.path, self.dtype)

    def __len__(self) -> int:
        return (len(self.tokens) - self.seq_len - 1) // self.stride + 1

    def __getitem__(self, index: int) -> tuple[np.ndarray, ...]:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> list[tuple[np.ndarray, ...]]:
        """The windows at ``indices``, gathered from the tokens at once."""
        length = len(self)
        starts = np.fromiter((item_index(i, length, "TokenDataset") * self.stride
                              for i in indices), np.int64, len(indices))
        windows = self.tokens[starts[:, None] + self._window].astype(OUTPUT_DTYPE)
        inputs, targets = windows[:, :-1], windows[:, 1:]
        if self.documents is None:
            return list(zip(inputs, targets, strict=True))
        offsets = starts[:, None] + self._window[:-1]
        # Each input token's distance from the first token of its document.
        document = np.searchsorted(self.documents, offsets, side="right") - 1
        positions = offsets - self.documents[document]
        return list(zip(inputs, targets, positions, strict=True))

    def __repr__(self) -> str:
        source = self.path or f"array of {len(self.tokens)}"
        return (f"{type(self).__name__}({source}, seq_len={self.seq_len}, stride={self.stride}, "
                f"{len(self)} windows)")


def _mapped(path: str, dtype: np.dtype) -> np.ndarray:
    size = os.stat(path).st_size
    if size % dtype.itemsize:
        raise ValueError(
            f"{path} has {size} bytes, not a whole number of {dtype} tokens "
            f"({dtype.itemsize} bytes each): is dtype right?")
    if size == 0:  # np.memmap refuses an empty file
        return np.empty(0, dtype)
    # A plain array over the mapping (which it keeps alive): windows cut
    # out of it are arrays, not memmaps pretending to be backed by the file.
    return np.memmap(path, dtype=dtype, mode="r").view(np.ndarray)


def _positive(value: Any, name: str) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{name} should be an int, got {name}={value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} should be an int, got {name}={value!r}") from None
    if number < 1:
        raise ValueError(f"{name} should be positive, got {name}={value!r}")
    return number


def _token_array(array: Any) -> np.ndarray:
    tokens = np.asarray(array)
    if tokens.ndim != 1 or tokens.dtype.kind not in "iu":
        raise TypeError(
            f"TokenDataset takes a 1-D integer array of token ids, got an array of shape "
            f"{tokens.shape} and dtype {tokens.dtype}")
    return tokens


def _document_starts(documents: Any, length: int) -> np.ndarray:
    """The documents' first offsets as a sorted int64 array starting at 0."""
    if isinstance(documents, (str, os.PathLike)):
        documents = np.load(documents)
    starts = np.asarray(documents)
    if starts.ndim != 1 or (starts.size and starts.dtype.kind not in "iu"):
        raise TypeError(f"documents should be a 1-D array of token offsets, got {starts!r}")
    starts = starts.astype(np.int64)
    if starts.size and (np.any(np.diff(starts) <= 0) or starts[0] < 0 or starts[-1] >= length):
        raise ValueError(
            f"documents should be increasing offsets in [0, {length}), got {documents!r}")
    return starts if starts.size and starts[0] == 0 else np.concatenate([[0], starts])
