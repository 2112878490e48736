"""Numba kernels of bitmark's wide mode: the marking of a chunk of events an attribute at a time.

At wide intervals (width 0.7: an event fails a slot on one attribute with probability 0.3)
the envelopes skip few words and no word is ever fully marked, so every event reads every
word of its ``d`` rows: the floor is ``d x words`` ORs per event.  The narrow mode adds to it
a walk over the ends of each of the event's buckets, per event.  Here, per tile of words,
the chunk's events are taken per indexed attribute in the order of their values
(:func:`value_order`): the events in one bucket share one running bitset, the bucket's row
(the slots failing its low edge) from which the low ends at or below the value are cleared
and to which the high ends below it are added, while walking the bucket's ends once for all
of them in increasing order of the value; each event ORs it into its marks (one OR per
attribute and word).  The ends are packed (:func:`~matchers.bitmark.ends.build_wide_ends`): 4 bytes each, compared
as integers with limits found once per chunk (:func:`end_limits`).  The matching slots' keys
are written from the marks of each tile while they are in the cache, as positions in the tile
(:func:`match_wide`).
"""

from __future__ import annotations

import numba
import numpy as np

from matchers.bitmark.emit import emit_positions, grown
from matchers.bitmark.ends import offset_bits
from matchers.bitmark.kernels import _holds, _low_bit


@numba.njit(cache=True, nogil=True)
def mean_width(slots, which, indexed, col_min, col_span):
    """The mean width (a share of the column's span) of the intervals of the slots ``which``
    on the columns ``indexed`` (0 when none)."""
    iv_off, iv_col, iv_lo, iv_hi = slots.iv_off, slots.iv_col, slots.iv_lo, slots.iv_hi
    total = 0.0
    count = 0
    for s in which:
        for t in range(iv_off[s], iv_off[s + 1]):
            c = iv_col[t]
            if indexed[c]:
                lo = max(iv_lo[t], col_min[c])
                hi = min(iv_hi[t], col_min[c] + col_span[c])
                total += max(hi - lo, 0.0) / col_span[c]
                count += 1
    return total / count if count else 0.0


@numba.njit(cache=True, nogil=True)
def value_order(vals, rows, idx_col):
    """Per indexed attribute ``j``, the chunk's events sorted by their row (bucket) and then by
    value: ``order[j]`` (events lacking the attribute are in its last row, after all others)."""
    n, n_idx = rows.shape
    order = np.empty((n_idx, n), dtype=np.int64)
    key = np.empty(n)
    for j in range(n_idx):
        c = idx_col[j]
        for e in range(n):
            v = vals[e, c]
            key[e] = np.inf if np.isnan(v) else v
        by_value = np.argsort(key, kind="mergesort")
        by_row = np.argsort(rows[by_value, j], kind="mergesort")
        order[j] = by_value[by_row]
    return order


@numba.njit(cache=True, nogil=True)
def end_limits(vals, rows, layout, tile):
    """Per event and indexed attribute, the packed ends (of the event's row) below which the low
    ends are at or below its value (``[:, :, 0]``) and the high ends below it (``[:, :, 1]``).

    The chunk's binary searches in the rows' distinct bounds go in lockstep, one step of every
    event's at a time: their loads are independent (one search after another waits on each)."""
    n, n_idx = rows.shape
    val_off, val = layout.val_off, layout.end_val
    shift = offset_bits(tile)
    lim = np.empty((n, n_idx, 2), dtype=np.int64)
    base = np.empty(n, dtype=np.int64)
    left = np.empty(n, dtype=np.int64)
    for j in range(n_idx):
        c = layout.idx_col[j]
        for e in range(n):
            r = rows[e, j]  # an attribute's missing row has no bounds
            base[e], left[e] = val_off[r], val_off[r + 1] - val_off[r]
        more = True
        while more:  # base[e] + 1: the bounds <= v found so far, of a row's first left[e]
            more = False
            for e in range(n):
                m = left[e]
                if m > 1:
                    half = m >> 1
                    base[e] = base[e] + half if val[base[e] + half - 1] <= vals[e, c] else base[e]
                    left[e] = m - half
                    more = True
        for e in range(n):
            a = val_off[rows[e, j]]
            at = base[e] - a + (left[e] == 1 and val[base[e]] <= vals[e, c])  # bounds <= v
            lim[e, j, 0] = np.int64(at) << shift
            lim[e, j, 1] = np.int64(at - (at > 0 and val[a + at - 1] == vals[e, c])) << shift  # < v (distinct)
    return lim


@numba.njit(cache=True, nogil=True, inline="always")
def _mark_bucket(layout, lim, mask, rows, order, j, i0, i1, g, tiles, w0, w1, acc, run):
    """Mark in ``acc`` the slots failing the events ``order[j, i0:i1]`` (one bucket of attribute
    ``j``, sorted by value) in tile ``g``.

    The running bitset starts as the bucket's row, which in the wide mode holds the slots
    failing the bucket's low edge: those missing the bucket and those starting inside it
    (``build_bits(at_edge=True)``); going up the values, a low end at or below the value is
    cleared and a high end below it set (``lim``: :func:`end_limits`; ``mask`` keeps a packed
    end's position in the tile), four at a time while the fourth is passed (one compare and
    branch for four: 5-7% less marking time at width 0.7).  A slot has at most one end of each kind in a bucket, and no
    other reason to be in the row: the bitset is exact for each value.  The first attribute
    starts the marks (with the dead slots) instead of ORing into them."""
    end_off, end_key, live = layout.end_off, layout.end_key, layout.live
    tw = w1 - w0
    r = rows[order[j, i0], j]
    bits = layout.bits
    one = np.uint64(1)
    for k in range(tw):
        run[k] = bits[r, w0 + k]
    seg = 2 * (r * tiles + g)
    lo, lo_end = end_off[seg], end_off[seg + 1]  # low bounds, ascending
    hi, hi_end = lo_end, end_off[seg + 2]  # high bounds, ascending
    for i in range(i0, i1):
        e = order[j, i]
        x = lim[e, j, 0]
        while lo + 4 <= lo_end and np.int64(end_key[lo + 3]) < x:  # four at a time (sorted)
            for q in range(lo, lo + 4):
                p = np.int64(end_key[q]) & mask
                run[p >> 6] &= ~(one << np.uint64(p & 63))
            lo += 4
        while lo < lo_end and np.int64(end_key[lo]) < x:
            p = np.int64(end_key[lo]) & mask
            run[p >> 6] &= ~(one << np.uint64(p & 63))
            lo += 1
        x = lim[e, j, 1]
        while hi + 4 <= hi_end and np.int64(end_key[hi + 3]) < x:
            for q in range(hi, hi + 4):
                p = np.int64(end_key[q]) & mask
                run[p >> 6] |= one << np.uint64(p & 63)
            hi += 4
        while hi < hi_end and np.int64(end_key[hi]) < x:
            p = np.int64(end_key[hi]) & mask
            run[p >> 6] |= one << np.uint64(p & 63)
            hi += 1
        if j == 0:  # the first attribute starts the marks: the dead slots and its own
            for k in range(tw):
                acc[e, k] = run[k] | ~live[w0 + k]
        else:
            for k in range(tw):
                acc[e, k] |= run[k]


@numba.njit(cache=True, nogil=True)
def match_wide(vals, rows, sat_off, sat_pid, layout, slots, tile, buf):
    """The keys of the matching indexed slots of a chunk of events, by marking a tile at a time
    for the whole chunk, an attribute at a time (see the module docstring).  The slots of the
    check mask that survive the marking are checked exactly.

    The matching slots are written tile after tile, straight from the marks while they are in
    the cache (no bitmap of the chunk's matching slots, 62 MB at 500 events and 1,000,000
    slots, written and read back), as their positions in the tile (``buf``: ``uint16`` up to
    1,024 words a tile, 2 bytes per match where a key takes 4): event ``e``'s in tile ``g`` at
    ``buf[seg[g * n + e]:seg[g * n + e + 1]]``, in slot order
    (:func:`~matchers.bitmark.emit.emit_positions`); :func:`~matchers.bitmark.emit.gather_keys`
    makes them keys, as CSR.  Returns ``(buf, seg)``: ``buf`` itself, or a longer copy when it
    was short."""
    n, n_idx = rows.shape
    live, check = layout.live, layout.check
    W = len(live)
    tiles = max(1, (W + tile - 1) // tile)
    order = value_order(vals, rows, layout.idx_col)
    lim = end_limits(vals, rows, layout, tile)
    mask = (np.int64(1) << offset_bits(tile)) - 1
    acc = np.empty((n, min(tile, W)), dtype=np.uint64)
    run = np.empty(min(tile, W), dtype=np.uint64)
    found = np.empty(min(tile, W), dtype=np.uint64)  # an event's matching slots in the tile
    seg = np.zeros(tiles * n + 1, dtype=np.int64)
    one = np.uint64(1)
    k = 0
    for w0 in range(0, W, tile):
        w1 = min(W, w0 + tile)
        tw = w1 - w0
        g = w0 // tile
        for j in range(n_idx):
            i0 = 0
            while i0 < n:
                r = rows[order[j, i0], j]
                i1 = i0 + 1
                while i1 < n and rows[order[j, i1], j] == r:
                    i1 += 1
                _mark_bucket(layout, lim, mask, rows, order, j, i0, i1, g, tiles, w0, w1, acc, run)
                i0 = i1
        checked = False
        for q in range(tw):
            checked |= check[w0 + q] != 0
        for e in range(n):
            for q in range(tw):  # vectorised
                found[q] = ~acc[e, q] & ~check[w0 + q]
            if checked:  # the survivors of the check mask, checked exactly
                for q in range(tw):
                    w = w0 + q
                    left = ~acc[e, q] & check[w]
                    while left:
                        b = _low_bit(left)
                        left &= left - one
                        if _holds(slots, w * 64 + b, vals, e, sat_off, sat_pid):
                            found[q] |= one << np.uint64(b)
            buf = grown(buf, k, k + 64 * tw + 4)  # emit_positions writes up to 3 beyond
            seg[g * n + e] = k
            k = emit_positions(found[:tw], buf, k)
    seg[tiles * n] = k
    return buf, seg
