"""Numba kernels building bitmark's *ends*: per marking row (a bucket of an indexed attribute)
and tile of words, the slots whose interval starts inside the bucket, sorted by low bound, then
those ending inside it, sorted by high bound (see :class:`~matchers.bitmark.layout.Layout`).

Both modes build them one way (:func:`row_ends`): two passes over the slots count the ends per
row and segment, then place them grouped by row (a bound as the :func:`_ordered` bits, its segment
in the row and the slot's position in its tile as a tag: no array per interval), and an LSD
radix sort per row orders them by bound (stable: ties in slot order).  A row's ends then go to
their segments in order: the narrow mode stores each end's bound and slot
(:func:`build_ends`), the wide mode packs it (:func:`build_wide_ends`).
"""

from __future__ import annotations

import numba
import numpy as np

from matchers.bitmark.kernels import _ends_inside, _starts_inside
from matchers.bitmark.sorts import RADIX_BITS, radix_sort

SIGN = np.uint64(1) << np.uint64(63)


@numba.njit(cache=True, nogil=True, inline="always")
def offset_bits(tile):
    """Bits of a slot's position in its tile of ``tile`` words (the low bits of a packed end)."""
    bits = 0
    while (1 << bits) < 64 * tile:
        bits += 1
    return bits


@numba.njit(cache=True, nogil=True, inline="always")
def _ordered(bits):
    """A float64's bits as a uint64 in the float's order (-0.0 as 0.0; no NaN here)."""
    bits = np.uint64(0) if bits == SIGN else bits
    return ~bits if bits & SIGN else bits | SIGN


@numba.njit(cache=True, nogil=True, inline="always")
def _unordered(k):
    """The float64 bits of an :func:`_ordered` key."""
    return k ^ SIGN if k & SIGN else ~k


@numba.njit(cache=True, nogil=True, inline="always")
def small_tags(n_main, tile):
    """Whether every tag of :func:`row_ends` over ``n_main`` slots fits in a ``uint32``."""
    tiles = max(1, (n_main + 64 * tile - 1) // (64 * tile))
    return (np.int64(2 * tiles) << offset_bits(tile)) <= np.int64(1) << 32


@numba.njit(cache=True, nogil=True)
def row_ends(slots, n_main, idx_of_col, row_start, edge_off, edges, tile, ib, tag_like):
    """The ends of slots ``0..n_main-1`` (their intervals' buckets ``ib``: :func:`~matchers.bitmark.kernels.interval_buckets`)
    grouped by row, each row's sorted by bound:
    ``(end_off, row_off, key, tag)``.  ``end_off`` is the CSR of the segments (``2 * (row * tiles +
    tile) + kind``, kind 0 the low ends), ``row_off`` that of the rows over ``key`` (the bounds as
    the :func:`_ordered` bits) and ``tag`` (``(2 * tile + kind) << offset_bits(tile) | position`` of the
    slot in its tile), of ``tag_like``'s type: ``uint32`` when :func:`small_tags` (12 bytes an end
    to place and sort, not 16), else ``int64``."""
    iv_off, iv_col, iv_lo, iv_hi = slots.iv_off, slots.iv_col, slots.iv_lo, slots.iv_hi
    span = 64 * tile
    tiles = max(1, (n_main + span - 1) // span)
    shift = offset_bits(tile)
    n_rows = row_start[-1]
    lo_bits, hi_bits = iv_lo.view(np.uint64), iv_hi.view(np.uint64)
    row_off = np.zeros(n_rows + 1, dtype=np.int64)
    end_off = np.zeros(2 * n_rows * tiles + 1, dtype=np.int64)
    key = np.empty(0, dtype=np.uint64)
    tag = np.empty(0, dtype=tag_like.dtype)
    fill = row_off[:-1].copy()
    for step in range(2):  # count the ends per row and segment, then place them grouped by row
        if step:
            for r in range(n_rows):
                row_off[r + 1] += row_off[r]
            for i in range(len(end_off) - 1):
                end_off[i + 1] += end_off[i]
            fill = row_off[:-1].copy()
            key = np.empty(row_off[-1], dtype=np.uint64)
            tag = np.empty(row_off[-1], dtype=tag_like.dtype)
        for s in range(n_main):  # the ends inside a bucket, in slot order
            g = s // span
            pos = s - g * span
            for t in range(iv_off[s], iv_off[s + 1]):
                j = idx_of_col[iv_col[t]]
                if j < 0:
                    continue
                e0, e1 = edge_off[j], edge_off[j + 1]
                for kind in range(2):
                    x = iv_lo[t] if kind == 0 else iv_hi[t]
                    b = ib[t, kind]
                    if not (_starts_inside(edges, e0, b, x) if kind == 0 else _ends_inside(edges, e0, e1, b, x)):
                        continue
                    r = row_start[j] + b
                    if step:
                        i = fill[r]
                        key[i] = _ordered(lo_bits[t] if kind == 0 else hi_bits[t])
                        tag[i] = ((2 * g + kind) << shift) | pos
                        fill[r] = i + 1
                    else:
                        row_off[r + 1] += 1
                        end_off[2 * (r * tiles + g) + kind + 1] += 1
    widest = 0
    for r in range(n_rows):
        widest = max(widest, row_off[r + 1] - row_off[r])
    key2, tag2 = np.empty(widest, dtype=np.uint64), np.empty(widest, dtype=tag_like.dtype)
    hist = np.empty((64 // RADIX_BITS + 1, 1 << RADIX_BITS), dtype=np.int64)
    for r in range(n_rows):
        a, b = row_off[r], row_off[r + 1]
        radix_sort(key[a:b], tag[a:b], key2[:b - a], tag2[:b - a], hist)
    return end_off, row_off, key, tag


@numba.njit(cache=True, nogil=True)
def build_ends(slots, n_main, idx_of_col, row_start, edge_off, edges, tile, ib):
    """The narrow mode's ends: per segment (see :func:`row_ends`) each end's bound and slot,
    sorted by bound (ties in slot order): ``(end_off, end_val, end_slot int32)``."""
    if small_tags(n_main, tile):
        return _build_ends(slots, n_main, idx_of_col, row_start, edge_off, edges, tile, ib, np.empty(0, np.uint32))
    return _build_ends(slots, n_main, idx_of_col, row_start, edge_off, edges, tile, ib, np.empty(0, np.int64))


@numba.njit(cache=True, nogil=True)
def _build_ends(slots, n_main, idx_of_col, row_start, edge_off, edges, tile, ib, tag_like):
    end_off, row_off, key, tag = row_ends(slots, n_main, idx_of_col, row_start, edge_off, edges, tile, ib, tag_like)
    shift = offset_bits(tile)
    low = (np.int64(1) << shift) - 1
    span = 64 * tile
    tiles = (len(end_off) - 1) // max(1, 2 * (len(row_off) - 1))
    at = end_off[:-1].copy()
    val_bits = np.empty(len(key), dtype=np.uint64)
    end_slot = np.empty(len(key), dtype=np.int32)
    for r in range(len(row_off) - 1):
        for i in range(row_off[r], row_off[r + 1]):
            t = np.int64(tag[i])
            seg = 2 * r * tiles + (t >> shift)
            k = at[seg]
            val_bits[k] = _unordered(key[i])
            end_slot[k] = (t >> shift >> 1) * span + (t & low)
            at[seg] = k + 1
    return end_off, val_bits.view(np.float64), end_slot


@numba.njit(cache=True, nogil=True, inline="always")
def _pack_ends(end_off, row_off, key, tag, tiles, shift, val_off, val_bits, out):
    """In one pass over each row's sorted ends: its distinct bounds as float64 bits into
    ``val_bits`` (``val_off`` CSR), and each end into ``out`` at its place in its segment, its
    bound's rank among them shifted by ``shift``, or'ed with its position in its tile.  Returns
    the number of distinct bounds."""
    low = (np.int64(1) << shift) - 1
    at = end_off[:-1].copy()
    u = 0
    for r in range(len(row_off) - 1):
        a, b = row_off[r], row_off[r + 1]
        for i in range(a, b):
            if i == a or key[i] != key[i - 1]:  # a new distinct bound, back to float64 bits
                val_bits[u] = _unordered(key[i])
                u += 1
            t = np.int64(tag[i])
            seg = 2 * r * tiles + (t >> shift)
            out[at[seg]] = (np.int64(u - 1 - val_off[r]) << shift) | (t & low)
            at[seg] += 1
        val_off[r + 1] = u
    return u


@numba.njit(cache=True, nogil=True, inline="always")
def _fits32(ranks, shift):
    """Whether an end packed with ``ranks`` distinct bounds in its row fits in 32 bits."""
    return ranks == 0 or ((np.int64(ranks - 1) << shift) | ((np.int64(1) << shift) - 1)) < np.int64(1) << 32


@numba.njit(cache=True, nogil=True)
def _most_distinct(row_off, key):
    """The most distinct keys in a row of the sorted rows."""
    most = 0
    for r in range(len(row_off) - 1):
        u = 0
        for i in range(row_off[r], row_off[r + 1]):
            u += i == row_off[r] or key[i] != key[i - 1]
        most = max(most, u)
    return most


@numba.njit(cache=True, nogil=True)
def build_wide_ends(slots, n_main, idx_of_col, row_start, edge_off, edges, tile, ib):
    """The wide mode's ends: per row, the distinct bounds inside its bucket, sorted (``val_off``
    CSR over ``val``); per segment (see :func:`row_ends`) the ends, each packed as
    ``rank << offset_bits(tile) | position``: the bound's rank among its row's distinct bounds and
    the slot's position in its tile, sorted.  Returns ``(end_off, key32, key64, val_off, val)``:
    the packed ends are ``key32`` (uint32) when every one fits in 32 bits, else ``key64``
    (uint64); the other is empty."""
    if small_tags(n_main, tile):
        return _build_wide_ends(slots, n_main, idx_of_col, row_start, edge_off, edges, tile, ib,
                                np.empty(0, np.uint32))
    return _build_wide_ends(slots, n_main, idx_of_col, row_start, edge_off, edges, tile, ib, np.empty(0, np.int64))


@numba.njit(cache=True, nogil=True)
def _build_wide_ends(slots, n_main, idx_of_col, row_start, edge_off, edges, tile, ib, tag_like):
    end_off, row_off, key, tag = row_ends(slots, n_main, idx_of_col, row_start, edge_off, edges, tile, ib, tag_like)
    n_rows = len(row_off) - 1
    tiles = (len(end_off) - 1) // max(1, 2 * n_rows)
    shift = offset_bits(tile)
    longest = 0
    for r in range(n_rows):
        longest = max(longest, row_off[r + 1] - row_off[r])
    small = _fits32(longest, shift) or _fits32(_most_distinct(row_off, key), shift)  # (the rows' lengths bound it)
    key32 = np.empty(len(key) if small else 0, dtype=np.uint32)
    key64 = np.empty(0 if small else len(key), dtype=np.uint64)
    val_off = np.zeros(n_rows + 1, dtype=np.int64)
    val_bits = np.empty(len(key), dtype=np.uint64)
    if small:
        u = _pack_ends(end_off, row_off, key, tag, tiles, shift, val_off, val_bits, key32)
    else:
        u = _pack_ends(end_off, row_off, key, tag, tiles, shift, val_off, val_bits, key64)
    return end_off, key32, key64, val_off, val_bits[:u].copy().view(np.float64)
