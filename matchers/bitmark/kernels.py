"""Numba kernels of the bit-marking index: building its bitsets, marking and verifying.

Conventions: a slot is one DNF conjunction; its numeric intervals are closed
``[lo, hi]`` over float64 (strict bounds were moved by one ulp), at most one per value
column.  An event's values are a row of a ``(events x columns)`` matrix, NaN where the
event lacks the attribute or holds a non-number there (which fails every interval).
"""

from __future__ import annotations

import llvmlite.ir as ir
import numba
import numpy as np
from numba import types
from numba.extending import intrinsic

from matchers.arrays import lower_bound

ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
CHECK_STEPS = 32
"""Steps of a walk over the ends that cost about one exact check of a survivor."""


@intrinsic
def _cttz(typingctx, x):
    """Trailing zeros of a uint64 (``llvm.cttz``: one ``tzcnt``)."""
    if x != types.uint64:
        return None

    def codegen(context, builder, signature, args):
        return builder.cttz(args[0], ir.Constant(ir.IntType(1), 1))

    return types.uint64(types.uint64), codegen


@intrinsic
def _ctpop(typingctx, x):
    """Set bits of a uint64 (``llvm.ctpop``: one ``popcnt``)."""
    if x != types.uint64:
        return None

    def codegen(context, builder, signature, args):
        return builder.ctpop(args[0])

    return types.uint64(types.uint64), codegen


@numba.njit(cache=True, nogil=True, inline="always")
def _low_bit(x):
    """Position of the lowest set bit of a non-zero uint64."""
    return np.int64(_cttz(x))


@numba.njit(cache=True, nogil=True, inline="always")
def _bucket(edges, lo, hi, v):
    """Bucket of ``v`` among the sorted ``edges[lo:hi]``: how many of them are <= v (a search
    without a branch on the comparisons: their outcome is a select, never mispredicted)."""
    n = hi - lo
    if n == 0:
        return 0
    base = lo
    while n > 1:
        half = n >> 1
        base = base + half if edges[base + half - 1] <= v else base
        n -= half
    return base - lo + (edges[base] <= v)


# -- building --------------------------------------------------------------------------
@numba.njit(cache=True, nogil=True)
def order_keys(slots, col_min, col_span):
    """Per slot (of :class:`~matchers.bitmark.layout.Slots`), its two most selective columns and their low bounds:
    ``p, lo_p, q, lo_q``.

    Selectivity is the interval's width within the column's span; ``-1`` when a slot has
    fewer intervals.
    """
    iv_off, iv_col, iv_lo, iv_hi = slots.iv_off, slots.iv_col, slots.iv_lo, slots.iv_hi
    n = len(iv_off) - 1
    p = np.full(n, -1, dtype=np.int64)
    q = np.full(n, -1, dtype=np.int64)
    lo_p = np.zeros(n)
    lo_q = np.zeros(n)
    for s in range(n):
        w1 = np.inf
        w2 = np.inf
        for t in range(iv_off[s], iv_off[s + 1]):
            c = iv_col[t]
            lo = max(iv_lo[t], col_min[c])
            hi = min(iv_hi[t], col_min[c] + col_span[c])
            w = max(hi - lo, 0.0) / col_span[c]
            if w < w1:
                w2, q[s], lo_q[s] = w1, p[s], lo_p[s]
                w1, p[s], lo_p[s] = w, c, lo
            elif w < w2:
                w2, q[s], lo_q[s] = w, c, lo
    return p, lo_p, q, lo_q


@numba.njit(cache=True, nogil=True)
def gather_offsets(off, order):
    """Offsets of the CSR segments ``order`` of ``off`` packed in that order."""
    new_off = np.zeros(len(order) + 1, dtype=np.int64)
    for i in range(len(order)):
        s = order[i]
        new_off[i + 1] = new_off[i] + off[s + 1] - off[s]
    return new_off


@numba.njit(cache=True, nogil=True)
def is_identity(order):
    """Whether ``order[i] == i`` for every ``i``."""
    for i in range(len(order)):
        if order[i] != i:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def gather_positions(off, new_off, order):
    """Where each value of the CSR segments ``order`` of ``off``, packed at ``new_off``, comes
    from: ``values[positions]`` gathers any column of ``off``'s values (numpy's take of the three
    interval columns: 0.31 s at 1,000,000 slots of 10 against 0.37 for one fused kernel, 0.46 for
    one kernel per column)."""
    out = np.empty(new_off[-1], dtype=np.int64)
    for i in range(len(order)):
        a = off[order[i]]
        b = new_off[i]
        for t in range(new_off[i + 1] - b):
            out[b + t] = a + t
    return out


@numba.njit(cache=True, nogil=True, inline="always")
def _starts_inside(edges, e0, b, lo):
    """Whether an interval starting at ``lo`` in bucket ``b`` misses part of the bucket."""
    return lo > edges[e0 + b - 1] if b > 0 else lo > -np.inf


@numba.njit(cache=True, nogil=True, inline="always")
def _ends_inside(edges, e0, e1, b, hi):
    """Whether an interval ending at ``hi`` in bucket ``b`` misses part of the bucket."""
    return hi < edges[e0 + b] if b < e1 - e0 else hi < np.inf


GUIDE_CELLS = 1024
"""Cells of the uniform grid per indexed attribute whose guesses speed :func:`interval_buckets`."""


@numba.njit(cache=True, nogil=True)
def interval_buckets(slots, n_main, idx_of_col, edge_off, edges):
    """Per interval of slots ``0..n_main-1``, the buckets of its low and high bounds among its
    indexed attribute's edges (``-1`` when its column is not indexed): ``int32[intervals, 2]``,
    searched once for :func:`build_bits` and the ends.  A bound's bucket is guessed from a
    uniform grid of ``GUIDE_CELLS`` cells over the attribute's edges (the buckets of the cells'
    low ends), then corrected by steps over the edges (none or one at quantile edges): exact
    whatever the guess."""
    iv_col, iv_lo, iv_hi = slots.iv_col, slots.iv_lo, slots.iv_hi
    n_idx = len(edge_off) - 1
    guide = np.zeros((n_idx, GUIDE_CELLS), dtype=np.int64)
    first = np.zeros(n_idx)
    scale = np.zeros(n_idx)
    for j in range(n_idx):
        e0, e1 = edge_off[j], edge_off[j + 1]
        if e1 - e0 > 1 and edges[e1 - 1] > edges[e0]:
            first[j] = edges[e0]
            scale[j] = GUIDE_CELLS / (edges[e1 - 1] - edges[e0])
            for c in range(GUIDE_CELLS):
                guide[j, c] = _bucket(edges, e0, e1, edges[e0] + c / scale[j])
    m = slots.iv_off[n_main]
    out = np.empty((m, 2), dtype=np.int32)
    for t in range(m):
        j = idx_of_col[iv_col[t]]
        if j < 0:
            out[t, 0] = out[t, 1] = -1
            continue
        e0, e1 = edge_off[j], edge_off[j + 1]
        for kind in range(2):
            v = iv_lo[t] if kind == 0 else iv_hi[t]
            x = (v - first[j]) * scale[j]  # (NaN when v is infinite and the scale 0: cell 0)
            c = int(min(max(x, 0.0), GUIDE_CELLS - 1.0)) if x == x else 0
            b = guide[j, c]
            while b > 0 and edges[e0 + b - 1] > v:
                b -= 1
            while b < e1 - e0 and edges[e0 + b] <= v:
                b += 1
            out[t, kind] = b
    return out


BITS_BLOCK = 32
"""Words of the marking rows :func:`build_bits` builds at a time (two ``rows x words`` blocks in L2)."""


@numba.njit(cache=True, nogil=True)
def build_bits(slots, n_main, idx_of_col, row_start, edge_off, edges, at_edge, ib, bits):
    """The marking rows (written into ``bits``, ``uint64[rows, words]``: numpy's allocation gives
    them huge pages, 1.4% faster marking at n = 1,000,000, width 0.7) and the check mask (returned)
    of :class:`~matchers.bitmark.layout.Layout` over slots ``0..n_main-1``, the intervals' buckets
    ``ib`` (:func:`interval_buckets`).

    With ``at_edge`` (the wide mode), a bucket's row also marks the intervals starting inside
    it: the slots failing the value at the bucket's low edge.  A slot with an empty interval
    goes to the check mask.  Built ``BITS_BLOCK`` words at a time in two blocks that stay in
    cache (the intervals ending below each bucket, ORed upwards, and those starting above it,
    ORed downwards), each row written once."""
    iv_off, iv_col, iv_lo, iv_hi = slots.iv_off, slots.iv_col, slots.iv_lo, slots.iv_hi
    res_off = slots.res_off
    W = (n_main + 63) // 64
    n_rows = row_start[-1]
    check = np.zeros(W, dtype=np.uint64)
    below = np.empty((n_rows, BITS_BLOCK), dtype=np.uint64)  # marks of intervals ending below a bucket
    above = np.empty((n_rows, BITS_BLOCK), dtype=np.uint64)  # marks of intervals starting after it
    for w0 in range(0, W, BITS_BLOCK):
        w1 = min(W, w0 + BITS_BLOCK)
        below[:, :] = 0
        above[:, :] = 0
        for s in range(w0 * 64, min(n_main, w1 * 64)):
            w = s >> 6
            k = w - w0
            bit = np.uint64(1) << np.uint64(s & 63)
            if res_off[s + 1] > res_off[s]:
                check[w] |= bit
            for t in range(iv_off[s], iv_off[s + 1]):
                j = idx_of_col[iv_col[t]]
                if j < 0 or not iv_lo[t] <= iv_hi[t]:  # (an empty interval, a = 0 AND a = 1: the
                    check[w] |= bit  # wide mode's running bitsets hold only for lo <= hi)
                if j < 0:
                    continue
                e0, e1 = edge_off[j], edge_off[j + 1]
                nb = e1 - e0 + 1
                r0 = row_start[j]
                below[r0 + nb, k] |= bit  # missing attribute
                lb, hb = ib[t, 0], ib[t, 1]
                if lb > 0:  # fails every bucket below lb
                    above[r0 + lb - 1, k] |= bit
                if at_edge and _starts_inside(edges, e0, lb, iv_lo[t]):
                    above[r0 + lb, k] |= bit  # the rows below lb have it already
                if hb < nb - 1:  # fails every bucket above hb
                    below[r0 + hb + 1, k] |= bit
        tw = w1 - w0
        for j in range(len(row_start) - 1):
            r0 = row_start[j]
            nb = edge_off[j + 1] - edge_off[j] + 1
            for b in range(1, nb):
                for k in range(tw):
                    below[r0 + b, k] |= below[r0 + b - 1, k]
            for b in range(nb - 2, -1, -1):
                for k in range(tw):
                    above[r0 + b, k] |= above[r0 + b + 1, k]
        for r in range(n_rows):
            for k in range(tw):
                bits[r, w0 + k] = below[r, k] | above[r, k]
    return check


@numba.njit(cache=True, nogil=True)
def _interval_on(iv_off, iv_col, s, c):
    for t in range(iv_off[s], iv_off[s + 1]):
        if iv_col[t] == c:
            return t
    return -1


@numba.njit(cache=True, nogil=True)
def envelopes(slots, n_main, col_min, col_span):
    """Per word, the two columns (among its first slot's) whose hull over the word is narrowest."""
    iv_off, iv_col, iv_lo, iv_hi = slots.iv_off, slots.iv_col, slots.iv_lo, slots.iv_hi
    W = (n_main + 63) // 64
    env_col = np.full((W, 2), -1, dtype=np.int32)
    env_lo = np.zeros((W, 2))
    env_hi = np.zeros((W, 2))
    for w in range(W):
        s0 = w * 64
        s1 = min(n_main, s0 + 64)
        best = np.array([np.inf, np.inf])
        for t0 in range(iv_off[s0], iv_off[s0 + 1]):
            c = iv_col[t0]
            lo = iv_lo[t0]
            hi = iv_hi[t0]
            for s in range(s0 + 1, s1):
                t = _interval_on(iv_off, iv_col, s, c)
                if t < 0:
                    lo = np.nan
                    break
                lo = min(lo, iv_lo[t])
                hi = max(hi, iv_hi[t])
            if np.isnan(lo):
                continue
            width = (min(hi, col_min[c] + col_span[c]) - max(lo, col_min[c])) / col_span[c]
            if width >= 1.0:
                continue
            if width < best[0]:
                best[1] = best[0]
                env_col[w, 1], env_lo[w, 1], env_hi[w, 1] = env_col[w, 0], env_lo[w, 0], env_hi[w, 0]
                best[0] = width
                env_col[w, 0], env_lo[w, 0], env_hi[w, 0] = c, lo, hi
            elif width < best[1]:
                best[1] = width
                env_col[w, 1], env_lo[w, 1], env_hi[w, 1] = c, lo, hi
    return env_col, env_lo, env_hi


# -- matching ----------------------------------------------------------------------------
@numba.njit(cache=True, nogil=True)
def event_values(events, col_of_attr, n_cols):
    """The ``(events x columns)`` numeric values of a batch (:class:`~matchers.events.EventArrays`),
    NaN where absent or not a number."""
    offsets, attrs, kinds, nums = events.offsets, events.attrs, events.kinds, events.nums
    n = len(offsets) - 1
    vals = np.full((n, max(n_cols, 1)), np.nan)
    limit = len(col_of_attr)
    for e in range(n):
        for i in range(offsets[e], offsets[e + 1]):
            a = attrs[i]
            if kinds[i] == 0 and a < limit:
                c = col_of_attr[a]
                if c >= 0:
                    vals[e, c] = nums[i]
    return vals


@numba.njit(cache=True, nogil=True)
def event_rows(vals, layout):
    """Per event and indexed attribute, the marking row its value selects."""
    n = vals.shape[0]
    n_idx = len(layout.idx_col)
    rows = np.empty((n, n_idx), dtype=np.int64)
    for e in range(n):
        for j in range(n_idx):
            e0, e1 = layout.edge_off[j], layout.edge_off[j + 1]
            v = vals[e, layout.idx_col[j]]
            if np.isnan(v):
                rows[e, j] = layout.row_start[j] + e1 - e0 + 1
            else:
                rows[e, j] = layout.row_start[j] + _bucket(layout.edges, e0, e1, v)
    return rows


@numba.njit(cache=True, nogil=True)
def sort_segments(off, values):
    """Sort each CSR segment in place."""
    for e in range(len(off) - 1):
        values[off[e]:off[e + 1]].sort()


@numba.njit(cache=True, nogil=True, inline="always")
def _holds(slots, s, vals, e, sat_off, sat_pid):
    """Whether event ``e`` satisfies every predicate of slot ``s``."""
    for t in range(slots.iv_off[s], slots.iv_off[s + 1]):
        v = vals[e, slots.iv_col[t]]
        if not (v >= slots.iv_lo[t] and v <= slots.iv_hi[t]):
            return False
    lo0, hi0 = sat_off[e], sat_off[e + 1]
    for t in range(slots.res_off[s], slots.res_off[s + 1]):
        pid = slots.res_pid[t]
        a = lower_bound(sat_pid, lo0, hi0, pid)
        if a == hi0 or sat_pid[a] != pid:
            return False
    return True


@numba.njit(cache=True, nogil=True, inline="always")
def _ends_at(layout, rows, e, g, tiles):
    """The ends of tile ``g`` in the buckets of event ``e``."""
    total = 0
    for j in range(rows.shape[1]):
        seg = 2 * (rows[e, j] * tiles + g)
        total += layout.end_off[seg + 2] - layout.end_off[seg]
    return total


@numba.njit(cache=True, nogil=True)
def _fail_ends(layout, vals, rows, e, g, tiles, w0, fail):
    """Mark in ``fail`` (the words of tile ``g``, from word ``w0``) the slots whose interval
    starts or ends inside the bucket of event ``e``'s value, beyond that value."""
    end_off, end_val, end_slot = layout.end_off, layout.end_val, layout.end_slot
    for j in range(rows.shape[1]):
        v = vals[e, layout.idx_col[j]]
        seg = 2 * (rows[e, j] * tiles + g)
        a, i = end_off[seg], end_off[seg + 1] - 1  # low bounds, the failing ones last
        while i >= a and end_val[i] > v:
            s = end_slot[i]
            fail[(s >> 6) - w0] |= np.uint64(1) << np.uint64(s & 63)
            i -= 1
        i, b = end_off[seg + 1], end_off[seg + 2]  # high bounds, the failing ones first
        while i < b and end_val[i] < v:
            s = end_slot[i]
            fail[(s >> 6) - w0] |= np.uint64(1) << np.uint64(s & 63)
            i += 1


@numba.njit(cache=True, nogil=True)
def match_chunk(vals, rows, sat_off, sat_pid, layout, slots, tile, dense_share, found_in):
    """The matching indexed slots of a chunk of events, set in a bitmap ``found_in.surv[event, word]``
    over all slots (the tail's come from :func:`match_tail`), which must be all zero; the
    tiles of words where an event has matches are flagged in ``found_in.hit[event, tile]``.
    Returns the matches per event.

    The indexed slots are visited a tile of words at a time (the layout's ``tile``) for
    every event of the chunk, so that the marking rows of a tile, read by many events, stay
    in cache.  The envelopes first (an event outside one fails the word); then, if they
    left at least ``dense_share`` of the words of the event's previous tile open (wide
    intervals), the event's rows are ORed whole over the tile (vectorised), else per open
    word until all its slots are marked (the first tile always so).  At the first survivor
    of a tile, the event's ends in the tile are walked once (:func:`_fail_ends`); the
    survivors they do not fail match, but for those of the check mask, which are checked
    exactly.  No pair is emitted here: the keys come out of ``surv`` in one pass per event
    (:func:`~matchers.bitmark.emit.emit_keys`), which also clears it.
    """
    surv, hit = found_in
    n = vals.shape[0]
    n_idx = rows.shape[1]
    W = len(layout.live)
    tiles = max(1, (W + tile - 1) // tile)
    bits, check, live = layout.bits, layout.check, layout.live
    env_col, env_lo, env_hi = layout.env_col, layout.env_lo, layout.env_hi
    fail = np.zeros(tile, dtype=np.uint64)
    acc = np.empty(tile, dtype=np.uint64)  # the event's marks over the tile
    found_w = np.empty(tile, dtype=np.int64)  # the words of the tile with survivors
    found = np.empty(tile, dtype=np.uint64)  # and their survivors
    dense = np.zeros(n, dtype=np.bool_)  # per event, whether to mark the tile row by row
    counts = np.zeros(n, dtype=np.int64)
    for w0 in range(0, W, tile):
        w1 = min(W, w0 + tile)
        g = w0 // tile
        for e in range(n):
            out = surv[e]
            n_open = 0
            n_found = 0
            n_left = 0
            if dense[e]:  # wide: the envelopes, then whole rows ORed over the tile (vectorised)
                for w in range(w0, w1):
                    c0 = env_col[w, 0]
                    ok = True
                    if c0 >= 0:
                        v = vals[e, c0]
                        ok = v >= env_lo[w, 0] and v <= env_hi[w, 0]
                        c1 = env_col[w, 1]
                        if ok and c1 >= 0:
                            v = vals[e, c1]
                            ok = v >= env_lo[w, 1] and v <= env_hi[w, 1]
                    if ok:
                        acc[w - w0] = ~live[w]
                        n_open += 1
                    else:
                        acc[w - w0] = ALL
                if n_open:
                    for j in range(n_idx):
                        row = bits[rows[e, j], w0:w1]
                        for i in range(w1 - w0):
                            acc[i] |= row[i]
                    for i in range(w1 - w0):
                        left = ~acc[i]
                        if left:
                            found_w[n_found] = w0 + i
                            found[n_found] = left
                            n_found += 1
                            n_left += _popcount(left)
            else:  # narrow: per word, the envelopes, then its rows until all its slots are marked
                for w in range(w0, w1):
                    c0 = env_col[w, 0]
                    if c0 >= 0:
                        v = vals[e, c0]
                        if not (v >= env_lo[w, 0] and v <= env_hi[w, 0]):
                            continue
                        c1 = env_col[w, 1]
                        if c1 >= 0:
                            v = vals[e, c1]
                            if not (v >= env_lo[w, 1] and v <= env_hi[w, 1]):
                                continue
                    n_open += 1
                    a = ~live[w]
                    for j in range(n_idx):
                        a |= bits[rows[e, j], w]
                        if a == ALL:
                            break
                    left = ~a
                    if left:
                        found_w[n_found] = w
                        found[n_found] = left
                        n_found += 1
                        n_left += _popcount(left)
            dense[e] = n_open >= dense_share * (w1 - w0)  # the next tile's way, from this one's
            if n_found == 0:
                continue
            walk = n_left * CHECK_STEPS > _ends_at(layout, rows, e, g, tiles)
            if walk:
                _fail_ends(layout, vals, rows, e, g, tiles, w0, fail)
            c = 0
            for i in range(n_found):
                w = found_w[i]
                left = found[i]
                sure = np.uint64(0)
                if walk:
                    left &= ~fail[w - w0]
                    sure = left & ~check[w]
                    left &= check[w]
                while left:
                    b = _low_bit(left)
                    left &= left - np.uint64(1)
                    if _holds(slots, w * 64 + b, vals, e, sat_off, sat_pid):
                        sure |= np.uint64(1) << np.uint64(b)
                out[w] = sure
                c += _popcount(sure)
            if c:
                counts[e] += c
                hit[e, g] = True
            if walk:
                fail[:w1 - w0] = 0
    return counts


@numba.njit(cache=True, nogil=True)
def match_tail(vals, sat_off, sat_pid, slots, n_main, n_slots, tile, found_in, counts):
    """Set in ``found_in`` (and count in ``counts``) the matching slots of the unindexed tail
    (``n_main..n_slots-1``), each checked exactly."""
    surv, hit = found_in
    for e in range(vals.shape[0]):
        for s in range(n_main, n_slots):
            if slots.key[s] >= 0 and _holds(slots, s, vals, e, sat_off, sat_pid):
                surv[e, s >> 6] |= np.uint64(1) << np.uint64(s & 63)
                hit[e, (s >> 6) // tile] = True
                counts[e] += 1


@numba.njit(cache=True, nogil=True, inline="always")
def _popcount(x):
    return np.int64(_ctpop(x))


@numba.njit(cache=True, nogil=True)
def column_ranges(slots, which, n_cols):
    """Per column, the least finite bound and the span of the finite bounds (1 when empty)
    over the intervals of the slots ``which`` of ``slots``; and how many of them constrain it."""
    iv_off, iv_col, iv_lo, iv_hi = slots.iv_off, slots.iv_col, slots.iv_lo, slots.iv_hi
    lo = np.full(n_cols, np.inf)
    hi = np.full(n_cols, -np.inf)
    count = np.zeros(n_cols, dtype=np.int64)
    for s in which:
        for t in range(iv_off[s], iv_off[s + 1]):
            c = iv_col[t]
            count[c] += 1
            for x in (iv_lo[t], iv_hi[t]):
                if np.isfinite(x):
                    lo[c] = min(lo[c], x)
                    hi[c] = max(hi[c], x)
    span = np.ones(n_cols)
    for c in range(n_cols):
        if lo[c] > hi[c]:
            lo[c] = 0.0
        elif hi[c] > lo[c]:
            span[c] = hi[c] - lo[c]
    return lo, span, count


@numba.njit(cache=True, nogil=True)
def sampled_bounds(slots, n_main, n_cols, step):
    """The finite bounds of the intervals of slots ``0, step, 2 * step, ...`` below ``n_main``,
    by column (CSR: ``(off[n_cols + 1], values)``), in one pass."""
    iv_off, iv_col, iv_lo, iv_hi = slots.iv_off, slots.iv_col, slots.iv_lo, slots.iv_hi
    off = np.zeros(n_cols + 1, dtype=np.int64)
    for s in range(0, n_main, step):
        for t in range(iv_off[s], iv_off[s + 1]):
            off[iv_col[t] + 1] += np.isfinite(iv_lo[t]) + np.isfinite(iv_hi[t])
    for c in range(n_cols):
        off[c + 1] += off[c]
    fill = off[:-1].copy()
    out = np.empty(off[-1], dtype=np.float64)
    for s in range(0, n_main, step):
        for t in range(iv_off[s], iv_off[s + 1]):
            c = iv_col[t]
            for x in (iv_lo[t], iv_hi[t]):
                if np.isfinite(x):
                    out[fill[c]] = x
                    fill[c] += 1
    return off, out


@numba.njit(cache=True, nogil=True)
def intersect_repeats(off, col, lo, hi, n_cols):
    """Each conjunction's intervals (``off`` CSR over ``col, lo, hi``) with those on one column
    intersected, in the order of their first interval: ``(counts, col, lo, hi)``."""
    n = len(off) - 1
    at = np.full(n_cols, -1, dtype=np.int64)  # output position of a column in the current row
    counts = np.zeros(n, dtype=np.int64)
    out_col = np.empty(len(col), dtype=np.int32)
    out_lo = np.empty(len(col), dtype=np.float64)
    out_hi = np.empty(len(col), dtype=np.float64)
    k = 0
    for i in range(n):
        k0 = k
        for t in range(off[i], off[i + 1]):
            c = col[t]
            j = at[c]
            if j >= k0:
                out_lo[j] = max(out_lo[j], lo[t])
                out_hi[j] = min(out_hi[j], hi[t])
            else:
                at[c] = k
                out_col[k], out_lo[k], out_hi[k] = c, lo[t], hi[t]
                k += 1
        counts[i] = k - k0
    return counts, out_col[:k], out_lo[:k], out_hi[:k]
