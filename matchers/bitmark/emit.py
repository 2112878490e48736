"""Numba kernels of bitmark's output: the keys of a chunk's matching slots, per event, sorted."""

from __future__ import annotations

import numba
import numpy as np

from matchers.bitmark.kernels import _holds, _low_bit, _popcount


@numba.njit(cache=True, nogil=True)
def emit_keys(surv, hit, counts, key, n_keys, tile, ordered, out):
    """The keys of the slots set in each event's row of ``surv`` (``counts`` of them, in
    the tiles of words flagged in ``hit``), as CSR, sorted and distinct per event (a key may
    hold several slots).  Clears ``surv`` and ``hit`` for the next chunk.  The keys go to
    ``out`` (int32, at least ``counts.sum() + 4`` long: :func:`_emit_ordered` writes up to 3
    beyond its keys); returns the offsets and the keys written, a view of ``out``.

    ``ordered``: the indexed slots' keys do not decrease with the slot (the wide mode's
    order), so they come out sorted in slot order, four per word without a branch
    (:func:`_emit_ordered`); an event whose keys then are not strictly increasing (a match
    in the tail, a key with several slots) is sorted afterwards (not checked when every
    word's keys run on by one and the words' keys increase, see :func:`_word_starts`).  Else an event with more
    matches than a bitmap of the ``n_keys`` keys has words sets them in that bitmap and
    reads them back in order (no sort); the others are sorted.
    """
    n, n_words = surv.shape
    words = (n_keys + 63) >> 6
    offsets = np.zeros(n + 1, dtype=np.int64)
    seen = np.zeros(words, dtype=np.uint64)
    if ordered:
        start, increasing = _word_starts(key, n_words)
    else:
        start, increasing = np.zeros(0, dtype=np.int64), False
    k = 0
    for e in range(n):
        row = surv[e]
        a = k
        if ordered:
            k = _emit_ordered(row, hit, e, key, start, tile, out, k)
            unsorted = False
            if not increasing:
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


@numba.njit(cache=True, nogil=True)
def _word_starts(key, n_words):
    """Per word of slots, the key of its first slot when its slots' keys run on by one (slot
    ``64 w + i`` holds key ``start[w] + i``; a word past ``key``'s end counts as such), else -1;
    and whether every word is such and holds larger keys than the words before it (then the
    keys of a word's set bits, in slot order, increase across the words)."""
    n = len(key)
    start = np.full(n_words, -1, dtype=np.int64)
    increasing = True
    prev = -1
    for w in range(n_words):
        a = w * 64
        if a >= n:
            start[w] = prev + 1  # no slots: no bits (the branchless writes need some value)
            continue
        k0 = np.int64(key[a])
        ok = k0 >= 0
        for i in range(1, min(64, n - a)):
            ok &= np.int64(key[a + i]) == k0 + i
        if ok:
            start[w] = k0
            increasing &= k0 > prev
            prev = k0 + min(64, n - a) - 1
        else:
            increasing = False
    return start, increasing


@numba.njit(cache=True, nogil=True, inline="always")
def _emit_ordered(row, hit, e, key, start, tile, out, k):
    """Write at ``out[k:]`` the keys of the slots set in ``row`` (event ``e``'s, in the tiles
    ``hit`` flags), in slot order, clearing both; returns the new end (:func:`emit_words`)."""
    n_words = len(row)
    for g in range(hit.shape[1]):
        if not hit[e, g]:
            continue
        hit[e, g] = False
        w0, w1 = g * tile, min(n_words, (g + 1) * tile)
        k = emit_words(row[w0:w1], w0, key, start, out, k)
        row[w0:w1] = 0
    return k


@numba.njit(cache=True, nogil=True)
def emit_words(words, w0, key, start, out, k):
    """Write at ``out[k:]`` the keys of the slots set in ``words`` (the slot words ``w0``,
    ``w0 + 1``, ...), in slot order; returns the new end.  Four keys per word are written
    whether or not the word has them (a word's first bits are about all at wide intervals)
    and ``k`` moves by its count: no branch per word (the writes beyond land in the next
    word's place, or in ``out``'s spare 3).  A word whose keys run on by one (``start``,
    :func:`_word_starts`) writes its first key plus the bit's position, without reading
    ``key`` (4 MB at 1,000,000 slots, per event).  One call per run of words: a call per word
    (its arrays' reference counts) made the emission 7x slower."""
    last = len(key) - 1
    high = np.uint64(1) << np.uint64(63)
    one = np.uint64(1)
    for q in range(len(words)):
        m = words[q]
        w = w0 + q
        base = w * 64
        c = _popcount(m)
        s = start[w]
        if s >= 0:
            k = _word_positions(m, s, out, k)
            continue
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


@numba.njit(cache=True, nogil=True)
def grown(buf, used, need):
    """``buf`` if it holds ``need`` items, else a copy of its first ``used`` in one at least
    twice as long."""
    if len(buf) >= need:
        return buf
    more = np.empty(max(need, 2 * len(buf)), dtype=buf.dtype)
    more[:used] = buf[:used]
    return more


@numba.njit(cache=True, nogil=True)
def tail_keys(vals, sat_off, sat_pid, slots, n_main, n_slots):
    """The keys of the unindexed tail's matching slots (``n_main..n_slots-1``, each checked
    exactly) per event, as CSR ``(offsets, keys)``, in slot order."""
    n = vals.shape[0]
    off = np.zeros(n + 1, dtype=np.int64)
    keys = np.empty(16, dtype=np.int32)
    k = 0
    for e in range(n):
        for s in range(n_main, n_slots):
            if slots.key[s] >= 0 and _holds(slots, s, vals, e, sat_off, sat_pid):
                keys = grown(keys, k, k + 1)
                keys[k] = slots.key[s]
                k += 1
        off[e + 1] = k
    return off, keys[:k]


@numba.njit(cache=True, nogil=True)
def emit_positions(words, out, k):
    """Write at ``out[k:]`` the positions (``64 q + bit``) of the bits set in ``words``, in
    order; returns the new end.  Four per word are written whether or not the word has them (a
    word's first bits are about all at wide intervals) and ``k`` moves by its count: no branch
    per word (the writes beyond land in the next word's place, or in the 4 places after the
    end).  The wide mode's positions in a tile (:func:`~matchers.bitmark.wide.match_wide`): ``uint16``
    up to 1,024 words a tile, half the bytes of its keys, which :func:`gather_keys` makes."""
    for q in range(len(words)):
        k = _word_positions(words[q], q << 6, out, k)
    return k


@numba.njit(cache=True, nogil=True, inline="always")
def _word_positions(m, s, out, k):
    """Write at ``out[k:]`` ``s`` plus the position of each bit set in the word ``m``, in order;
    returns ``k`` moved by their count.  The first four are written whether or not ``m`` has
    them (no branch: the writes beyond are overwritten by the next word's)."""
    high = np.uint64(1) << np.uint64(63)
    one = np.uint64(1)
    c = _popcount(m)
    out[k] = s + _low_bit(m | high)
    m &= m - one
    out[k + 1] = s + _low_bit(m | high)
    m &= m - one
    out[k + 2] = s + _low_bit(m | high)
    m &= m - one
    out[k + 3] = s + _low_bit(m | high)
    m &= m - one
    i = k + 4
    while m:
        out[i] = s + _low_bit(m)
        m &= m - one
        i += 1
    return k + c


@numba.njit(cache=True, nogil=True)
def tile_bases(key, tile_slots):
    """Per tile of ``tile_slots`` slots, ``b`` when each of its slots ``t0 + i`` not deleted holds
    key ``b + i`` (then a position's key is ``b`` plus the position; a tile of deleted slots only
    has some ``b``), else -1; and whether every tile is such and holds larger keys than the tiles
    before it (then a tile's matching keys, in slot order, increase across the tiles)."""
    n = len(key)
    tiles = max(1, (n + tile_slots - 1) // tile_slots)
    base = np.full(tiles, -1, dtype=np.int64)
    increasing = True
    prev = np.int64(-1)
    for g in range(tiles):
        t0 = g * tile_slots
        b = np.int64(-1)
        first = np.int64(-1)
        last = np.int64(-1)
        ok = True
        for s in range(t0, min(n, t0 + tile_slots)):
            x = np.int64(key[s])
            if x < 0:
                continue
            if first < 0:
                first = x
                b = x - (s - t0)
            ok &= x == b + (s - t0)
            last = x
        if first < 0:  # deleted slots only: nothing to find
            base[g] = 0
        elif ok and b >= 0:
            base[g] = b
            increasing &= first > prev
            prev = last
        else:
            increasing = False
    return base, increasing


@numba.njit(cache=True, nogil=True, inline="always")
def _add_to(out, pos, b):
    """``out[:] = b + pos`` (vectorised)."""
    for i in range(len(out)):
        out[i] = b + np.int32(pos[i])


@numba.njit(cache=True, nogil=True)
def gather_keys(buf, seg, n, base, key, tile_slots, tail_off, tail_key, increasing, out):
    """The keys of a chunk's ``n`` events as CSR from the tile-major positions of
    :func:`~matchers.bitmark.wide.match_wide` (event ``e``'s in tile ``g`` at
    ``buf[seg[g * n + e]:seg[g * n + e + 1]]``, in slot order, a slot's position in its tile of
    ``tile_slots``) and the tail's (``tail_off``, ``tail_key``: :func:`tail_keys`): per event its
    tiles' keys in turn (``base[g]`` plus the position, :func:`tile_bases`, else read from
    ``key``), then its tail's, sorted and made distinct when not strictly increasing (not checked
    when ``increasing`` and the event has no tail match).  The keys go to ``out`` (int32, at
    least ``seg[-1] + len(tail_key)`` long); returns the offsets and a view of ``out``."""
    tiles = (len(seg) - 1) // n if n else 0
    offsets = np.zeros(n + 1, dtype=np.int64)
    k = 0
    for e in range(n):
        a = k
        for g in range(tiles):
            s0, s1 = seg[g * n + e], seg[g * n + e + 1]
            b = np.int32(base[g])
            if b >= 0:
                _add_to(out[k:k + s1 - s0], buf[s0:s1], b)
            else:
                t0 = g * tile_slots
                for i in range(s1 - s0):
                    out[k + i] = key[t0 + np.int64(buf[s0 + i])]
            k += s1 - s0
        t0, t1 = tail_off[e], tail_off[e + 1]
        out[k:k + t1 - t0] = tail_key[t0:t1]
        k += t1 - t0
        if not increasing or t1 > t0:
            unsorted = False
            for i in range(a + 1, k):
                unsorted |= out[i] <= out[i - 1]
            if unsorted:
                k = _sort_distinct(out, a, k)
        offsets[e + 1] = k
    return offsets, out[:k]
