"""Numba kernels of the paper's OpIndex (:mod:`.paper`): predicate lists per (pivot, family).

The item pool holds every predicate list: list ``k`` (one (pivot, family) pair) owns the
pool range ``l_start[k] : l_start[k] + l_len[k]`` (capacity ``l_cap[k]``), its ``b``
segments stored one after the other (``seg_off[k * (b + 1) + s]`` is where segment ``s``
starts), each sorted by ``(ta, value)``; ``s_sig[k * b + s]`` is a segment's signature,
``l_sig[k]`` their OR.  Shared kernels: :mod:`.kernels`.
"""

from __future__ import annotations

import numba
import numpy as np

from matchers.arrays import lower_bound, lower_bound2
from matchers.opindex.kernels import GOLD, RADIX_BITS, fires, mix, push, sort_unique
from matchers.opindex.layout import Pool


@numba.njit(cache=True, nogil=True, inline="always")
def segment_of(attr, segments):
    """Segment of an attribute in a predicate list (all its predicates share it)."""
    return np.int64(mix(np.uint64(attr)) % np.uint64(segments))


@numba.njit(cache=True, nogil=True, inline="always")
def signature_bit(ta, vbits, value_signed, width):
    """Bit of a predicate (or event value) in a ``width``-bit segment signature.

    Equality-like families hash the typed attribute and the operand bits; the
    ordering and presence families hash the typed attribute only (Section 4.2).
    """
    h = np.uint64(ta) * GOLD
    if value_signed:
        h = h ^ vbits
    return np.int64(mix(h) % np.uint64(width))


@numba.njit(cache=True, nogil=True)
def item_keys(family, attr, ta, vbits, value_signed, segments, width, seg, bit):
    """Segment and signature bit of items."""
    for i in range(len(attr)):
        seg[i] = segment_of(attr[i], segments)
        bit[i] = signature_bit(ta[i], vbits[i], value_signed[family[i]], width) if width > 0 else 0


@numba.njit(cache=True, nogil=True)
def _upper(it_ta, it_val, lo, hi, ta, val):
    """First position in ``[lo, hi)`` whose key is greater than ``(ta, val)``."""
    while lo < hi:
        mid = (lo + hi) >> 1
        t = it_ta[mid]
        if t < ta or (t == ta and it_val[mid] <= val):
            lo = mid + 1
        else:
            hi = mid
    return lo


@numba.njit(cache=True, nogil=True)
def insert_items(start, items, segments, L):
    """Insert items ``start:`` in sorted position (Lemma 5: O(1) to find the segment,
    O(log eta) to find the place in it, then the list's tail shifts by one).

    A full list moves to the pool's end with twice its capacity (amortised O(1));
    ``L.used[0]`` is the pool's used length.
    Returns the index of the first item not inserted (the pool is full), or ``len``.
    """
    lst, seg, ta, val, slot, weight, bit = items.lst, items.seg, items.ta, items.val, items.slot, items.weight, items.bit
    l_start, l_len, l_cap, l_sig, seg_off, s_sig = L.start, L.length, L.cap, L.sig, L.seg_off, L.seg_sig
    it_ta, it_val, it_slot, it_w = L.ta, L.val, L.slot, L.weight
    state = L.used
    pool = len(it_ta)
    stride = segments + 1
    for i in range(start, len(lst)):
        k = lst[i]
        n = l_len[k]
        if n == l_cap[k]:
            cap = max(4, 2 * n)
            if state[0] + cap > pool:
                return i
            s0 = l_start[k]
            s1 = state[0]
            for j in range(n):
                it_ta[s1 + j] = it_ta[s0 + j]
                it_val[s1 + j] = it_val[s0 + j]
                it_slot[s1 + j] = it_slot[s0 + j]
                it_w[s1 + j] = it_w[s0 + j]
            l_start[k] = s1
            l_cap[k] = cap
            state[0] += cap
        base = l_start[k]
        so = k * stride
        sg = seg[i]
        pos = _upper(it_ta, it_val, base + seg_off[so + sg], base + seg_off[so + sg + 1], ta[i], val[i])
        for j in range(base + n, pos, -1):
            it_ta[j] = it_ta[j - 1]
            it_val[j] = it_val[j - 1]
            it_slot[j] = it_slot[j - 1]
            it_w[j] = it_w[j - 1]
        it_ta[pos] = ta[i]
        it_val[pos] = val[i]
        it_slot[pos] = slot[i]
        it_w[pos] = weight[i]
        for t in range(sg + 1, stride):
            seg_off[so + t] += 1
        l_len[k] = n + 1
        mask = np.uint64(1) << np.uint64(bit[i])
        s_sig[k * segments + sg] |= mask
        l_sig[k] |= mask
    return len(lst)


@numba.njit(cache=True, nogil=True)
def delete_items(items, segments, L):
    """Remove one stored copy of each item; returns how many were not found (0 if consistent)."""
    lst, seg, ta, val, slot, weight = items.lst, items.seg, items.ta, items.val, items.slot, items.weight
    l_start, l_len, seg_off = L.start, L.length, L.seg_off
    it_ta, it_val, it_slot, it_w = L.ta, L.val, L.slot, L.weight
    missing = 0
    stride = segments + 1
    for i in range(len(lst)):
        k = lst[i]
        base = l_start[k]
        so = k * stride
        sg = seg[i]
        e = base + seg_off[so + sg + 1]
        pos = lower_bound2(it_ta, it_val, base + seg_off[so + sg], e, ta[i], val[i])
        found = -1
        while pos < e and it_ta[pos] == ta[i] and it_val[pos] == val[i]:
            if it_slot[pos] == slot[i] and it_w[pos] == weight[i]:
                found = pos
                break
            pos += 1
        if found < 0:
            missing += 1
            continue
        end = base + l_len[k]
        for j in range(found, end - 1):
            it_ta[j] = it_ta[j + 1]
            it_val[j] = it_val[j + 1]
            it_slot[j] = it_slot[j + 1]
            it_w[j] = it_w[j + 1]
        for t in range(sg + 1, stride):
            seg_off[so + t] -= 1
        l_len[k] -= 1
    return missing


@numba.njit(cache=True, nogil=True)
def resign(lists, value_signed, width, segments, L):
    """Recompute the segment and list signatures of ``lists`` from their items."""
    l_family, l_start, seg_off, l_sig, s_sig = L.family, L.start, L.seg_off, L.sig, L.seg_sig
    it_ta, it_vbits = L.ta, L.val.view(np.uint64)
    stride = segments + 1
    for i in range(len(lists)):
        k = lists[i]
        signed = value_signed[l_family[k]]
        total = np.uint64(0)
        for sg in range(segments):
            sig = np.uint64(0)
            if width > 0:
                for j in range(l_start[k] + seg_off[k * stride + sg], l_start[k] + seg_off[k * stride + sg + 1]):
                    sig |= np.uint64(1) << np.uint64(signature_bit(it_ta[j], it_vbits[j], signed, width))
            s_sig[k * segments + sg] = sig
            total |= sig
        l_sig[k] = total


@numba.njit(cache=True, nogil=True)
def compact(n_lists, L, new_ta, new_val, new_slot, new_w):
    """Copy every list into fresh pool arrays without holes, each list's capacity cut to
    its length (at least 4); returns the used length."""
    l_start, l_len, l_cap = L.start[:n_lists], L.length, L.cap
    it_ta, it_val, it_slot, it_w = L.ta, L.val, L.slot, L.weight
    used = 0
    for k in range(len(l_start)):
        s = l_start[k]
        for j in range(l_len[k]):
            new_ta[used + j] = it_ta[s + j]
            new_val[used + j] = it_val[s + j]
            new_slot[used + j] = it_slot[s + j]
            new_w[used + j] = it_w[s + j]
        l_start[k] = used
        l_cap[k] = max(4, l_len[k])
        used += l_cap[k]
    return used


BIAS = 1 << 15
"""Zero of a 16-bit count packed under an epoch stamp: ``word = epoch << 16 | count + BIAS``."""


@numba.njit(cache=True, nogil=True)
def _touch(c, w, s_word, epoch, touched, nt):
    """Add ``w`` to slot ``c``'s count, reset first if it was last counted before this event
    (stamp and count share one word: one cache line per touch)."""
    x = s_word[c]
    if x >> 16 != epoch:
        x = (epoch << 16) | BIAS
        touched[nt] = c
        nt += 1
    s_word[c] = x + w
    return nt


@numba.njit(cache=True, nogil=True)
def _probe(s, e, family, ta, val, items, s_word, epoch, touched, nt):
    """Range-scan the segment ``[s, e)`` of ``items`` (:class:`~matchers.opindex.layout.Pool`)
    for the items that fire on the event value ``(ta, val)``."""
    it_ta, it_val, it_slot, it_w = items
    if family == 0 or family == 4:  # equality on the value (or on the string-predicate id)
        p = lower_bound2(it_ta, it_val, s, e, ta, val)
        while p < e and it_ta[p] == ta and it_val[p] == val:
            nt = _touch(it_slot[p], it_w[p], s_word, epoch, touched, nt)
            p += 1
    elif family == 1:  # operand >= value
        p = lower_bound2(it_ta, it_val, s, e, ta, val)
        while p < e and it_ta[p] == ta:
            nt = _touch(it_slot[p], it_w[p], s_word, epoch, touched, nt)
            p += 1
    elif family == 2:  # operand <= value
        p = lower_bound(it_ta, s, e, ta)
        while p < e and it_ta[p] == ta and it_val[p] <= val:
            nt = _touch(it_slot[p], it_w[p], s_word, epoch, touched, nt)
            p += 1
    else:  # presence
        p = lower_bound(it_ta, s, e, ta)
        while p < e and it_ta[p] == ta:
            nt = _touch(it_slot[p], it_w[p], s_word, epoch, touched, nt)
            p += 1
    return nt




@numba.njit(cache=True, nogil=True)
def _sweep(s, e, family, ev_pos, ev, items, s_word, epoch, touched, nt):
    """Walk a whole (short) list ``[s, e)`` of ``items`` and fire the items whose value in the
    events ``ev`` satisfies them."""
    ev_val, ev_soff, ev_spid = ev.val, ev.soff, ev.spid
    it_ta, it_val, it_slot, it_w = items
    n_ta = len(ev_pos)
    for p in range(s, e):
        ta = it_ta[p]
        if ta >= n_ta:
            continue
        j = ev_pos[ta]
        if j < 0:
            continue
        if fires(family, ev_val[j], it_val[p], j, ev_soff, ev_spid):
            nt = _touch(it_slot[p], it_w[p], s_word, epoch, touched, nt)
    return nt


@numba.njit(cache=True, nogil=True)
def match_batch(ev, ev_vbits, ev_sbits, pivot_slot, P, L, S, epoch, scratch, out_keys):
    """Match a batch (Algorithm 2).

    For each pivot attribute of an event, each of its predicate lists is searched: the
    list's signature, then for each event value the segment of its attribute, that
    segment's signature, and a range scan of the segment; a list no longer than
    ``sweep_factor`` times the event size is instead walked once, looking each item's
    attribute up in the event (cheaper than one probe per event value).  Fired items
    add their weight to clause slots (``s_word``, see :func:`_touch`); a slot holds when
    its count reaches its need (``s_meta = entry << 16 | need``; DNF: the conjunction's
    size, CNF: 1) and an entry matches when all its slots hold (``e_word``: the slots
    still to hold, under the epoch stamp).

    ``ev_val`` holds numbers, booleans as 1/0 and string codes; ``ev_soff``/``ev_spid``
    list the satisfied string-predicate ids of each string value; ``P`` is a
    :class:`~matchers.opindex.layout.Search`, ``scratch`` a
    :class:`~matchers.opindex.layout.Scratch` (its ``ev_pos`` filled with -1).  Returns
    ``(offsets, keys, epoch)``; keys are sorted and distinct per event.
    """
    n_families, segments, width, sweep_factor = P
    ev_pos, touched, touched_e = scratch
    items = Pool(L.ta, L.val, L.slot, L.weight)  # what the list searches read of L
    ev_off, ev_attr, ev_kind, ev_val, ev_soff, ev_spid = ev.off, ev.attr, ev.kind, ev.val, ev.soff, ev.spid
    list_of = L.list_of
    l_start, l_len, l_sig, seg_off, s_sig = L.start, L.length, L.sig, L.seg_off, L.seg_sig
    s_meta, e_nslots, e_key, s_word, e_word = S.meta, S.e_nslots, S.e_key, S.word, S.e_word
    n = len(ev_off) - 1
    offsets = np.zeros(n + 1, dtype=np.int64)
    n_out = 0
    count = np.empty((1 << RADIX_BITS) + 1, dtype=np.int64)
    n_ta = len(ev_pos)
    max_m = 0
    for i in range(n):
        max_m = max(max_m, ev_off[i + 1] - ev_off[i])
    seg = np.empty(max_m, dtype=np.int64)
    bit_v = np.empty(max_m, dtype=np.int64)
    bit_a = np.empty(max_m, dtype=np.int64)
    sbit = np.zeros(len(ev_spid), dtype=np.int64)
    for i in range(n):
        epoch += 1
        s = ev_off[i]
        e = ev_off[i + 1]
        m = e - s
        for j in range(s, e):
            ta = ev_attr[j] * 3 + ev_kind[j]
            if ta < n_ta:
                ev_pos[ta] = j
            seg[j - s] = segment_of(ev_attr[j], segments)
            if width > 0:
                bit_v[j - s] = signature_bit(ta, ev_vbits[j], True, width)
                bit_a[j - s] = signature_bit(ta, ev_vbits[j], False, width)
                for q in range(ev_soff[j], ev_soff[j + 1]):
                    sbit[q] = signature_bit(ta, ev_sbits[q], True, width)
        nt = 0
        for jp in range(s, e):
            pa = ev_attr[jp]
            if pa >= len(pivot_slot):
                continue
            slot = pivot_slot[pa]
            if slot < 0:
                continue
            for f in range(n_families):
                k = list_of[slot * n_families + f]
                if k < 0:
                    continue
                n_items = l_len[k]
                if n_items == 0:
                    continue
                base = l_start[k]
                if n_items <= sweep_factor * m:
                    nt = _sweep(base, base + n_items, f, ev_pos, ev, items, s_word, epoch, touched, nt)
                    continue
                lsig = l_sig[k]
                so = k * (segments + 1)
                for j in range(s, e):
                    kind = ev_kind[j]
                    sg = seg[j - s]
                    if f == 4:
                        if kind != 1:
                            continue
                        ta = ev_attr[j] * 3 + kind
                        for q in range(ev_soff[j], ev_soff[j + 1]):
                            if width > 0:
                                mask = np.uint64(1) << np.uint64(sbit[q])
                                if lsig & mask == 0 or s_sig[k * segments + sg] & mask == 0:
                                    continue
                            nt = _probe(base + seg_off[so + sg], base + seg_off[so + sg + 1], 4, ta,
                                        np.float64(ev_spid[q]), items, s_word, epoch, touched, nt)
                        continue
                    if (f == 1 or f == 2) and kind != 0:
                        continue
                    if f == 0 and kind == 1 and ev_val[j] < 0:
                        continue
                    if width > 0:
                        mask = np.uint64(1) << np.uint64(bit_v[j - s] if f == 0 else bit_a[j - s])
                        if lsig & mask == 0 or s_sig[k * segments + sg] & mask == 0:
                            continue
                    nt = _probe(base + seg_off[so + sg], base + seg_off[so + sg + 1], f, ev_attr[j] * 3 + kind,
                                ev_val[j], items, s_word, epoch, touched, nt)
        for j in range(s, e):
            ta = ev_attr[j] * 3 + ev_kind[j]
            if ta < n_ta:
                ev_pos[ta] = -1
        ne = 0
        for t in range(nt):
            c = touched[t]
            meta = s_meta[c]
            if (s_word[c] & 0xFFFF) - BIAS >= meta & 0xFFFF:
                en = meta >> 16
                x = e_word[en]
                if x >> 16 != epoch:
                    x = (epoch << 16) | e_nslots[en]
                    touched_e[ne] = en
                    ne += 1
                e_word[en] = x - 1
        first = n_out
        for t in range(ne):
            en = touched_e[t]
            if e_word[en] & 0xFFFF == 0:
                out_keys, n_out = push(out_keys, n_out, e_key[en])
        out_keys, n_out = sort_unique(out_keys, first, n_out, count)
        offsets[i + 1] = n_out
    return offsets, out_keys, epoch

