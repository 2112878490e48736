"""Numba kernels the OpIndex engines and the k-index share: hashing, the output buffer, the
sort of matched keys, an item's test on an event value.

The engines' own kernels: :mod:`.paper_kernels` (the paper's predicate lists),
:mod:`.store_kernels` (the entry store), :mod:`.kindex_kernels` (the k-index baseline).
Plain ``njit`` functions over contiguous arrays.  Only scalar helpers are
``inline="always"``: numba's IR-level inlining of a helper that takes arrays makes each
call in the caller's loop update the arrays' reference counts (atomic calls); as plain
calls they cost nothing of the kind (measured on ``match_entries``: a fifth of its time at
N = 1M, a third on a small index).
"""

from __future__ import annotations

import numba
import numpy as np

from matchers.arrays import enlarged

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
GOLD = np.uint64(0x9E3779B97F4A7C15)


@numba.njit(cache=True, nogil=True)
def push(out_keys, n_out, key):
    """Append ``key`` at ``n_out``, doubling ``out_keys`` when full."""
    if n_out == len(out_keys):
        out_keys = enlarged(out_keys, n_out, 2 * len(out_keys) + 16)
    out_keys[n_out] = key
    return out_keys, n_out + 1


RADIX_BITS = 8
"""Bits of the counting pass of :func:`sort_unique` (``2 ** RADIX_BITS`` buckets)."""


@numba.njit(cache=True, nogil=True)
def sort_unique(out_keys, first, n_out, count):
    """Sort the keys ``out_keys[first:n_out]`` (not negative) and drop repeats in place;
    returns ``(out_keys, end)``.

    One counting pass distributes the keys by the top :data:`RADIX_BITS` bits of their
    range (through the array's tail, grown when short; ``count``: ``2 ** RADIX_BITS + 1``
    scratch counters), then an insertion sort finishes the nearly sorted run: about three
    times faster than a quicksort on the ~80 matches of an event."""
    n = n_out - first
    if n < 2:
        return out_keys, n_out
    if n_out + n > len(out_keys):
        out_keys = enlarged(out_keys, n_out, 2 * (n_out + n))
    hi = out_keys[first]
    for t in range(first + 1, n_out):
        hi = max(hi, out_keys[t])
    shift = 0
    while hi >> shift >= (1 << RADIX_BITS):
        shift += 1
    count[:] = 0
    for t in range(first, n_out):
        count[(out_keys[t] >> shift) + 1] += 1
    for b in range(1 << RADIX_BITS):
        count[b + 1] += count[b]
    for t in range(first, n_out):
        b = out_keys[t] >> shift
        out_keys[n_out + count[b]] = out_keys[t]
        count[b] += 1
    u = first
    for t in range(n_out, n_out + n):
        x = out_keys[t]
        v = u
        while v > first and out_keys[v - 1] > x:
            v -= 1
        if v > first and out_keys[v - 1] == x:  # a repeat
            continue
        for z in range(u, v, -1):
            out_keys[z] = out_keys[z - 1]
        out_keys[v] = x
        u += 1
    return out_keys, u


@numba.njit(cache=True, nogil=True, inline="always")
def mix(x):
    """splitmix64 finaliser of a uint64."""
    z = np.uint64(x) + GOLD
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))



@numba.njit(cache=True, nogil=True)
def fires(family, v, o, j, ev_soff, ev_spid):
    """Whether an item of ``family`` and operand ``o`` fires on the event value ``v`` (at ``j``)."""
    if family == 0:
        return v == o
    if family == 1:
        return v <= o
    if family == 2:
        return v >= o
    if family == 3:
        return True
    for q in range(ev_soff[j], ev_soff[j + 1]):
        if ev_spid[q] == o:
            return True
    return False

