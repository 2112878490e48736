"""Numba kernels of the OpIndex and the k-index baseline.

Plain ``njit`` functions over contiguous arrays; the Python orchestration lives in
:mod:`.index` and :mod:`.kindex`.  The OpIndex item pool holds every predicate list:
list ``k`` (one (pivot, family) pair) owns the pool range ``l_start[k] :
l_start[k] + l_len[k]`` (capacity ``l_cap[k]``), its ``b`` segments stored one after
the other (``seg_off[k * (b + 1) + s]`` is where segment ``s`` starts), each sorted by
``(ta, value)``; ``s_sig[k * b + s]`` is a segment's signature, ``l_sig[k]`` their OR.

Only scalar helpers are ``inline="always"``: numba's IR-level inlining of a helper
that takes arrays makes each call in the caller's loop update the arrays' reference
counts (atomic calls); as plain calls they cost nothing of the kind (measured on
``match_entries``: a fifth of its time at N = 1M, a third on a small index).
"""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import ArrayLike

from matchers.arrays import enlarged
from matchers.opindex.layout import F_STR
from matchers.prefetch import prefetch

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLD = np.uint64(0x9E3779B97F4A7C15)


@numba.njit(cache=True, nogil=True)
def _push(out_keys, n_out, key):
    """Append ``key`` at ``n_out``, doubling ``out_keys`` when full."""
    if n_out == len(out_keys):
        out_keys = enlarged(out_keys, n_out, 2 * len(out_keys) + 16)
    out_keys[n_out] = key
    return out_keys, n_out + 1


RADIX_BITS = 8
"""Bits of the counting pass of :func:`_sort_unique` (``2 ** RADIX_BITS`` buckets)."""


@numba.njit(cache=True, nogil=True)
def _sort_unique(out_keys, first, n_out, count):
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
    z = np.uint64(x) + _GOLD
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


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
    h = np.uint64(ta) * _GOLD
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
def _lower(it_ta, it_val, lo, hi, ta, val):
    """First position in ``[lo, hi)`` whose key is not less than ``(ta, val)``."""
    while lo < hi:
        mid = (lo + hi) >> 1
        t = it_ta[mid]
        if t < ta or (t == ta and it_val[mid] < val):
            lo = mid + 1
        else:
            hi = mid
    return lo


@numba.njit(cache=True, nogil=True)
def _lower_ta(it_ta, lo, hi, ta):
    """First position in ``[lo, hi)`` whose typed attribute is not less than ``ta``."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if it_ta[mid] < ta:
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
        pos = _lower(it_ta, it_val, base + seg_off[so + sg], e, ta[i], val[i])
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
def _probe(s, e, family, ta, val, it_ta, it_val, it_slot, it_w, s_word, epoch, touched, nt):
    """Range-scan the segment ``[s, e)`` for the items that fire on the event value ``(ta, val)``."""
    if family == 0 or family == 4:  # equality on the value (or on the string-predicate id)
        p = _lower(it_ta, it_val, s, e, ta, val)
        while p < e and it_ta[p] == ta and it_val[p] == val:
            nt = _touch(it_slot[p], it_w[p], s_word, epoch, touched, nt)
            p += 1
    elif family == 1:  # operand >= value
        p = _lower(it_ta, it_val, s, e, ta, val)
        while p < e and it_ta[p] == ta:
            nt = _touch(it_slot[p], it_w[p], s_word, epoch, touched, nt)
            p += 1
    elif family == 2:  # operand <= value
        p = _lower_ta(it_ta, s, e, ta)
        while p < e and it_ta[p] == ta and it_val[p] <= val:
            nt = _touch(it_slot[p], it_w[p], s_word, epoch, touched, nt)
            p += 1
    else:  # presence
        p = _lower_ta(it_ta, s, e, ta)
        while p < e and it_ta[p] == ta:
            nt = _touch(it_slot[p], it_w[p], s_word, epoch, touched, nt)
            p += 1
    return nt


@numba.njit(cache=True, nogil=True)
def _fires(family, v, o, j, ev_soff, ev_spid):
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


@numba.njit(cache=True, nogil=True)
def _sweep(s, e, family, ev_pos, ev_val, ev_soff, ev_spid, it_ta, it_val, it_slot, it_w,
           s_word, epoch, touched, nt):
    """Walk a whole (short) list ``[s, e)`` and fire the items whose event value satisfies them."""
    n_ta = len(ev_pos)
    for p in range(s, e):
        ta = it_ta[p]
        if ta >= n_ta:
            continue
        j = ev_pos[ta]
        if j < 0:
            continue
        if _fires(family, ev_val[j], it_val[p], j, ev_soff, ev_spid):
            nt = _touch(it_slot[p], it_w[p], s_word, epoch, touched, nt)
    return nt


@numba.njit(cache=True, nogil=True)
def match_batch(ev, ev_vbits, ev_sbits, pivot_slot, n_families, segments, width, value_signed, sweep_factor,
                L, S, epoch, ev_pos, touched, touched_e, out_keys):
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
    list the satisfied string-predicate ids of each string value; ``ev_pos`` is a
    scratch array over typed attributes filled with -1.  Returns ``(offsets, keys,
    epoch)``; keys are sorted and distinct per event.
    """
    ev_off, ev_attr, ev_kind, ev_val, ev_soff, ev_spid = ev.off, ev.attr, ev.kind, ev.val, ev.soff, ev.spid
    list_of = L.list_of
    l_start, l_len, l_sig, seg_off, s_sig = L.start, L.length, L.sig, L.seg_off, L.seg_sig
    it_ta, it_val, it_slot, it_w = L.ta, L.val, L.slot, L.weight
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
                    nt = _sweep(base, base + n_items, f, ev_pos, ev_val, ev_soff, ev_spid, it_ta, it_val,
                                it_slot, it_w, s_word, epoch, touched, nt)
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
                                        np.float64(ev_spid[q]), it_ta, it_val, it_slot, it_w,
                                        s_word, epoch, touched, nt)
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
                                ev_val[j], it_ta, it_val, it_slot, it_w, s_word, epoch, touched, nt)
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
                out_keys, n_out = _push(out_keys, n_out, e_key[en])
        out_keys, n_out = _sort_unique(out_keys, first, n_out, count)
        offsets[i + 1] = n_out
    return offsets, out_keys, epoch


# -- the entry store (``evaluate="entries"``): pivot blocks of entry records -------------
#
# Pivot slot ``p`` owns a block of records in three parallel pools (``r_key``, ``r_x``,
# ``r_y``); its header is the aligned line ``hdr[HS p : HS p + HS]``: ``hdr[HS p + g]``
# (``g`` = 0 .. N_GROUPS) bound the groups, absolute pool positions, and
# ``hdr[HS p + H_CAP]`` is the block's capacity from ``hdr[HS p]``.  The groups say how
# the pivot's own predicate can be searched (``G_EQ`` value = key, ``G_LE`` value <=
# -key, ``G_GE`` value >= key, ``G_ANY`` no key, ``G_STR`` a string predicate whose id is
# the key); each is sorted by ``(key, entry)``, so the records of a range group that hold
# for a value are a prefix of the group.  A record is 24 bytes: ``r_key`` the key
# (float); ``r_x`` either ``sub << 2 | kind + 1`` (the subscription key and the pivot
# predicate's kind, when that predicate, a single item, is the whole entry) or, with the
# two low bits 0, the signature of the typed attributes the entry needs (bits 2 to 39)
# and ``second + 1`` (bits 40 to 62) with a typed attribute ``second`` the entry needs
# besides the pivot's (-1: none, or past :data:`MAX_SECOND`; checked exactly before the
# items are read); ``r_y`` is the entry.  Matching reads ``r_y`` only for the entries it
# evaluates.  All derived from the entry's items by :func:`_entry_keys`.
# An entry's items start at item ``e_item[entry]`` and run up to the one marked
# ``END_ENTRY``.  Item ``q`` is 16 bytes, two words of one pool seen through two views:
# ``q_meta[2 q]`` packs its typed attribute, family, weight and end mark
# (:func:`item_meta`), ``q_val[2 q + 1]`` is its operand.  The end mark closes a
# predicate (``END_PRED``), a clause (``END_CLAUSE``; a DNF entry is a clause per
# predicate, the pivot's first) or the entry (``END_ENTRY``).

END_PRED, END_CLAUSE, END_ENTRY = 1, 2, 3
G_EQ, G_LE, G_GE, G_ANY, G_STR = 0, 1, 2, 3, 4
N_GROUPS = 5
HS = 8
"""Header words per pivot slot: one 64-byte line."""
H_CAP = N_GROUPS + 1
"""Header word of the block's capacity."""
SIG_BITS = 38
"""Signature bits of a record (``r_x`` bits 2 to 39)."""
SECOND_SHIFT = 40
MAX_SECOND = (1 << 23) - 2
"""Largest typed attribute a record names as its ``second`` (``r_x`` bits 40 to 62, the
sign bit left clear)."""


def item_meta(ta: ArrayLike, family: ArrayLike, weight: ArrayLike, end: ArrayLike) -> np.ndarray:
    """``ta << 8 | family << 3 | (weight < 0) << 2 | end`` (weights are +1 or -1)."""
    return ((np.asarray(ta, np.int64) << 8) | (np.asarray(family, np.int64) << 3)
            | (np.asarray(weight, np.int64) < 0).astype(np.int64) << 2 | np.asarray(end, np.int64))


@numba.njit(cache=True, nogil=True, inline="always")
def need_bit(ta, width):
    """Signature bit of a typed attribute in a record (``width`` > 0 signature bits, at most
    :data:`SIG_BITS`, from bit 2 on); the hash is scaled to the width by a multiply and a
    shift, not a division (twenty of these per event)."""
    h = mix(np.uint64(ta) * _GOLD) >> np.uint64(32)
    return np.int64(1) << (2 + np.int64((h * np.uint64(min(width, SIG_BITS))) >> np.uint64(32)))


@numba.njit(cache=True, nogil=True)
def _entry_keys(q, q_meta, q_val, width):
    """``(group, key, sig, kind, second)`` of the entry whose items start at ``q``.

    ``sig`` has a bit per clause whose items are all on one typed attribute (a predicate
    holds only on a present value of its type).  The first clause (the pivot's) holds
    only if one of its positive items fires (negative ones only veto); when they are all
    ``=``, ``<=``, ``>=`` on one attribute, the pivot's value must lie in their hull
    ``[lo, hi]``: the group is ``G_EQ`` (lo = hi), ``G_GE`` (key lo), ``G_LE`` (key -hi)
    or, with no bound, ``G_ANY``; a clause of one positive string item is ``G_STR`` (key:
    the string predicate's id).  ``kind`` is the pivot predicate's kind when its single
    item is the whole entry, else -1.  ``second`` is the typed attribute of the first
    other clause whose items are all on one typed attribute, else -1.
    """
    s = np.int64(0)
    lo = np.inf
    hi = -np.inf
    hull = True
    first = True
    ta_c = q_meta[2 * q] >> 8
    same = True
    second = -1
    q0 = q
    while True:
        meta = q_meta[2 * q]
        if meta >> 8 != ta_c:
            same = False
        if first and not meta & 4:
            fam = (meta >> 3) & 7
            v = q_val[2 * q + 1]
            if fam > 2:
                hull = False
            else:
                lo = min(lo, -np.inf if fam == 1 else v)
                hi = max(hi, np.inf if fam == 2 else v)
        end = meta & 3
        if end >= END_CLAUSE:
            if same and width > 0:
                s |= need_bit(ta_c, width)
            if same and not first and second < 0:
                second = ta_c
            if first and not same:
                hull = False
            first = False
            if end == END_ENTRY:
                break
            ta_c = q_meta[2 * q + 2] >> 8
            same = True
        q += 1
    group, key = G_ANY, 0.0
    meta = q_meta[2 * q0]
    if meta & 3 >= END_CLAUSE and not meta & 4 and (meta >> 3) & 7 == F_STR:
        group, key = G_STR, q_val[2 * q0 + 1]
    elif hull and lo == hi:
        group, key = G_EQ, lo
    elif hull and lo > -np.inf:
        group, key = G_GE, lo
    elif hull and hi < np.inf:
        group, key = G_LE, -hi
    kind = (q_meta[2 * q0] >> 8) % 3 if group != G_ANY and q == q0 else -1
    return group, key, s, kind, second


@numba.njit(cache=True, nogil=True, inline="always")
def record_word(sig, second):
    """``r_x`` of a record whose entry is not a single predicate."""
    return sig | (np.int64(second + 1 if second <= MAX_SECOND else 0) << SECOND_SHIFT)


@numba.njit(cache=True, nogil=True)
def entry_keys(first, q_meta, q_val, width, group, key, sig, kind, second):
    """:func:`_entry_keys` of the entries whose items start at ``first``."""
    for i in range(len(first)):
        group[i], key[i], sig[i], kind[i], second[i] = _entry_keys(first[i], q_meta, q_val, width)


@numba.njit(cache=True, nogil=True)
def _record_pos(r_key, r_y, lo, hi, key, entry):
    """First record in ``[lo, hi)`` whose ``(key, entry)`` is not less than the given."""
    while lo < hi:
        mid = (lo + hi) >> 1
        k = r_key[mid]
        if k < key or (k == key and r_y[mid] < entry):
            lo = mid + 1
        else:
            hi = mid
    return lo


LINEAR_SCAN = 128
"""Ranges of at most this many records are searched linearly: sequential lines are
prefetched, where a binary search waits for each of its misses (at N = 1M, Table 3,
us/event: 12.2 all binary, 10.8 linear up to 32 records, 10.4 up to 64, 9.1 up to 128,
9.5 up to 256, 9.1-9.3 all linear)."""


@numba.njit(cache=True, nogil=True)
def _key_pos(r_key, lo, hi, key, strict):
    """First record in ``[lo, hi)`` whose key is not less than (``strict``: greater than) ``key``."""
    if hi - lo <= LINEAR_SCAN:
        while lo < hi and (r_key[lo] < key or (strict and r_key[lo] == key)):
            lo += 1
        return lo
    while lo < hi:
        mid = (lo + hi) >> 1
        k = r_key[mid]
        if k < key or (strict and k == key):
            lo = mid + 1
        else:
            hi = mid
    return lo


@numba.njit(cache=True, nogil=True)
def _move_record(src, dst, r_key, r_x, r_y):
    r_key[dst] = r_key[src]
    r_x[dst] = r_x[src]
    r_y[dst] = r_y[src]


@numba.njit(cache=True, nogil=True)
def insert_records(start, slot, entry, width, st):
    """Insert the records of ``(slot, entry)`` pairs ``start:`` into their pivot blocks, in
    ``(key, entry)`` order within their group (a binary search, then the block's tail
    shifts by one).  A full block moves to the pool's end with twice its capacity;
    ``st.used[0]`` is the pool's used length.  Returns the index of the first record not
    inserted (the pool is full), or ``len``."""
    hdr, r_key, r_x, r_y, e_item, e_key, q_meta, q_val = st.hdr, st.r_key, st.r_x, st.r_y, st.e_item, st.e_key, st.q_meta, st.q_val
    state = st.used
    pool = len(r_key)
    for i in range(start, len(slot)):
        h = slot[i] * HS
        base = hdr[h]
        n = hdr[h + N_GROUPS] - base
        if n == hdr[h + H_CAP]:
            cap = max(4, 2 * n)
            if state[0] + cap > pool:
                return i
            s1 = state[0]
            for j in range(n):
                _move_record(base + j, s1 + j, r_key, r_x, r_y)
            for g in range(N_GROUPS + 1):
                hdr[h + g] += s1 - base
            hdr[h + H_CAP] = cap
            state[0] += cap
        en = entry[i]
        group, key, sig, kind, second = _entry_keys(e_item[en], q_meta, q_val, width)
        pos = _record_pos(r_key, r_y, hdr[h + group], hdr[h + group + 1], key, en)
        for j in range(hdr[h + N_GROUPS], pos, -1):
            _move_record(j - 1, j, r_key, r_x, r_y)
        r_key[pos] = key
        r_x[pos] = (np.int64(e_key[en]) << 2 | (kind + 1)) if kind >= 0 else record_word(sig, second)
        r_y[pos] = en
        for g in range(group + 1, N_GROUPS + 1):
            hdr[h + g] += 1
    return len(slot)


@numba.njit(cache=True, nogil=True)
def delete_records(slot, entry, width, st):
    """Remove the record of each ``(slot, entry)`` (its items still in place); returns
    how many were not found."""
    hdr, r_key, r_x, r_y, e_item, q_meta, q_val = st.hdr, st.r_key, st.r_x, st.r_y, st.e_item, st.q_meta, st.q_val
    missing = 0
    for i in range(len(slot)):
        h = slot[i] * HS
        group, key, _, _, _ = _entry_keys(e_item[entry[i]], q_meta, q_val, width)
        end = hdr[h + group + 1]
        pos = _record_pos(r_key, r_y, hdr[h + group], end, key, entry[i])
        if pos == end or r_y[pos] != entry[i]:
            missing += 1
            continue
        for j in range(pos, hdr[h + N_GROUPS] - 1):
            _move_record(j + 1, j, r_key, r_x, r_y)
        for g in range(group + 1, N_GROUPS + 1):
            hdr[h + g] -= 1
    return missing


@numba.njit(cache=True, nogil=True)
def compact_records(n_slots, st, new_key, new_x, new_y):
    """Copy every block into fresh pools without holes, each block's capacity cut to its
    length (at least 4); returns the used length."""
    hdr, r_key, r_x, r_y = st.hdr, st.r_key, st.r_x, st.r_y
    used = 0
    for p in range(n_slots):
        h = p * HS
        base = hdr[h]
        n = hdr[h + N_GROUPS] - base
        new_key[used:used + n] = r_key[base:base + n]
        new_x[used:used + n] = r_x[base:base + n]
        new_y[used:used + n] = r_y[base:base + n]
        for g in range(N_GROUPS + 1):
            hdr[h + g] += used - base
        hdr[h + H_CAP] = max(4, n)
        used += hdr[h + H_CAP]
    return used


HEADER_AHEAD = 32
"""Event values ahead of the one being matched whose pivot header is prefetched."""
BLOCK_AHEAD = 16
"""Event values ahead whose pivot block is prefetched (its header arrived by then)."""
PREFETCH_BLOCK = 256
"""Blocks of at most this many records are prefetched whole, longer ones a line per group."""


@numba.njit(cache=True, nogil=True)
def _pivot_of(j, ev_attr, pivot_slot):
    """Pivot slot of the event value at ``j`` (-1: past the batch or no pivot)."""
    if j >= len(ev_attr):
        return -1
    pa = ev_attr[j]
    return pivot_slot[pa] if pa < len(pivot_slot) else -1


@numba.njit(cache=True, nogil=True)
def _prefetch_block(h, hdr, r_key, r_x):
    """The lines of a block's keys and ``r_x`` words (``r_y`` is read for few records)."""
    lo = hdr[h]
    hi = hdr[h + N_GROUPS]
    if hi - lo <= PREFETCH_BLOCK:
        for t in range(lo, hi, 8):
            prefetch(r_key, t)
            prefetch(r_x, t)
    else:
        for g in range(N_GROUPS):
            prefetch(r_key, hdr[h + g])
            prefetch(r_x, hdr[h + g])


@numba.njit(cache=True, nogil=True)
def match_entries(ev, pivot_slot, width, st, ev_pos, out_keys):
    """Match a batch on the entry store.

    For each pivot attribute of an event, the records of each group whose pivot predicate
    can hold are visited: a prefix of ``G_LE`` and ``G_GE`` (up to the first key past
    the value), the run of ``G_EQ`` equal to it (a search), a run of ``G_STR`` per string
    predicate the value satisfies, all of ``G_ANY``.  One whose entry is
    its pivot predicate alone, of the value's kind, matches at once; of the others, those
    whose signature is a subset of the event's (every typed attribute the entry needs may
    be present) and whose ``second`` typed attribute is in the event have their entry
    evaluated clause by clause, each item looking its typed attribute up in ``ev_pos`` (a
    scratch array over typed attributes filled with -1), until a clause fails.  The
    headers and blocks of the values :data:`HEADER_AHEAD` and :data:`BLOCK_AHEAD` ahead
    are prefetched meanwhile, so their misses overlap the work.  Returns ``(offsets,
    keys)``; keys are sorted and distinct per event.
    """
    ev_off, ev_attr, ev_kind, ev_val, ev_soff, ev_spid = ev.off, ev.attr, ev.kind, ev.val, ev.soff, ev.spid
    hdr, r_key, r_x, r_y, e_item, e_key, q_meta, q_val = st.hdr, st.r_key, st.r_x, st.r_y, st.e_item, st.e_key, st.q_meta, st.q_val
    n = len(ev_off) - 1
    offsets = np.zeros(n + 1, dtype=np.int64)
    n_out = 0
    count = np.empty((1 << RADIX_BITS) + 1, dtype=np.int64)
    n_ta = len(ev_pos)
    for j in range(min(HEADER_AHEAD, len(ev_attr))):
        p = _pivot_of(j, ev_attr, pivot_slot)
        if p >= 0:
            prefetch(hdr, p * HS)
    for i in range(n):
        s = ev_off[i]
        e = ev_off[i + 1]
        evsig = np.int64(0)
        for j in range(s, e):
            ta = ev_attr[j] * 3 + ev_kind[j]
            if ta < n_ta:
                ev_pos[ta] = j
            if width > 0:
                evsig |= need_bit(ta, width)
        outside = ~evsig & ((np.int64(1) << SECOND_SHIFT) - 1)  # and the tag bits: singles never pass
        first = n_out
        for jp in range(s, e):
            p = _pivot_of(jp + HEADER_AHEAD, ev_attr, pivot_slot)
            if p >= 0:
                prefetch(hdr, p * HS)
            p = _pivot_of(jp + BLOCK_AHEAD, ev_attr, pivot_slot)
            if p >= 0:
                _prefetch_block(p * HS, hdr, r_key, r_x)
            p = _pivot_of(jp, ev_attr, pivot_slot)
            if p < 0:
                continue
            v = ev_val[jp]
            kind1 = ev_kind[jp] + 1
            h = p * HS
            for g in range(N_GROUPS):
                lo = hdr[h + g]
                hi = hdr[h + g + 1]
                if lo == hi or (g < G_ANY and v != v):  # NaN: no =, <=, >= holds
                    continue
                limit = np.inf  # a range group's records hold up to the first key past it
                if g == G_EQ:
                    lo = _key_pos(r_key, lo, hi, v, False)
                    hi = _key_pos(r_key, lo, hi, v, True)
                elif g == G_LE:
                    limit = -v
                elif g == G_GE:
                    limit = v
                t = ev_soff[jp]  # G_STR: one search per string predicate the value satisfies
                while True:
                    a, b = lo, hi
                    if g == G_STR:
                        if t == ev_soff[jp + 1]:
                            break
                        a = _key_pos(r_key, lo, hi, ev_spid[t], False)
                        b = _key_pos(r_key, a, hi, ev_spid[t], True)
                        t += 1
                    if n_out + (b - a) > len(out_keys):
                        out_keys = enlarged(out_keys, n_out, 2 * (n_out + b - a) + 16)
                    for r in range(a, b):
                        if r_key[r] > limit:
                            break
                        # a single-predicate entry of the value's kind is a match: kept
                        # without a branch (its tag is the kind, a multi's 0)
                        x = r_x[r]
                        out_keys[n_out] = x >> 2
                        n_out += (x & 3) == kind1
                        if x & outside:  # a single's tag bits are outside too
                            continue
                        second = (x >> SECOND_SHIFT) - 1
                        if second >= 0 and (second >= n_ta or ev_pos[second] < 0):
                            continue
                        en = r_y[r]
                        q = e_item[en]
                        acc = 0
                        held = False
                        while True:
                            meta = q_meta[2 * q]
                            ta = meta >> 8
                            j = ev_pos[ta] if ta < n_ta else -1
                            if j >= 0 and _fires((meta >> 3) & 7, ev_val[j], q_val[2 * q + 1], j, ev_soff, ev_spid):
                                acc += -1 if meta & 4 else 1
                            end = meta & 3
                            if end != 0:
                                if acc > 0:
                                    held = True
                                acc = 0
                                if end >= END_CLAUSE:
                                    if not held:
                                        break
                                    if end == END_ENTRY:
                                        out_keys, n_out = _push(out_keys, n_out, e_key[en])
                                        break
                                    held = False
                            q += 1
                    if g != G_STR:
                        break
        for j in range(s, e):
            ta = ev_attr[j] * 3 + ev_kind[j]
            if ta < n_ta:
                ev_pos[ta] = -1
        out_keys, n_out = _sort_unique(out_keys, first, n_out, count)
        offsets[i + 1] = n_out
    return offsets, out_keys


# -- k-index (Whang et al., VLDB 2009), counting variant ------------------------------


@numba.njit(cache=True, nogil=True)
def kindex_tokens(ev_off, ev_attr, ev_kind, ev_val, ev_soff, ev_spid, tok_cells, n_cells, bp_off, bp, spid_base):
    """Tokens of each event: per value its presence token (the typed attribute), its
    domain cell, and its satisfied string predicates.  Returns ``(offsets, tokens)``."""
    n = len(ev_off) - 1
    nnz = len(ev_attr)
    tok = np.empty(2 * nnz + len(ev_spid), dtype=np.int64)
    off = np.zeros(n + 1, dtype=np.int64)
    nt = 0
    for i in range(n):
        for j in range(ev_off[i], ev_off[i + 1]):
            kind = ev_kind[j]
            ta = ev_attr[j] * 3 + kind
            if ta >= len(tok_cells):
                continue
            tok[nt] = ta
            nt += 1
            base = tok_cells[ta]
            if base >= 0:
                if kind == 0:
                    lo = bp_off[ta]
                    hi = bp_off[ta + 1]
                    v = ev_val[j]
                    a = lo
                    b = hi
                    while a < b:
                        mid = (a + b) >> 1
                        if bp[mid] < v:
                            a = mid + 1
                        else:
                            b = mid
                    cell = 2 * (a - lo)
                    if a < hi and bp[a] == v:
                        cell += 1
                    tok[nt] = base + cell
                    nt += 1
                else:
                    c = np.int64(ev_val[j])
                    if 0 <= c < n_cells[ta]:
                        tok[nt] = base + c
                        nt += 1
            for q in range(ev_soff[j], ev_soff[j + 1]):
                tok[nt] = spid_base + ev_spid[q]
                nt += 1
        off[i + 1] = nt
    return off, tok[:nt]


@numba.njit(cache=True, nogil=True)
def kindex_match(ev_off, ev_tok_off, ev_tok, post_off, post_entry, post_in, post_size, e_need, e_key,
                 acc, e_stamp, e_bad, epoch, touched, out_keys):
    """Match a batch on the k-index: each event token's posting list raises (``∈``) or
    rejects (``∉``) its conjunctions, skipping the size partitions larger than the
    event; a conjunction of K predicates matches when K of its ``∈`` postings are hit
    and none of its ``∉`` ones.  Returns ``(offsets, keys, epoch)``.
    """
    n = len(ev_off) - 1
    offsets = np.zeros(n + 1, dtype=np.int64)
    n_out = 0
    count = np.empty((1 << RADIX_BITS) + 1, dtype=np.int64)
    for i in range(n):
        epoch += 1
        nt = 0
        m = ev_off[i + 1] - ev_off[i]
        for t in range(ev_tok_off[i], ev_tok_off[i + 1]):
            tok = ev_tok[t]
            for p in range(post_off[tok], post_off[tok + 1]):
                if post_size[p] > m:
                    break
                en = post_entry[p]
                if e_stamp[en] != epoch:
                    e_stamp[en] = epoch
                    acc[en] = 0
                    e_bad[en] = False
                    touched[nt] = en
                    nt += 1
                if post_in[p]:
                    acc[en] += 1
                else:
                    e_bad[en] = True
        first = n_out
        for t in range(nt):
            en = touched[t]
            if acc[en] == e_need[en] and not e_bad[en]:
                out_keys, n_out = _push(out_keys, n_out, e_key[en])
        out_keys, n_out = _sort_unique(out_keys, first, n_out, count)
        offsets[i + 1] = n_out
    return offsets, out_keys, epoch
