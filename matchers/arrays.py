"""Growable arrays: the one way an index enlarges a column, in Python and in a kernel;
the reuse of freed rows; and the binary searches kernels run over sorted columns.

Columns are allocated with spare capacity and grown geometrically (at least doubled), so
that appending ``n`` rows one batch at a time costs O(n) copies in total.
"""

from __future__ import annotations

from typing import Any

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


def new_row(free: list[int], top: int) -> tuple[int, int]:
    """The row of a new record: the last one freed, else ``top``; and the top after it."""
    return (free.pop(), top) if free else (top, top + 1)


def stored(items: Any, free: list[int], item: Any) -> int:
    """Put ``item`` into ``items`` (a list, or anything with ``append`` and item assignment)
    at the last index freed, else at the end; its index."""
    if free:
        i = free.pop()
        items[i] = item
        return i
    items.append(item)
    return len(items) - 1


@numba.njit(cache=True, nogil=True)
def enlarged(arr, keep, n):
    """Inside a kernel: a copy of ``arr[:keep]`` in a new array of at least ``n`` and at least
    twice ``len(arr)`` rows (the rest uninitialised)."""
    out = np.empty(max(n, 2 * len(arr)), dtype=arr.dtype)
    out[:keep] = arr[:keep]
    return out


@numba.njit(cache=True, nogil=True)
def lower_bound(keys, lo, hi, key):
    """Inside a kernel: the first position in ``[lo, hi)`` of the sorted ``keys`` whose key
    is not less than ``key`` (``hi`` if none)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    return lo


@numba.njit(cache=True, nogil=True)
def lower_bound2(major, minor, lo, hi, key, sub):
    """:func:`lower_bound` over rows sorted by ``(major, minor)``: the first position in
    ``[lo, hi)`` whose pair is not less than ``(key, sub)``."""
    while lo < hi:
        mid = (lo + hi) >> 1
        k = major[mid]
        if k < key or (k == key and minor[mid] < sub):
            lo = mid + 1
        else:
            hi = mid
    return lo
