"""Numba kernels of AMKH: hashing coordinates, probing candidate coordinates, the final check."""

from __future__ import annotations

import numba
import numpy as np

from matchers.arrays import enlarged
from matchers.vci.kernels import slab_append, slab_remove, slab_room

MAX_HASHED = 62
"""Most hashed attributes (a schema is a bit mask in an int64)."""


@numba.njit(cache=True, nogil=True)
def bucket_of(h, shift):
    """Bucket of a coordinate hash: multiplicative mixing, top bits (``M = 2**(64 - shift)``)."""
    x = np.uint64(h) * np.uint64(0x9E3779B97F4A7C15)
    x ^= x >> np.uint64(29)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    return np.int64(x >> np.uint64(shift))


@numba.njit(cache=True, nogil=True)
def buckets_of(hashes, shift):
    out = np.empty(hashes.shape[0], dtype=np.int64)
    for i in range(hashes.shape[0]):
        out[i] = bucket_of(hashes[i], shift)
    return out


@numba.njit(cache=True, nogil=True)
def match_events(sat, preds, conj, buckets, schemas, n_hashed, marks, out_off, out_keys, k, stats):
    """Match events from their satisfied predicates; returns ``(out_keys, k)``.

    For each event: the hash contributions ``h_i(C_i)`` of the satisfied clauses of
    every hashed attribute (distinct values), then for every subscription schema (a mask
    of hashed attributes) every candidate coordinate (one contribution per attribute of
    the schema) is hashed and its bucket's conjunctions are examined: a conjunction
    matches when all its predicates are satisfied.  ``stats`` accumulates
    ``[candidate coordinates, conjunctions examined, of which unmatched]``.  ``sat``,
    ``preds``, ``conj``, ``buckets`` and ``marks`` are :mod:`matchers.amkh.layout` tuples.
    """
    sat_off, sat_pid = sat
    pid_attr, pid_hash = preds.attr, preds.hash
    slot_key, slot_size, slot_pids, slot_hash = conj
    b_start, b_count, b_pool, shift = buckets
    pid_mark, key_mark, stamp = marks
    n_events = sat_off.shape[0] - 1
    n_attr = n_hashed
    cand = np.zeros((max(n_attr, 1), 8), dtype=np.int64)
    n_cand = np.zeros(max(n_attr, 1), dtype=np.int64)
    idx = np.zeros(max(n_attr, 1), dtype=np.int64)
    attrs_of = np.zeros(max(n_attr, 1), dtype=np.int64)
    for e in range(n_events):
        stamp[0] += 1
        st = stamp[0]
        for a in range(n_attr):
            n_cand[a] = 0
        for i in range(sat_off[e], sat_off[e + 1]):
            p = sat_pid[i]
            pid_mark[p] = st
            a = pid_attr[p]
            if a >= 0:
                h = pid_hash[p]
                seen = False
                for c in range(n_cand[a]):
                    if cand[a, c] == h:
                        seen = True
                        break
                if not seen:
                    if n_cand[a] == cand.shape[1]:
                        grown = np.zeros((cand.shape[0], 2 * cand.shape[1]), dtype=np.int64)
                        grown[:, :cand.shape[1]] = cand
                        cand = grown
                    cand[a, n_cand[a]] = h
                    n_cand[a] += 1
        for s in range(schemas.shape[0]):
            mask = schemas[s]
            m = 0
            ok = True
            for a in range(n_attr):
                if (mask >> a) & 1:
                    if n_cand[a] == 0:
                        ok = False
                        break
                    attrs_of[m] = a
                    idx[m] = 0
                    m += 1
            if not ok:
                continue
            while True:
                h = np.int64(0)
                for q in range(m):
                    h += cand[attrs_of[q], idx[q]]
                stats[0] += 1
                b = bucket_of(h, shift)
                start = b_start[b]
                for j in range(b_count[b]):
                    slot = b_pool[start + j]
                    stats[1] += 1
                    if slot_hash[slot] != h:  # another coordinate in this collision list
                        stats[2] += 1
                        continue
                    size = slot_size[slot]
                    good = True
                    for t in range(size):
                        if pid_mark[slot_pids[slot, t]] != st:
                            good = False
                            break
                    if not good:
                        stats[2] += 1
                        stats[3] += 1
                        continue
                    key = slot_key[slot]
                    if key_mark[key] != st:
                        key_mark[key] = st
                        if k == out_keys.shape[0]:
                            out_keys = enlarged(out_keys, k, 2 * k)
                        out_keys[k] = key
                        k += 1
                # next candidate coordinate (mixed-radix counter)
                q = 0
                while q < m:
                    idx[q] += 1
                    if idx[q] < n_cand[attrs_of[q]]:
                        break
                    idx[q] = 0
                    q += 1
                if q == m:
                    break
        # keys of this event, sorted
        start_k = out_off[e]
        out_keys[start_k:k] = np.sort(out_keys[start_k:k])
        out_off[e + 1] = k
    return out_keys, k


@numba.njit(cache=True, nogil=True)
def coordinates(slots, conj, preds, n_hashed, hashes, schemas):
    """Coordinate hash ``sum h_i(C_i)`` and schema mask of each conjunction slot in ``slots``.

    On each hashed attribute the coordinate is one clause of the conjunction on it, an
    equality clause when there is one; the other clauses are left to the final check.
    """
    slot_pids, slot_size = conj.pids, conj.size
    pid_attr, pid_eq, pid_hash = preds
    chosen = np.full(max(n_hashed, 1), -1, dtype=np.int64)
    touched = np.zeros(max(n_hashed, 1), dtype=np.int64)
    for i in range(slots.shape[0]):
        slot = slots[i]
        n_touched = 0
        for t in range(slot_size[slot]):
            p = slot_pids[slot, t]
            a = pid_attr[p]
            if a < 0:
                continue
            c = chosen[a]
            if c < 0:
                chosen[a] = p
                touched[n_touched] = a
                n_touched += 1
            elif pid_eq[p] and not pid_eq[c]:
                chosen[a] = p
        h = np.int64(0)
        mask = np.int64(0)
        for q in range(n_touched):
            a = touched[q]
            h += pid_hash[chosen[a]]
            mask |= np.int64(1) << a
            chosen[a] = -1
        hashes[i] = h
        schemas[i] = mask


@numba.njit(cache=True, nogil=True)
def bucket_insert(slots, buckets, first, start, count, cap, pool, top):
    """Append ``slots[i]`` to the collision list of ``buckets[i]`` from ``first`` on.

    Returns ``len(slots)``, or where it stopped because the pool is full.
    """
    for i in range(first, slots.shape[0]):
        if top[0] + slab_room(count, cap, buckets[i]) > pool.shape[0]:
            return i
        slab_append(start, count, cap, pool, top, buckets[i], slots[i])
    return slots.shape[0]


@numba.njit(cache=True, nogil=True)
def bucket_remove(slots, buckets, start, count, cap, pool, top):
    """Remove ``slots[i]`` from the list of ``buckets[i]``; returns how many were missing."""
    missing = 0
    for i in range(slots.shape[0]):
        if not slab_remove(start, count, cap, pool, top, buckets[i], slots[i]):
            missing += 1
    return missing
