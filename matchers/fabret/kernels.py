"""Numba kernels of the Fabret et al. two-phase matcher.

Layout (owned by :mod:`matchers.fabret.clusters`): every subscription cluster is one
slab of a flat ``int32`` pool.  A cluster of size ``n`` (predicates left to check)
and capacity ``cap`` holds ``n + 1`` columns of ``cap`` slots each, starting at
``c_start``: column ``i < n`` holds the predicate ids (bit-vector references) of the
``i``-th predicate of each row, column ``n`` the subscription line (entry ids).  Rows
``0 .. c_len - 1`` are live.  Columns are the paper's "predicates array", stored
column-wise so that a failed first test skips the later columns (early exit).

Access entries (the access predicates): a single predicate id reaches its access
entry through ``pid_access``; a conjunction of equality predicates (one per attribute
of a multi-attribute hash table's schema) through one open-addressing hash over
``(table, pids)``, whose slots hold access ids (``EMPTY``/``TOMBSTONE`` otherwise).
An access entry lists its clusters (one per size) through ``a_first``/``c_next``.
"""

from __future__ import annotations

import numba
import numpy as np

EMPTY = -1
TOMBSTONE = -2
MAX_SCHEMA = 8
"""Most attributes in a multi-attribute hash table's schema (width of ``a_key``)."""


@numba.njit(cache=True, nogil=True, inline="always")
def key_hash(table, key, k):
    """Hash of a table id and the first ``k`` predicate ids of ``key``."""
    h = np.int64(table) * np.int64(0x27D4EB2F165667C5) + np.int64(k)
    for i in range(k):
        h = (h ^ np.int64(key[i])) * np.int64(0x100000001B3)
        h ^= h >> 31
    return h


@numba.njit(cache=True, nogil=True)
def hash_find(slots, a_table, a_key, table, key, k):
    """Access id stored for ``(table, key[:k])``, or -1."""
    mask = len(slots) - 1
    s = key_hash(table, key, k) & mask
    while True:
        a = slots[s]
        if a == EMPTY:
            return -1
        if a >= 0 and a_table[a] == table:
            same = True
            for i in range(k):
                if a_key[a, i] != key[i]:
                    same = False
                    break
            if same:
                return a
        s = (s + 1) & mask


@numba.njit(cache=True, nogil=True)
def hash_insert(slots, a_table, a_key, t_k, accesses):
    """Insert access ids (not yet present) into the hash; returns how many tombstones were reused."""
    mask = len(slots) - 1
    reused = 0
    for a in accesses:
        t = a_table[a]
        k = t_k[t]
        s = key_hash(t, a_key[a], k) & mask
        while slots[s] >= 0:
            s = (s + 1) & mask
        if slots[s] == TOMBSTONE:
            reused += 1
        slots[s] = a
    return reused


@numba.njit(cache=True, nogil=True)
def hash_delete(slots, a_table, a_key, t_k, accesses):
    """Replace the slots of access ids by tombstones; returns how many were found."""
    mask = len(slots) - 1
    found = 0
    for a in accesses:
        t = a_table[a]
        k = t_k[t]
        s = key_hash(t, a_key[a], k) & mask
        while slots[s] != EMPTY:
            if slots[s] == a:
                slots[s] = TOMBSTONE
                found += 1
                break
            s = (s + 1) & mask
    return found


@numba.njit(cache=True, nogil=True)
def relocate(pool, c_start, c_cap, c_len, c_size, clusters, new_caps, top):
    """Move clusters to new slabs of capacity ``new_caps`` at ``top``; returns the new top.

    The pool must already hold ``top + sum((size + 1) * new_cap)`` slots.
    """
    for i in range(len(clusters)):
        c = clusters[i]
        n = c_size[c]
        old, cap, ln, ncap = c_start[c], c_cap[c], c_len[c], new_caps[i]
        for col in range(n + 1):
            src = old + col * cap
            dst = top + col * ncap
            for r in range(ln):
                pool[dst + r] = pool[src + r]
        c_start[c] = top
        c_cap[c] = ncap
        top += (n + 1) * ncap
    return top


@numba.njit(cache=True, nogil=True)
def append_rows(pool, c_start, c_cap, c_len, c_size, row_cluster, row_off, row_pids, row_entry,
                e_cluster, e_row):
    """Append rows (capacity already ensured): row ``j`` goes to cluster ``row_cluster[j]``
    with predicate ids ``row_pids[row_off[j]:row_off[j+1]]`` and entry ``row_entry[j]``."""
    for j in range(len(row_cluster)):
        c = row_cluster[j]
        n, start, cap, r = c_size[c], c_start[c], c_cap[c], c_len[c]
        base = row_off[j]
        for col in range(n):
            pool[start + col * cap + r] = row_pids[base + col]
        e = row_entry[j]
        pool[start + n * cap + r] = e
        c_len[c] = r + 1
        e_cluster[e] = c
        e_row[e] = r


@numba.njit(cache=True, nogil=True)
def remove_rows(pool, c_start, c_cap, c_len, c_size, e_cluster, e_row, entries):
    """Swap-remove the rows of ``entries`` from their clusters (O(1) each)."""
    for e in entries:
        c = e_cluster[e]
        r = e_row[e]
        n, start, cap = c_size[c], c_start[c], c_cap[c]
        last = c_len[c] - 1
        if r != last:
            for col in range(n + 1):
                pool[start + col * cap + r] = pool[start + col * cap + last]
            e_row[pool[start + n * cap + r]] = r
        c_len[c] = last
        e_cluster[e] = -1
        e_row[e] = -1


@numba.njit(cache=True, nogil=True)
def compact(pool, new_pool, c_start, c_cap, c_len, c_size, clusters):
    """Copy live clusters into ``new_pool`` back to back (capacity trimmed to twice the
    length, at least 2); returns the new top."""
    top = 0
    for c in clusters:
        n, old, cap, ln = c_size[c], c_start[c], c_cap[c], c_len[c]
        ncap = max(2, min(cap, 2 * ln))
        for col in range(n + 1):
            src = old + col * cap
            dst = top + col * ncap
            for r in range(ln):
                new_pool[dst + r] = pool[src + r]
        c_start[c] = top
        c_cap[c] = ncap
        top += (n + 1) * ncap
    return top


@numba.njit(cache=True, nogil=True)
def _emit(out, pos, value):
    if pos == len(out):
        bigger = np.empty(2 * len(out), dtype=out.dtype)
        bigger[:pos] = out
        out = bigger
    out[pos] = value
    return out, pos + 1


@numba.njit(cache=True, nogil=True)
def check_cluster(pool, start, cap, ln, n, bits, out, pos):
    """The cluster-matching loop: append the entry of every row whose ``n`` referenced bits
    are all set.  Sizes 0-4 are unrolled; the tests short-circuit column by column."""
    line = start + n * cap
    if n == 0:
        for r in range(ln):
            out, pos = _emit(out, pos, pool[line + r])
    elif n == 1:
        for r in range(ln):
            if bits[pool[start + r]]:
                out, pos = _emit(out, pos, pool[line + r])
    elif n == 2:
        c1 = start + cap
        for r in range(ln):
            if bits[pool[start + r]] and bits[pool[c1 + r]]:
                out, pos = _emit(out, pos, pool[line + r])
    elif n == 3:
        c1 = start + cap
        c2 = c1 + cap
        for r in range(ln):
            if bits[pool[start + r]] and bits[pool[c1 + r]] and bits[pool[c2 + r]]:
                out, pos = _emit(out, pos, pool[line + r])
    elif n == 4:
        c1 = start + cap
        c2 = c1 + cap
        c3 = c2 + cap
        for r in range(ln):
            if (bits[pool[start + r]] and bits[pool[c1 + r]] and bits[pool[c2 + r]]
                    and bits[pool[c3 + r]]):
                out, pos = _emit(out, pos, pool[line + r])
    else:
        for r in range(ln):
            ok = True
            for col in range(n):
                if not bits[pool[start + col * cap + r]]:
                    ok = False
                    break
            if ok:
                out, pos = _emit(out, pos, pool[line + r])
    return out, pos


@numba.njit(cache=True, nogil=True)
def check_access(a, a_first, c_next, c_start, c_cap, c_len, c_size, pool, bits, out, pos):
    """Check every cluster of access entry ``a``; returns the output buffer and position."""
    c = a_first[a]
    checked = 0
    while c >= 0:
        out, pos = check_cluster(pool, c_start[c], c_cap[c], c_len[c], c_size[c], bits, out, pos)
        checked += c_len[c]
        c = c_next[c]
    return out, pos, checked


@numba.njit(cache=True, nogil=True)
def match_batch(ev_off, ev_pids, n_attrs, bits, pid_eq_attr, pid_access, a_first, c_next,
                c_start, c_cap, c_len, c_size, pool, e_key, tables, t_attrs, t_k, slots,
                a_table, a_key, pid_hits, attr_hits, t_hits):
    """Phase 2 of the matching algorithm (Fig. 2) over a batch of events.

    Parameters
    ----------
    ev_off, ev_pids : satisfied predicate ids of each event (CSR, from phase 1).
    n_attrs : number of attribute ids (size of the per-event equality slot array).
    bits : uint8 predicate bit vector, all zero on entry and on exit.
    pid_eq_attr : attribute id of each equality predicate id, -1 for other operators.
    pid_access : access entry of each single access predicate, -1 if none.
    tables : ids of the live multi-attribute hash tables; ``t_attrs``/``t_k`` their schemas.
    pid_hits, attr_hits, t_hits : event statistics, incremented here (float64).

    Returns
    -------
    (offsets int64[n+1], keys int32[k], checks int64): matched subscription keys of each
    event, sorted and distinct, and the number of rows checked.
    """
    n = len(ev_off) - 1
    out = np.empty(max(1024, 4 * n), dtype=np.int32)
    pos = 0
    offsets = np.zeros(n + 1, dtype=np.int64)
    eq = np.full(n_attrs, -1, dtype=np.int32)
    key = np.empty(MAX_SCHEMA, dtype=np.int32)
    checks = 0
    for i in range(n):
        lo, hi = ev_off[i], ev_off[i + 1]
        first = pos
        # predicate bit vector, equality predicate of each attribute
        for j in range(lo, hi):
            p = ev_pids[j]
            bits[p] = 1
            pid_hits[p] += 1.0
            a = pid_eq_attr[p]
            if a >= 0:
                eq[a] = p
                attr_hits[a] += 1.0
        # single access predicates
        for j in range(lo, hi):
            acc = pid_access[ev_pids[j]]
            if acc >= 0:
                out, pos, c = check_access(acc, a_first, c_next, c_start, c_cap, c_len, c_size,
                                           pool, bits, out, pos)
                checks += c
        # multi-attribute hash tables whose schema the event covers
        for t in tables:
            k = t_k[t]
            covered = True
            for x in range(k):
                p = eq[t_attrs[t, x]]
                if p < 0:
                    covered = False
                    break
                key[x] = p
            if not covered:
                continue
            t_hits[t] += 1.0
            acc = hash_find(slots, a_table, a_key, t, key, k)
            if acc >= 0:
                out, pos, c = check_access(acc, a_first, c_next, c_start, c_cap, c_len, c_size,
                                           pool, bits, out, pos)
                checks += c
        # clear
        for j in range(lo, hi):
            p = ev_pids[j]
            bits[p] = 0
            a = pid_eq_attr[p]
            if a >= 0:
                eq[a] = -1
        # entries -> keys, sorted and distinct
        for j in range(first, pos):
            out[j] = e_key[out[j]]
        if pos - first > 1:
            out[first:pos] = np.sort(out[first:pos])
            w = first + 1
            for j in range(first + 1, pos):
                if out[j] != out[w - 1]:
                    out[w] = out[j]
                    w += 1
            pos = w
        offsets[i + 1] = pos
    return offsets, out[:pos].copy(), checks


@numba.njit(cache=True, nogil=True)
def compact_segments(src, starts, lens, live, dst):
    """Copy the segments ``src[starts[e]:starts[e]+lens[e]]`` of the ``live`` ids back to back
    into ``dst``, updating ``starts``; returns the new top."""
    top = 0
    for e in live:
        s, n = starts[e], lens[e]
        for i in range(n):
            dst[top + i] = src[s + i]
        starts[e] = top
        top += n
    return top
