"""Growable arrays: the one way an index enlarges a column, in Python and in a kernel.

Columns are allocated with spare capacity and grown geometrically (at least doubled), so
that appending ``n`` rows one batch at a time costs O(n) copies in total.
"""

from __future__ import annotations

import numba
import numpy as np


def grown(arr: np.ndarray, n: int, fill: float = 0) -> np.ndarray:
    """``arr`` if it holds ``n`` rows, else a copy grown (at least doubled, at least 64 rows)
    whose new rows hold ``fill``."""
    if n <= len(arr):
        return arr
    out = np.full((max(n, 2 * len(arr), 64), *arr.shape[1:]), fill, dtype=arr.dtype)
    out[: len(arr)] = arr
    return out


@numba.njit(cache=True, nogil=True)
def enlarged(arr, keep, n):
    """Inside a kernel: a copy of ``arr[:keep]`` in a new array of at least ``n`` and at least
    twice ``len(arr)`` rows (the rest uninitialised)."""
    out = np.empty(max(n, 2 * len(arr)), dtype=arr.dtype)
    out[:keep] = arr[:keep]
    return out
