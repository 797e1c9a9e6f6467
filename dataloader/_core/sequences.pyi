"""Sequence kernels: variable-length items padded into a batch, documents packed into rows."""

import numpy as np

def pad_into(arrays: list[np.ndarray], out: np.ndarray, counts: np.ndarray, pad: bytes,
             left: bool, mask: np.ndarray | None = None) -> None: ...
def assign_bins(lengths: np.ndarray, fill: np.ndarray, open_bins: int, capacity: int,
                best_fit: bool, bin_of: np.ndarray) -> int: ...
def pack_into(documents: list[np.ndarray], counts: np.ndarray, row_ends: np.ndarray,
              tokens: np.ndarray, positions: np.ndarray, segments: np.ndarray,
              pad: bytes) -> None: ...
