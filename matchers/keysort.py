"""Kernels that sort a short run of small non-negative integers (an event's matched keys, or
their ranks) in place: distinct ones (:func:`sort_distinct`) by insertion when there are few,
through a bitmap when the values span few 64-bit words for their number, else with
``np.sort``; with repeats dropped (:func:`sort_unique`) through the bitmap."""

from __future__ import annotations

import numba
import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

FEW = 16
"""Runs this short are sorted by insertion."""
WORDS_PER_VALUE = 4
"""The bitmap is read when the values span at most this many words per value."""


def bitmap_for(n_values: int) -> np.ndarray:
    """A zeroed bitmap for values below ``n_values``, for :func:`sort_distinct`."""
    return np.zeros((max(n_values, 1) + 63) >> 6, np.uint64)


@numba.njit(cache=True, nogil=True)
def sort_distinct(a, lo, hi, bits):
    """Sort ``a[lo:hi]`` in place: distinct values, each below ``64 * len(bits)``.

    ``bits`` is all zero on entry and on return (each word read is cleared).
    """
    n = hi - lo
    if n <= FEW:
        for i in range(lo + 1, hi):
            v = a[i]
            j = i - 1
            while j >= lo and a[j] > v:
                a[j + 1] = a[j]
                j -= 1
            a[j + 1] = v
        return
    low = a[lo]
    top = low
    for i in range(lo + 1, hi):
        v = a[i]
        if v < low:
            low = v
        elif v > top:
            top = v
    w0, w1 = low >> 6, top >> 6
    if w1 - w0 + 1 > WORDS_PER_VALUE * n:
        a[lo:hi].sort()
        return
    one = np.uint64(1)
    for i in range(lo, hi):
        v = a[i]
        bits[v >> 6] |= one << np.uint64(v & 63)
    _read_bits(a, lo, w0, w1, bits)


@numba.njit(cache=True, nogil=True)
def sort_unique(a, lo, hi, bits):
    """Sort ``a[lo:hi]`` (values below ``64 * len(bits)``) in place without its repeats; returns
    the new end.  Through the bitmap ``bits`` (zero on entry and on return): read word by word
    when the values span few words for their number, else the values kept in order and sorted."""
    if hi <= lo:
        return hi
    one = np.uint64(1)
    low = a[lo]
    top = low
    for i in range(lo, hi):
        v = a[i]
        bits[v >> 6] |= one << np.uint64(v & 63)
        low = min(low, v)
        top = max(top, v)
    w0, w1 = low >> 6, top >> 6
    if w1 - w0 + 1 <= WORDS_PER_VALUE * (hi - lo):
        return _read_bits(a, lo, w0, w1, bits)
    pos = lo
    for i in range(lo, hi):
        v = a[i]
        bit = one << np.uint64(v & 63)
        if bits[v >> 6] & bit:
            bits[v >> 6] ^= bit
            a[pos] = v
            pos += 1
    a[lo:pos].sort()
    return pos


@numba.njit(cache=True, nogil=True, inline="always")
def _read_bits(a, pos, w0, w1, bits):
    """Write at ``a[pos:]`` the values whose bits are set in the words ``w0..w1`` of ``bits``, in
    order, clearing them; returns the new end."""
    one = np.uint64(1)
    for w in range(w0, w1 + 1):
        x = bits[w]
        if x:
            bits[w] = 0
            base = w << 6
            while x:
                a[pos] = base + np.int64(trailing_zeros(x))
                pos += 1
                x &= x - one
    return pos
