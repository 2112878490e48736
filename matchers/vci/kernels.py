"""Numba kernels of the interval indexes: slab lists, VCI, the centered interval tree, Dlist.

Every kernel works on contiguous arrays owned by the Python classes in
:mod:`matchers.vci.interval_index` and :mod:`matchers.vci.baselines`; they assume validated input.

Slab lists: many growable lists share one ``pool``; list ``l`` holds
``pool[start[l]:start[l] + count[l]]`` inside a reserved run of ``cap[l]`` slots.  A full
list moves to the end of the pool with twice the room; ``top[0]`` is the first free slot
and ``top[1]`` the slots left behind (garbage), reclaimed by a compaction.  An insertion
kernel first checks that the pool has room for a whole interval and otherwise returns
the index of the interval it stopped at, so that the caller can grow the pool and resume.
"""

from __future__ import annotations

import numba
import numpy as np

from matchers.vci.layout import BITMAP, CLIPPED, LCI, VIRTUAL

_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
DEBRUIJN_TABLE = np.zeros(64, dtype=np.int64)
for _i in range(64):
    DEBRUIJN_TABLE[((1 << _i) * 0x03F79D71B4CB0A89 & 0xFFFFFFFFFFFFFFFF) >> 58] = _i
del _i

# -- slab lists -------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def slab_room(count, cap, lst):
    """Pool slots an append to list ``lst`` may need (0 when it has room)."""
    n = count[lst]
    if n < cap[lst]:
        return 0
    return max(4, 2 * n)


@numba.njit(cache=True, nogil=True)
def _new_slab(start, cap, top, lst, n):
    """Move full list ``lst`` (``n`` entries) to a new slab of twice the room at the pool's
    top; returns ``(old start, new start)`` (the caller copies the entries)."""
    new_cap = max(4, 2 * n)
    s, t = start[lst], top[0]
    top[1] += cap[lst]
    start[lst] = t
    cap[lst] = new_cap
    top[0] = t + new_cap
    return s, t


@numba.njit(cache=True, nogil=True)
def slab_append(start, count, cap, pool, top, lst, value):
    """Append ``value`` to list ``lst`` (the caller made sure the pool has room)."""
    n = count[lst]
    if n == cap[lst]:
        s, t = _new_slab(start, cap, top, lst, n)
        pool[t:t + n] = pool[s:s + n]
    pool[start[lst] + n] = value
    count[lst] = n + 1


@numba.njit(cache=True, nogil=True)
def slab_remove(start, count, cap, pool, top, lst, value):
    """Remove one ``value`` from list ``lst`` (order not kept). Returns whether it was there."""
    s = start[lst]
    n = count[lst]
    for i in range(n):
        if pool[s + i] == value:
            pool[s + i] = pool[s + n - 1]
            count[lst] = n - 1
            if n == 1:
                top[1] += cap[lst]
                cap[lst] = 0
            return True
    return False


@numba.njit(cache=True, nogil=True)
def slab_compact(start, count, cap, pool, new_pool, top):
    """Copy every list into ``new_pool`` tightly (capacity = count) and reset ``top``."""
    t = 0
    for lst in range(start.shape[0]):
        n = count[lst]
        s = start[lst]
        for i in range(n):
            new_pool[t + i] = pool[s + i]
        start[lst] = t
        cap[lst] = n
        t += n
    top[0] = t
    top[1] = 0


@numba.njit(cache=True, nogil=True)
def slab_compact_keyed(start, count, cap, keys, vals, new_keys, new_vals, top):
    """:func:`slab_compact` for lists of ``(key, value)`` pairs: the values move with their keys."""
    old = start.copy()
    slab_compact(start, count, cap, keys, new_keys, top)
    for lst in range(start.shape[0]):
        new_vals[start[lst]:start[lst] + count[lst]] = vals[old[lst]:old[lst] + count[lst]]


# -- VCI ------------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def _decompose(family, L, x, y, out_a, out_t):
    """Split cells ``x..y`` into VCIs ``(start, type)``, left to right; returns how many.

    SCI: full-length VCIs then one remnant.  LCI: greedily the longest power of two
    not above the remaining length (and ``L``).
    """
    m = 0
    pos = x
    while pos <= y:
        rem = y - pos + 1
        if family == LCI:
            t = 0
            while t + 1 < 63 and (np.int64(1) << (t + 1)) <= min(rem, L):
                t += 1
            length = np.int64(1) << t
        else:
            length = min(rem, L)
            t = length - 1
        out_a[m] = pos
        out_t[m] = t
        m += 1
        pos += length
    return m


@numba.njit(cache=True, nogil=True)
def _set_bits(mode, L, K, lens, bitmap, c, value):
    s = c // K
    t = c - s * K
    a = s - (L - 1)
    for j in range(a, a + lens[t]):
        pos = c if mode == BITMAP else c - (j * K + K - 1)
        w = pos >> 6
        bit = np.uint64(1) << np.uint64(pos & 63)
        if value:
            bitmap[j, w] |= bit
        else:
            bitmap[j, w] &= ~bit


@numba.njit(cache=True, nogil=True)
def vci_insert(g, lens, ids, xs, ys, first, lists, bitmap, scratch_a, scratch_t):
    """Insert intervals ``ids[i]: [xs[i], ys[i]]`` (cells, inside the domain) from ``first`` on.

    Returns ``len(ids)`` when done, or the index of the first interval that did not fit
    the pool (nothing of it was inserted).
    """
    family, mode, L, K = g.family, g.mode, g.L, g.K
    start, count, cap, pool, top = lists
    for i in range(first, ids.shape[0]):
        m = _decompose(family, L, xs[i], ys[i], scratch_a, scratch_t)
        need = 0
        for p in range(m):
            need += slab_room(count, cap, (scratch_a[p] + L - 1) * K + scratch_t[p])
        if top[0] + need > pool.shape[0]:
            return i
        for p in range(m):
            c = (scratch_a[p] + L - 1) * K + scratch_t[p]
            if count[c] == 0 and mode <= CLIPPED:
                _set_bits(mode, L, K, lens, bitmap, c, True)
            slab_append(start, count, cap, pool, top, c, ids[i])
    return ids.shape[0]


@numba.njit(cache=True, nogil=True)
def vci_delete(g, lens, ids, xs, ys, lists, bitmap, scratch_a, scratch_t):
    """Delete intervals ``ids[i]: [xs[i], ys[i]]`` (as inserted). Returns pieces not found."""
    family, mode, L, K = g.family, g.mode, g.L, g.K
    start, count, cap, pool, top = lists
    missing = 0
    for i in range(ids.shape[0]):
        m = _decompose(family, L, xs[i], ys[i], scratch_a, scratch_t)
        for p in range(m):
            c = (scratch_a[p] + L - 1) * K + scratch_t[p]
            if slab_remove(start, count, cap, pool, top, c, ids[i]):
                if count[c] == 0 and mode <= CLIPPED:
                    _set_bits(mode, L, K, lens, bitmap, c, False)
            else:
                missing += 1
    return missing


@numba.njit(cache=True, nogil=True)
def _vci_cell(g, lens, dt, lists, bitmap, table, j, out, pos, emit):
    """Matches of cell ``j``: written to ``out[pos:]`` when ``emit``; returns how many."""
    mode, L, K = g.mode, g.L, g.K
    start, count, pool = lists.start, lists.length, lists.pool
    n = 0
    cmin = j * K + K - 1
    if mode <= CLIPPED:
        base = 0 if mode == BITMAP else cmin
        for w in range(bitmap.shape[1]):
            word = bitmap[j, w]
            while word != 0:
                low = word & (~word + np.uint64(1))
                b = table[(low * _DEBRUIJN) >> np.uint64(58)]
                c = base + w * 64 + b
                k = count[c]
                if emit:
                    s = start[c]
                    out[pos + n:pos + n + k] = pool[s:s + k]
                n += k
                word ^= low
    elif mode == VIRTUAL:
        for c in range(cmin, cmin + (L - 1) * K + 1):
            k = count[c]
            if k > 0:
                s_ = c // K
                t = c - s_ * K
                if s_ - (L - 1) + lens[t] > j:
                    if emit:
                        s = start[c]
                        out[pos + n:pos + n + k] = pool[s:s + k]
                    n += k
    else:
        if emit:
            for d in range(dt.shape[0]):
                c = cmin + dt[d]
                k = count[c]
                if k > 0:
                    s = start[c]
                    out[pos + n:pos + n + k] = pool[s:s + k]
                    n += k
        else:
            for d in range(dt.shape[0]):
                n += count[cmin + dt[d]]
    return n


@numba.njit(cache=True, nogil=True)
def vci_count(g, lens, dt, lists, bitmap, table, cells):
    """int64[len(cells)]: number of intervals covering each cell (0 outside the domain)."""
    R = g.R
    out = np.zeros(cells.shape[0], dtype=np.int64)
    dummy = np.zeros(0, dtype=lists.pool.dtype)
    for i in range(cells.shape[0]):
        j = cells[i]
        if 0 <= j < R:
            out[i] = _vci_cell(g, lens, dt, lists, bitmap, table, j, dummy, 0, False)
    return out


@numba.njit(cache=True, nogil=True)
def vci_emit(g, lens, dt, lists, bitmap, table, cells, offsets, out):
    """Write the ids covering ``cells[i]`` to ``out[offsets[i]:offsets[i+1]]``."""
    R = g.R
    for i in range(cells.shape[0]):
        j = cells[i]
        if 0 <= j < R:
            _vci_cell(g, lens, dt, lists, bitmap, table, j, out, offsets[i], True)


# -- centered interval tree (baseline) --------------------------------------------------


@numba.njit(cache=True, nogil=True)
def _tree_node(R, x, y):
    """Node of interval ``[x, y]``: the first node on the root path whose center it contains."""
    node = 1
    lo = 0
    hi = R - 1
    while True:
        mid = (lo + hi) >> 1
        if y < mid:
            hi = mid - 1
            node = 2 * node
        elif x > mid:
            lo = mid + 1
            node = 2 * node + 1
        else:
            return node


@numba.njit(cache=True, nogil=True)
def _lower_bound(keys, s, n, key):
    lo = 0
    hi = n
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[s + mid] < key:
            lo = mid + 1
        else:
            hi = mid
    return lo


@numba.njit(cache=True, nogil=True)
def _keyed_insert_sorted(start, count, cap, keys, vals, top, lst, key, value):
    n = count[lst]
    if n == cap[lst]:
        s, t = _new_slab(start, cap, top, lst, n)
        keys[t:t + n] = keys[s:s + n]
        vals[t:t + n] = vals[s:s + n]
    s = start[lst]
    i = n
    while i > 0 and keys[s + i - 1] > key:
        keys[s + i] = keys[s + i - 1]
        vals[s + i] = vals[s + i - 1]
        i -= 1
    keys[s + i] = key
    vals[s + i] = value
    count[lst] = n + 1


@numba.njit(cache=True, nogil=True)
def _keyed_remove_sorted(start, count, cap, keys, vals, top, lst, key, value):
    s = start[lst]
    n = count[lst]
    i = _lower_bound(keys, s, n, key)
    while i < n and keys[s + i] == key:
        if vals[s + i] == value:
            for k in range(i, n - 1):
                keys[s + k] = keys[s + k + 1]
                vals[s + k] = vals[s + k + 1]
            count[lst] = n - 1
            if n == 1:
                top[1] += cap[lst]
                cap[lst] = 0
            return True
        i += 1
    return False


@numba.njit(cache=True, nogil=True)
def tree_insert(R, ids, xs, ys, first, start, count, cap, keys, vals, top):
    """Insert intervals from ``first`` on; returns where it stopped for want of pool room.

    Node ``v`` owns two sorted lists: ``2v`` by left end, ``2v + 1`` by right end.
    """
    for i in range(first, ids.shape[0]):
        node = _tree_node(R, xs[i], ys[i])
        need = slab_room(count, cap, 2 * node) + slab_room(count, cap, 2 * node + 1)
        if top[0] + need > keys.shape[0]:
            return i
        _keyed_insert_sorted(start, count, cap, keys, vals, top, 2 * node, xs[i], ids[i])
        _keyed_insert_sorted(start, count, cap, keys, vals, top, 2 * node + 1, ys[i], ids[i])
    return ids.shape[0]


@numba.njit(cache=True, nogil=True)
def tree_delete(R, ids, xs, ys, start, count, cap, keys, vals, top):
    """Delete intervals (as inserted); returns how many list entries were not found."""
    missing = 0
    for i in range(ids.shape[0]):
        node = _tree_node(R, xs[i], ys[i])
        if not _keyed_remove_sorted(start, count, cap, keys, vals, top, 2 * node, xs[i], ids[i]):
            missing += 1
        if not _keyed_remove_sorted(start, count, cap, keys, vals, top, 2 * node + 1, ys[i], ids[i]):
            missing += 1
    return missing


@numba.njit(cache=True, nogil=True)
def _tree_cell(R, start, count, keys, vals, j, out, pos, emit):
    n = 0
    node = 1
    lo = 0
    hi = R - 1
    n_lists = start.shape[0]
    while lo <= hi and 2 * node + 1 < n_lists:
        mid = (lo + hi) >> 1
        if j <= mid:
            lst = 2 * node  # by left end: those with x <= j
            s = start[lst]
            k = count[lst]
            if j < mid:
                k = _lower_bound(keys, s, k, j + 1)
            if emit:
                out[pos + n:pos + n + k] = vals[s:s + k]
            n += k
            if j == mid:
                break
            hi = mid - 1
            node = 2 * node
        else:
            lst = 2 * node + 1  # by right end: those with y >= j
            s = start[lst]
            c = count[lst]
            first = _lower_bound(keys, s, c, j)
            if emit:
                out[pos + n:pos + n + c - first] = vals[s + first:s + c]
            n += c - first
            lo = mid + 1
            node = 2 * node + 1
    return n


@numba.njit(cache=True, nogil=True)
def tree_count(R, start, count, keys, vals, cells):
    """int64[len(cells)]: intervals covering each cell."""
    out = np.zeros(cells.shape[0], dtype=np.int64)
    dummy = np.zeros(0, dtype=vals.dtype)
    for i in range(cells.shape[0]):
        j = cells[i]
        if 0 <= j < R:
            out[i] = _tree_cell(R, start, count, keys, vals, j, dummy, 0, False)
    return out


@numba.njit(cache=True, nogil=True)
def tree_emit(R, start, count, keys, vals, cells, offsets, out):
    """Ids covering ``cells[i]`` into ``out[offsets[i]:offsets[i+1]]``."""
    for i in range(cells.shape[0]):
        j = cells[i]
        if 0 <= j < R:
            _tree_cell(R, start, count, keys, vals, j, out, offsets[i], True)


# -- Dlist (baseline) ---------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def dlist_insert(ids, xs, ys, first, start, count, cap, pool, top):
    """Append each id to the list of every cell it covers; returns where it stopped."""
    for i in range(first, ids.shape[0]):
        need = 0
        for z in range(xs[i], ys[i] + 1):
            need += slab_room(count, cap, z)
        if top[0] + need > pool.shape[0]:
            return i
        for z in range(xs[i], ys[i] + 1):
            slab_append(start, count, cap, pool, top, z, ids[i])
    return ids.shape[0]


@numba.njit(cache=True, nogil=True)
def dlist_delete(ids, xs, ys, start, count, cap, pool, top):
    """Remove each id from the lists of its cells; returns entries not found."""
    missing = 0
    for i in range(ids.shape[0]):
        for z in range(xs[i], ys[i] + 1):
            if not slab_remove(start, count, cap, pool, top, z, ids[i]):
                missing += 1
    return missing


@numba.njit(cache=True, nogil=True)
def dlist_emit(start, count, pool, cells, offsets, out):
    """Ids covering ``cells[i]`` into ``out[offsets[i]:offsets[i+1]]``."""
    R = start.shape[0]
    for i in range(cells.shape[0]):
        j = cells[i]
        if 0 <= j < R:
            s = start[j]
            p = offsets[i]
            out[p:p + count[j]] = pool[s:s + count[j]]


# -- real values on the grid --------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def grid_cells(values, scale, base, units):
    """Cell of each value on a grid of step ``1 / scale`` (a power of two) from ``base / scale``.

    Cell ``2u`` is the grid point ``(base + u) / scale`` itself and cell ``2u + 1`` the open
    gap after it; ``-1`` is below the domain, ``2 * units`` above it, ``-2`` a NaN.  The map
    is exact (scaling by a power of two and ``floor`` do not round for finite values) and
    non-decreasing, so an interval's cells run from the cell of its low end to that of its
    high end.
    """
    out = np.empty(values.shape[0], dtype=np.int64)
    top = base + units
    for i in range(values.shape[0]):
        v = values[i]
        if v != v:
            out[i] = -2
            continue
        g = v * scale
        if g < base:
            out[i] = -1
        elif g >= top:
            out[i] = 2 * units
        else:
            u = np.floor(g)
            p = u / scale
            c = 2 * (np.int64(u) - base)
            if v == p:
                out[i] = c
            elif v > p:
                out[i] = c + 1
            else:
                out[i] = c - 1
    return out


@numba.njit(cache=True, nogil=True)
def _holds(v, lo, hi, lo_closed, hi_closed):
    return (v > lo or (lo_closed and v == lo)) and (v < hi or (hi_closed and v == hi))


@numba.njit(cache=True, nogil=True)
def grid_merge(values, cells, n_cells, hits, sides, bounds, offsets, out, emit):
    """Exact matches per value from the full-cell index, the checked edge cells and side lists.

    ``hits`` (:class:`~matchers.vci.layout.CellHits`): the ids of the full-cell index per
    value and the edge-cell ones, ``2 * id + side``; ``sides``
    (:class:`~matchers.vci.layout.Sides`) the ids of intervals reaching past either end of
    the domain, checked against values outside it.  With ``emit`` the ids go to
    ``out[offsets[i]:]``; returns the number of matches of each value.
    """
    core_off, core_ids, edge_off, edge_ids = hits
    below, above = sides
    lo, hi, lo_closed, hi_closed = bounds
    counts = np.zeros(values.shape[0], dtype=np.int64)
    for i in range(values.shape[0]):
        v = values[i]
        c = cells[i]
        n = 0
        pos = offsets[i] if emit else 0
        if 0 <= c < n_cells:
            a = core_off[i]
            b = core_off[i + 1]
            if emit:
                out[pos:pos + b - a] = core_ids[a:b]
            n = b - a
            if edge_off.shape[0] > 1:
                for k in range(edge_off[i], edge_off[i + 1]):
                    r = edge_ids[k] >> 1
                    if _holds(v, lo[r], hi[r], lo_closed[r], hi_closed[r]):
                        if emit:
                            out[pos + n] = r
                        n += 1
        elif c == -1 or c == n_cells:
            side = below if c == -1 else above
            for k in range(side.shape[0]):
                r = side[k]
                if _holds(v, lo[r], hi[r], lo_closed[r], hi_closed[r]):
                    if emit:
                        out[pos + n] = r
                    n += 1
        counts[i] = n
    return counts


# -- results --------------------------------------------------------------------------------


@numba.njit(cache=True, nogil=True)
def pairs_to_sorted_csr(n_events, ev, keys):
    """``(event, key)`` pairs as CSR with the keys of each event sorted ascending."""
    offsets = np.zeros(n_events + 1, dtype=np.int64)
    for i in range(ev.shape[0]):
        offsets[ev[i] + 1] += 1
    for e in range(n_events):
        offsets[e + 1] += offsets[e]
    pos = offsets[:-1].copy()
    out = np.empty(keys.shape[0], dtype=np.int32)
    for i in range(ev.shape[0]):
        out[pos[ev[i]]] = keys[i]
        pos[ev[i]] += 1
    for e in range(n_events):
        a = offsets[e]
        b = offsets[e + 1]
        if b - a > 1:
            out[a:b] = np.sort(out[a:b])
    return offsets, out
