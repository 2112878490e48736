"""Numba kernels of the OpIndex and the k-index baseline.

Plain ``njit`` functions over contiguous arrays; the Python orchestration lives in
:mod:`.index` and :mod:`.kindex`.  The OpIndex item pool holds every predicate list:
list ``k`` (one (pivot, family) pair) owns the pool range ``l_start[k] :
l_start[k] + l_len[k]`` (capacity ``l_cap[k]``), its ``b`` segments stored one after
the other (``seg_off[k * (b + 1) + s]`` is where segment ``s`` starts), each sorted by
``(ta, value)``; ``s_sig[k * b + s]`` is a segment's signature, ``l_sig[k]`` their OR.
"""

from __future__ import annotations

import numba
import numpy as np

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLD = np.uint64(0x9E3779B97F4A7C15)


@numba.njit(cache=True, nogil=True, inline="always")
def _push(out_keys, n_out, key):
    """Append ``key`` at ``n_out``, doubling ``out_keys`` when full."""
    if n_out == len(out_keys):
        grown = np.empty(2 * len(out_keys) + 16, dtype=out_keys.dtype)
        grown[:n_out] = out_keys[:n_out]
        out_keys = grown
    out_keys[n_out] = key
    return out_keys, n_out + 1


@numba.njit(cache=True, nogil=True)
def _sort_unique(out_keys, first, n_out):
    """Sort ``out_keys[first:n_out]`` and drop repeats in place; returns the new end."""
    if n_out - first < 2:
        return n_out
    part = np.sort(out_keys[first:n_out])
    u = 0
    for t in range(len(part)):
        if t == 0 or part[t] != part[t - 1]:
            out_keys[first + u] = part[t]
            u += 1
    return first + u


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


@numba.njit(cache=True, nogil=True, inline="always")
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


@numba.njit(cache=True, nogil=True, inline="always")
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


@numba.njit(cache=True, nogil=True, inline="always")
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
def insert_items(start, lst, seg, ta, val, slot, weight, bit, segments,
                 l_start, l_len, l_cap, l_sig, seg_off, s_sig, it_ta, it_val, it_slot, it_w, state):
    """Insert items ``start:`` in sorted position (Lemma 5: O(1) to find the segment,
    O(log eta) to find the place in it, then the list's tail shifts by one).

    A full list moves to the pool's end with twice its capacity (amortised O(1));
    ``state[0]`` is the pool's used length, ``state[1]`` the capacity left in holes.
    Returns the index of the first item not inserted (the pool is full), or ``len``.
    """
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
            state[1] += l_cap[k]
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
def delete_items(lst, seg, ta, val, slot, weight, segments, l_start, l_len, seg_off,
                 it_ta, it_val, it_slot, it_w):
    """Remove one stored copy of each item; returns how many were not found (0 if consistent)."""
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
def resign(lists, l_family, value_signed, width, segments, l_start, seg_off, l_sig, s_sig, it_ta, it_vbits):
    """Recompute the segment and list signatures of ``lists`` from their items."""
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
def compact(l_start, l_len, l_cap, it_ta, it_val, it_slot, it_w, new_ta, new_val, new_slot, new_w):
    """Copy every list into fresh pool arrays without holes; returns the used length."""
    used = 0
    for k in range(len(l_start)):
        s = l_start[k]
        for j in range(l_len[k]):
            new_ta[used + j] = it_ta[s + j]
            new_val[used + j] = it_val[s + j]
            new_slot[used + j] = it_slot[s + j]
            new_w[used + j] = it_w[s + j]
        l_start[k] = used
        used += l_cap[k]
    return used


@numba.njit(cache=True, nogil=True, inline="always")
def _touch(c, w, acc, s_stamp, epoch, touched, nt):
    if s_stamp[c] != epoch:
        s_stamp[c] = epoch
        acc[c] = 0
        touched[nt] = c
        nt += 1
    acc[c] += w
    return nt


@numba.njit(cache=True, nogil=True, inline="always")
def _probe(s, e, family, ta, val, it_ta, it_val, it_slot, it_w, acc, s_stamp, epoch, touched, nt):
    """Range-scan the segment ``[s, e)`` for the items that fire on the event value ``(ta, val)``."""
    if family == 0 or family == 4:  # equality on the value (or on the string-predicate id)
        p = _lower(it_ta, it_val, s, e, ta, val)
        while p < e and it_ta[p] == ta and it_val[p] == val:
            nt = _touch(it_slot[p], it_w[p], acc, s_stamp, epoch, touched, nt)
            p += 1
    elif family == 1:  # operand >= value
        p = _lower(it_ta, it_val, s, e, ta, val)
        while p < e and it_ta[p] == ta:
            nt = _touch(it_slot[p], it_w[p], acc, s_stamp, epoch, touched, nt)
            p += 1
    elif family == 2:  # operand <= value
        p = _lower_ta(it_ta, s, e, ta)
        while p < e and it_ta[p] == ta and it_val[p] <= val:
            nt = _touch(it_slot[p], it_w[p], acc, s_stamp, epoch, touched, nt)
            p += 1
    else:  # presence
        p = _lower_ta(it_ta, s, e, ta)
        while p < e and it_ta[p] == ta:
            nt = _touch(it_slot[p], it_w[p], acc, s_stamp, epoch, touched, nt)
            p += 1
    return nt


@numba.njit(cache=True, nogil=True, inline="always")
def _sweep(s, e, family, ev_pos, ev_val, ev_soff, ev_spid, it_ta, it_val, it_slot, it_w,
           acc, s_stamp, epoch, touched, nt):
    """Walk a whole (short) list ``[s, e)`` and fire the items whose event value satisfies them."""
    n_ta = len(ev_pos)
    for p in range(s, e):
        ta = it_ta[p]
        if ta >= n_ta:
            continue
        j = ev_pos[ta]
        if j < 0:
            continue
        v = ev_val[j]
        o = it_val[p]
        if family == 0:
            fire = v == o
        elif family == 1:
            fire = v <= o
        elif family == 2:
            fire = v >= o
        elif family == 3:
            fire = True
        else:
            fire = False
            for q in range(ev_soff[j], ev_soff[j + 1]):
                if ev_spid[q] == o:
                    fire = True
                    break
        if fire:
            nt = _touch(it_slot[p], it_w[p], acc, s_stamp, epoch, touched, nt)
    return nt


@numba.njit(cache=True, nogil=True)
def match_batch(ev_off, ev_attr, ev_kind, ev_val, ev_vbits, ev_soff, ev_spid, ev_sbits,
                pivot_slot, list_of, n_families, segments, width, value_signed, sweep_factor,
                l_start, l_len, l_sig, seg_off, s_sig, it_ta, it_val, it_slot, it_w,
                s_need, s_entry, e_nslots, e_key,
                acc, s_stamp, e_rem, e_stamp, epoch, ev_pos, touched, touched_e, out_keys):
    """Match a batch (Algorithm 2).

    For each pivot attribute of an event, each of its predicate lists is searched: the
    list's signature, then for each event value the segment of its attribute, that
    segment's signature, and a range scan of the segment; a list no longer than
    ``sweep_factor`` times the event size is instead walked once, looking each item's
    attribute up in the event (cheaper than one probe per event value).  Fired items
    add their weight to clause slots; a slot holds when it reaches ``s_need`` (DNF:
    the conjunction's size; CNF: 1) and an entry matches when all its slots hold.

    ``ev_val`` holds numbers, booleans as 1/0 and string codes; ``ev_soff``/``ev_spid``
    list the satisfied string-predicate ids of each string value; ``ev_pos`` is a
    scratch array over typed attributes filled with -1.  Returns ``(offsets, keys,
    epoch)``; keys are sorted and distinct per event.
    """
    n = len(ev_off) - 1
    offsets = np.zeros(n + 1, dtype=np.int64)
    n_out = 0
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
                                it_slot, it_w, acc, s_stamp, epoch, touched, nt)
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
                                        acc, s_stamp, epoch, touched, nt)
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
                                ev_val[j], it_ta, it_val, it_slot, it_w, acc, s_stamp, epoch, touched, nt)
        for j in range(s, e):
            ta = ev_attr[j] * 3 + ev_kind[j]
            if ta < n_ta:
                ev_pos[ta] = -1
        ne = 0
        for t in range(nt):
            c = touched[t]
            if acc[c] >= s_need[c]:
                en = s_entry[c]
                if e_stamp[en] != epoch:
                    e_stamp[en] = epoch
                    e_rem[en] = e_nslots[en]
                    touched_e[ne] = en
                    ne += 1
                e_rem[en] -= 1
        first = n_out
        for t in range(ne):
            en = touched_e[t]
            if e_rem[en] == 0:
                out_keys, n_out = _push(out_keys, n_out, e_key[en])
        n_out = _sort_unique(out_keys, first, n_out)
        offsets[i + 1] = n_out
    return offsets, out_keys, epoch


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
        n_out = _sort_unique(out_keys, first, n_out)
        offsets[i + 1] = n_out
    return offsets, out_keys, epoch
