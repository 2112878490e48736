"""Numba kernels of the OpIndex entry store (:mod:`.index`, the ``opindex`` matcher).

Shared kernels: :mod:`.kernels`.
"""

from __future__ import annotations

import numba
import numpy as np
from numpy.typing import ArrayLike

from matchers.arrays import enlarged, lower_bound2
from matchers.opindex.kernels import GOLD, RADIX_BITS, fires, mix, push, sort_unique
from matchers.opindex.layout import F_STR
from matchers.prefetch import prefetch

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
    h = mix(np.uint64(ta) * GOLD) >> np.uint64(32)
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
        pos = lower_bound2(r_key, r_y, hdr[h + group], hdr[h + group + 1], key, en)
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
        pos = lower_bound2(r_key, r_y, hdr[h + group], end, key, entry[i])
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
                            if j >= 0 and fires((meta >> 3) & 7, ev_val[j], q_val[2 * q + 1], j, ev_soff, ev_spid):
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
                                        out_keys, n_out = push(out_keys, n_out, e_key[en])
                                        break
                                    held = False
                            q += 1
                    if g != G_STR:
                        break
        for j in range(s, e):
            ta = ev_attr[j] * 3 + ev_kind[j]
            if ta < n_ta:
                ev_pos[ta] = -1
        out_keys, n_out = sort_unique(out_keys, first, n_out, count)
        offsets[i + 1] = n_out
    return offsets, out_keys

