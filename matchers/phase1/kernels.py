"""Numba kernels of phase 1: hashed equality, sorted numeric ranges, CSR assembly.

A kernel that emits pairs writes as many as fit in its output buffers and returns how
many there are: the caller sizes the buffers from an estimate and reruns the kernel
into exact buffers in the rare case the estimate was short.
"""

from __future__ import annotations

import numba
import numpy as np

NUM, STR, BOOL = 0, 1, 2
EMPTY = -1


@numba.njit(cache=True, nogil=True, inline="always")
def mix(a1, a2):
    """64-bit hash of a key pair (splitmix-style finaliser)."""
    h = np.uint64(a1) * np.uint64(0x9E3779B97F4A7C15) ^ np.uint64(a2)
    h ^= h >> np.uint64(31)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(29)
    return h


@numba.njit(cache=True, nogil=True)
def build_hash(k1, k2, size):
    """Open-addressing table of distinct ``(k1[g], k2[g])`` -> ``g``; ``size`` a power of two."""
    t1 = np.zeros(size, dtype=np.int32)
    t2 = np.zeros(size, dtype=np.int64)
    tg = np.full(size, EMPTY, dtype=np.int32)
    mask = np.uint64(size - 1)
    for g in range(len(k1)):
        h = mix(k1[g], k2[g]) & mask
        while tg[h] != EMPTY:
            h = (h + np.uint64(1)) & mask
        t1[h] = k1[g]
        t2[h] = k2[g]
        tg[h] = g
    return t1, t2, tg


@numba.njit(cache=True, nogil=True)
def probe(t1, t2, tg, a1, a2):
    """Group id of key ``(a1, a2)`` or ``EMPTY``."""
    mask = np.uint64(len(tg) - 1)
    h = mix(a1, a2) & mask
    while tg[h] != EMPTY:
        if t1[h] == a1 and t2[h] == a2:
            return tg[h]
        h = (h + np.uint64(1)) & mask
    return EMPTY


def value_bits(kinds, nums, codes):
    """Hashed values of entries: the string code, or the float64 bits (``-0.0`` as ``0.0``)."""
    return np.where(kinds == STR, codes.astype(np.int64), (nums + 0.0).view(np.int64))


@numba.njit(cache=True, nogil=True)
def equality_pairs(events, vbits, table, veto, stamp, out_ev, out_pid):
    """Satisfied EQ/IN/NE/NOT_IN predicates as (event, pid) pairs.

    Group ``g`` lists positive pids (``>= 0``) and vetoed negated pids (``-pid - 1``).
    ``neg_off`` over ``attr * 3 + kind`` lists the negated pids of an attribute and type:
    each holds unless the value vetoed it (``table``: :class:`~matchers.phase1.layout.EqualityTable`).
    """
    offsets, attrs, kinds = events.offsets, events.attrs, events.kinds  # EventArrays
    t1, t2, tg, g_off, g_pids, neg_off, neg_pids = table
    cap = len(out_ev)
    k = 0
    n_keys = len(neg_off) - 1
    for e in range(len(offsets) - 1):
        for j in range(offsets[e], offsets[e + 1]):
            a1 = np.int64(attrs[j]) * 3 + kinds[j]
            stamp[0] += 1
            s = stamp[0]
            if kinds[j] != STR or vbits[j] >= 0:
                g = probe(t1, t2, tg, a1, vbits[j])
                if g != EMPTY:
                    for i in range(g_off[g], g_off[g + 1]):
                        p = g_pids[i]
                        if p >= 0:
                            if k < cap:
                                out_ev[k] = e
                                out_pid[k] = p
                            k += 1
                        else:
                            veto[-p - 1] = s
            if a1 < n_keys:
                for i in range(neg_off[a1], neg_off[a1 + 1]):
                    p = neg_pids[i]
                    if veto[p] != s:
                        if k < cap:
                            out_ev[k] = e
                            out_pid[k] = p
                        k += 1
    return k


@numba.njit(cache=True, nogil=True)
def _emit_range(lo, hi, pids, e, out_ev, out_pid, k, cap):
    for i in range(lo, min(hi, lo + cap - k)):
        out_ev[k + i - lo] = e
        out_pid[k + i - lo] = pids[i]
    return k + max(hi - lo, 0)


@numba.njit(cache=True, nogil=True)
def range_pairs(events, ranges, out_ev, out_pid):
    """Satisfied numeric range predicates as (event, pid) pairs.

    ``ranges`` is a :class:`~matchers.phase1.layout.Ranges`: per operator a CSR over
    attribute ids into operands sorted within the attribute. BETWEEN is sorted by low
    bound with the maximum high bound of each block of 32 entries, so blocks that cannot
    contain the value are skipped.
    """
    offsets, attrs, kinds, nums = events.offsets, events.attrs, events.kinds, events.nums  # EventArrays
    lt_off, lt_val, lt_pid = ranges.lt
    le_off, le_val, le_pid = ranges.le
    gt_off, gt_val, gt_pid = ranges.gt
    ge_off, ge_val, ge_pid = ranges.ge
    bt_off, bt_lo, bt_hi, bt_pid, bt_blockmax = ranges.bt
    nb_off, nb_lo, nb_lopid, nb_hi, nb_hipid = ranges.nb
    cap = len(out_ev)
    k = 0
    n_attrs = len(lt_off) - 1
    for e in range(len(offsets) - 1):
        for j in range(offsets[e], offsets[e + 1]):
            a = attrs[j]
            if kinds[j] != NUM or a >= n_attrs:
                continue
            x = nums[j]
            # x < v: operands above x
            s, t = lt_off[a], lt_off[a + 1]
            if t > s:
                k = _emit_range(s + np.searchsorted(lt_val[s:t], x, "right"), t, lt_pid, e, out_ev, out_pid, k, cap)
            s, t = le_off[a], le_off[a + 1]
            if t > s:
                k = _emit_range(s + np.searchsorted(le_val[s:t], x, "left"), t, le_pid, e, out_ev, out_pid, k, cap)
            s, t = gt_off[a], gt_off[a + 1]
            if t > s:
                k = _emit_range(s, s + np.searchsorted(gt_val[s:t], x, "left"), gt_pid, e, out_ev, out_pid, k, cap)
            s, t = ge_off[a], ge_off[a + 1]
            if t > s:
                k = _emit_range(s, s + np.searchsorted(ge_val[s:t], x, "right"), ge_pid, e, out_ev, out_pid, k, cap)
            s, t = bt_off[a], bt_off[a + 1]
            if t > s:
                end = s + np.searchsorted(bt_lo[s:t], x, "right")
                i = s
                while i < end:
                    if bt_blockmax[i >> 5] < x:
                        i = ((i >> 5) + 1) << 5
                        continue
                    if bt_hi[i] >= x:
                        if k < cap:
                            out_ev[k] = e
                            out_pid[k] = bt_pid[i]
                        k += 1
                    i += 1
            s, t = nb_off[a], nb_off[a + 1]
            if t > s:
                k = _emit_range(s + np.searchsorted(nb_lo[s:t], x, "right"), t, nb_lopid, e, out_ev, out_pid, k, cap)
                k = _emit_range(s, s + np.searchsorted(nb_hi[s:t], x, "left"), nb_hipid, e, out_ev, out_pid, k, cap)
    return k


@numba.njit(cache=True, nogil=True)
def block_max(values, block):
    """Maximum of each block of ``block`` consecutive values."""
    n = (len(values) + block - 1) // block
    out = np.full(max(n, 1), -np.inf)
    for i in range(len(values)):
        b = i // block
        if values[i] > out[b]:
            out[b] = values[i]
    return out


@numba.njit(cache=True, nogil=True)
def entry_pairs(offsets, entries, group, starts, sizes, flat, out_ev, out_pid):
    """(event, pid) pairs of entries ``entries`` (ascending; ``offsets`` the batch's CSR of
    events over entries), entry ``entries[i]`` satisfying ``flat[starts[g]:starts[g] + sizes[g]]``
    with ``g = group[i]``, written to ``out_*`` (as long as the pairs): grouped by event."""
    k = 0
    e = 0
    for i in range(len(entries)):
        j = entries[i]
        while offsets[e + 1] <= j:
            e += 1
        g = group[i]
        for t in range(starts[g], starts[g] + sizes[g]):
            out_ev[k] = e
            out_pid[k] = flat[t]
            k += 1
    return k


@numba.njit(cache=True, nogil=True)
def _event_offsets(n_events, ev):
    """CSR offsets of (event, pid) pairs by event: ``offsets[e]`` pairs are of events before ``e``."""
    offsets = np.zeros(n_events + 1, dtype=np.int64)
    for e in ev:
        offsets[e + 1] += 1
    for e in range(n_events):
        offsets[e + 1] += offsets[e]
    return offsets


@numba.njit(cache=True, nogil=True)
def pairs_to_csr(n_events, ev, pid):
    """Group (event, pid) pairs by event (stable counting sort) into CSR."""
    offsets = _event_offsets(n_events, ev)
    pos = offsets[:-1].copy()
    out = np.empty(len(pid), dtype=np.int32)
    for i in range(len(ev)):
        out[pos[ev[i]]] = pid[i]
        pos[ev[i]] += 1
    return offsets, out


@numba.njit(cache=True, nogil=True)
def grouped_to_csr(n_events, ev, pid):
    """CSR of (event, pid) pairs already grouped by ascending event (the pids are kept)."""
    return _event_offsets(n_events, ev), pid


@numba.njit(cache=True, nogil=True)
def merge_grouped(n_events, evs, pids, out):
    """CSR of (event, pid) pairs given as parts (tuples of int32 arrays), each ascending by
    event: per event, the pids of each part in turn (what :func:`pairs_to_csr` gives for
    the parts concatenated), in one pass, the pids written to ``out[:total]`` (int32, at
    least as long as the parts together); ``None`` if a part is not ascending."""
    total = 0
    for p in range(len(evs)):
        total += len(evs[p])
    offsets = np.zeros(n_events + 1, dtype=np.int64)
    at = np.zeros(len(evs), dtype=np.int64)
    k = 0
    for e in range(n_events):
        for p in range(len(evs)):
            ev, pid = evs[p], pids[p]
            i = at[p]
            while i < len(ev) and ev[i] == e:
                out[k] = pid[i]
                k += 1
                i += 1
            at[p] = i
        offsets[e + 1] = k
    if k != total:
        return None
    return offsets, out[:total]
