"""Numba kernel of bitmark's output: the keys of a chunk's matching slots, per event, sorted."""

from __future__ import annotations

import numba
import numpy as np

from matchers.bitmark.kernels import _low_bit, _popcount


@numba.njit(cache=True, nogil=True)
def emit_keys(surv, hit, counts, key, n_keys, tile, ordered):
    """The keys of the slots set in each event's row of ``surv`` (``counts`` of them, in
    the tiles of words flagged in ``hit``), as CSR, sorted and distinct per event (a key may
    hold several slots).  Clears ``surv`` and ``hit`` for the next chunk.

    ``ordered``: the indexed slots' keys do not decrease with the slot (the wide mode's
    order), so they come out sorted in slot order, four per word without a branch
    (:func:`_emit_ordered`); an event whose keys then are not strictly increasing (a match
    in the tail, a key with several slots) is sorted afterwards.  Else an event with more
    matches than a bitmap of the ``n_keys`` keys has words sets them in that bitmap and
    reads them back in order (no sort); the others are sorted.
    """
    n, n_words = surv.shape
    words = (n_keys + 63) >> 6
    total = 0
    for e in range(n):
        total += counts[e]
    out = np.empty(total + 4, dtype=np.int32)  # (_emit_ordered writes up to 3 beyond its keys)
    offsets = np.zeros(n + 1, dtype=np.int64)
    seen = np.zeros(words, dtype=np.uint64)
    k = 0
    for e in range(n):
        row = surv[e]
        a = k
        if ordered:
            k = _emit_ordered(row, hit, e, key, tile, out, k)
            unsorted = False
            for i in range(a + 1, k):
                unsorted |= out[i] <= out[i - 1]
            if unsorted:
                k = _sort_distinct(out, a, k)
            offsets[e + 1] = k
            continue
        many = counts[e] > words
        for g in range(hit.shape[1]):
            if not hit[e, g]:
                continue
            hit[e, g] = False
            for w in range(g * tile, min(n_words, (g + 1) * tile)):
                m = row[w]
                if m:
                    row[w] = 0
                    while m:
                        x = key[w * 64 + _low_bit(m)]
                        m &= m - np.uint64(1)
                        if many:
                            seen[x >> 6] |= np.uint64(1) << np.uint64(x & 63)
                        else:
                            out[k] = x
                            k += 1
        if many:
            for w in range(words):
                m = seen[w]
                if m:
                    seen[w] = 0
                    while m:
                        out[k] = (w << 6) + _low_bit(m)
                        k += 1
                        m &= m - np.uint64(1)
        elif k > a:
            k = _sort_distinct(out, a, k)
        offsets[e + 1] = k
    return offsets, out[:k]


@numba.njit(cache=True, nogil=True, inline="always")
def _sort_distinct(out, a, b):
    """Sort ``out[a:b]`` and drop its repeats; returns the new end."""
    out[a:b].sort()
    last = -1
    k = a
    for i in range(a, b):
        x = out[i]
        if x != last:
            out[k] = x
            k += 1
            last = x
    return k


@numba.njit(cache=True, nogil=True, inline="always")
def _emit_ordered(row, hit, e, key, tile, out, k):
    """Write at ``out[k:]`` the keys of the slots set in ``row`` (event ``e``'s, in the tiles
    ``hit`` flags), in slot order, clearing both; returns the new end.  Four keys per word are
    written whether or not the word has them (a word's first bits are about all at wide
    intervals) and ``k`` moves by its count: no branch per word (the writes beyond land in
    the next word's place, or in ``out``'s spare 3)."""
    n_words = len(row)
    last = len(key) - 1
    high = np.uint64(1) << np.uint64(63)
    one = np.uint64(1)
    for g in range(hit.shape[1]):
        if not hit[e, g]:
            continue
        hit[e, g] = False
        for w in range(g * tile, min(n_words, (g + 1) * tile)):
            m = row[w]
            row[w] = 0
            base = w * 64
            c = _popcount(m)
            out[k] = key[min(base + _low_bit(m | high), last)]
            m &= m - one
            out[k + 1] = key[min(base + _low_bit(m | high), last)]
            m &= m - one
            out[k + 2] = key[min(base + _low_bit(m | high), last)]
            m &= m - one
            out[k + 3] = key[min(base + _low_bit(m | high), last)]
            m &= m - one
            i = k + 4
            while m:
                out[i] = key[base + _low_bit(m)]
                m &= m - one
                i += 1
            k += c
    return k
