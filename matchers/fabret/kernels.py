"""Numba kernels of the Fabret et al. two-phase matcher.

Layout (owned by :mod:`matchers.fabret.clusters`): every subscription cluster is one
slab of a flat ``int32`` pool.  A cluster of size ``n`` (predicates left to check)
and capacity ``cap`` holds ``n + 1`` columns of ``cap`` slots each, starting at
``start``: column ``i < n`` holds the predicate ids (bit-vector references) of the
``i``-th predicate of each row, column ``n`` the subscription line (entry ids).  Rows
``0 .. len - 1`` are live.  Columns are the paper's "predicates array", stored
column-wise so that a failed first test skips the later columns (early exit).  The
metadata of cluster ``c`` is one row ``cl[c] = (start, cap, len, size, next)`` (one
cache line to read).

Access entries (the access predicates): a single predicate id reaches its access
entry through ``pid_access``; a conjunction of equality predicates (one per attribute
of a multi-attribute hash table's schema) through one open-addressing hash over
``(table, pids)``, whose slots hold access ids (``EMPTY``/``TOMBSTONE`` otherwise).
Access entry ``a`` is one row ``acc[a] = (first cluster, table, key pids...)``: the
probe's verification and the first cluster come from the same cache line, and the
clusters of an entry (one per size) are chained through ``next``.
"""

from __future__ import annotations

import numba
import numpy as np

EMPTY = -1
TOMBSTONE = -2
MAX_SCHEMA = 8
"""Most attributes in a multi-attribute hash table's schema."""
START, CAP, LEN, SIZE, NEXT = 0, 1, 2, 3, 4
"""Columns of the cluster metadata ``cl``."""
FIRST, TABLE, KEY = 0, 1, 2
"""Columns of the access entries ``acc`` (``KEY`` is the first of ``MAX_SCHEMA`` key columns)."""


@numba.njit(cache=True, nogil=True)
def key_hash(table, key, k):
    """Hash of a table id and the first ``k`` predicate ids of ``key``."""
    h = np.int64(table) * np.int64(0x27D4EB2F165667C5) + np.int64(k)
    for i in range(k):
        h = (h ^ np.int64(key[i])) * np.int64(0x100000001B3)
        h ^= h >> 31
    return h


@numba.njit(cache=True, nogil=True)
def hash_insert(slots, acc, t_k, accesses):
    """Insert access ids (not yet present) into the hash; returns how many tombstones were reused."""
    mask = len(slots) - 1
    reused = 0
    for a in accesses:
        t = acc[a, TABLE]
        k = t_k[t]
        s = key_hash(t, acc[a, KEY:], k) & mask
        while slots[s] >= 0:
            s = (s + 1) & mask
        if slots[s] == TOMBSTONE:
            reused += 1
        slots[s] = a
    return reused


@numba.njit(cache=True, nogil=True)
def hash_delete(slots, acc, t_k, accesses):
    """Replace the slots of access ids by tombstones; returns how many were found."""
    mask = len(slots) - 1
    found = 0
    for a in accesses:
        t = acc[a, TABLE]
        k = t_k[t]
        s = key_hash(t, acc[a, KEY:], k) & mask
        while slots[s] != EMPTY:
            if slots[s] == a:
                slots[s] = TOMBSTONE
                found += 1
                break
            s = (s + 1) & mask
    return found


@numba.njit(cache=True, nogil=True)
def relocate(pool, cl, clusters, new_caps, top):
    """Move clusters to new slabs of capacity ``new_caps`` at ``top``; returns the new top.

    The pool must already hold ``top + sum((size + 1) * new_cap)`` slots.
    """
    for i in range(len(clusters)):
        c = clusters[i]
        n = cl[c, SIZE]
        old, cap, ln, ncap = cl[c, START], cl[c, CAP], cl[c, LEN], new_caps[i]
        for col in range(n + 1):
            src = old + col * cap
            dst = top + col * ncap
            for r in range(ln):
                pool[dst + r] = pool[src + r]
        cl[c, START] = top
        cl[c, CAP] = ncap
        top += (n + 1) * ncap
    return top


@numba.njit(cache=True, nogil=True)
def append_rows(pool, cl, row_cluster, row_off, row_pids, row_entry, e_cluster, e_row):
    """Append rows (capacity already ensured): row ``j`` goes to cluster ``row_cluster[j]``
    with predicate ids ``row_pids[row_off[j]:row_off[j+1]]`` and entry ``row_entry[j]``."""
    for j in range(len(row_cluster)):
        c = row_cluster[j]
        n, start, cap, r = cl[c, SIZE], cl[c, START], cl[c, CAP], cl[c, LEN]
        base = row_off[j]
        for col in range(n):
            pool[start + col * cap + r] = row_pids[base + col]
        e = row_entry[j]
        pool[start + n * cap + r] = e
        cl[c, LEN] = r + 1
        e_cluster[e] = c
        e_row[e] = r


@numba.njit(cache=True, nogil=True)
def remove_rows(pool, cl, e_cluster, e_row, entries):
    """Swap-remove the rows of ``entries`` from their clusters (O(1) each)."""
    for e in entries:
        c = e_cluster[e]
        r = e_row[e]
        n, start, cap = cl[c, SIZE], cl[c, START], cl[c, CAP]
        last = cl[c, LEN] - 1
        if r != last:
            for col in range(n + 1):
                pool[start + col * cap + r] = pool[start + col * cap + last]
            e_row[pool[start + n * cap + r]] = r
        cl[c, LEN] = last
        e_cluster[e] = -1
        e_row[e] = -1


@numba.njit(cache=True, nogil=True)
def compact(pool, new_pool, cl, clusters):
    """Copy live clusters into ``new_pool`` back to back (capacity trimmed to twice the
    length, at least 2); returns the new top."""
    top = 0
    for c in clusters:
        n, old, cap, ln = cl[c, SIZE], cl[c, START], cl[c, CAP], cl[c, LEN]
        ncap = max(2, min(cap, 2 * ln))
        for col in range(n + 1):
            src = old + col * cap
            dst = top + col * ncap
            for r in range(ln):
                new_pool[dst + r] = pool[src + r]
        cl[c, START] = top
        cl[c, CAP] = ncap
        top += (n + 1) * ncap
    return top


@numba.njit(cache=True, nogil=True)
def _room(out, need):
    """``out`` with at least ``need`` slots (doubling, contents kept)."""
    if need <= len(out):
        return out
    bigger = np.empty(max(need, 2 * len(out)), dtype=out.dtype)
    bigger[: len(out)] = out
    return bigger


@numba.njit(cache=True, nogil=True)
def check_cluster(pool, start, cap, ln, n, bits, out, pos):
    """The cluster-matching loop: append the entry of every row whose ``n`` referenced bits
    are all set.  Sizes 0-4 are unrolled; the tests short-circuit column by column.  Room
    for every row is made first, so the loops themselves only read, test and store."""
    out = _room(out, pos + ln)
    line = start + n * cap
    if n == 0:
        for r in range(ln):
            out[pos] = pool[line + r]
            pos += 1
    elif n == 1:
        for r in range(ln):
            if bits[pool[start + r]]:
                out[pos] = pool[line + r]
                pos += 1
    elif n == 2:
        c1 = start + cap
        for r in range(ln):
            if bits[pool[start + r]] and bits[pool[c1 + r]]:
                out[pos] = pool[line + r]
                pos += 1
    elif n == 3:
        c1 = start + cap
        c2 = c1 + cap
        for r in range(ln):
            if bits[pool[start + r]] and bits[pool[c1 + r]] and bits[pool[c2 + r]]:
                out[pos] = pool[line + r]
                pos += 1
    elif n == 4:
        c1 = start + cap
        c2 = c1 + cap
        c3 = c2 + cap
        for r in range(ln):
            if (bits[pool[start + r]] and bits[pool[c1 + r]] and bits[pool[c2 + r]]
                    and bits[pool[c3 + r]]):
                out[pos] = pool[line + r]
                pos += 1
    else:
        for r in range(ln):
            ok = True
            for col in range(n):
                if not bits[pool[start + col * cap + r]]:
                    ok = False
                    break
            if ok:
                out[pos] = pool[line + r]
                pos += 1
    return out, pos


@numba.njit(cache=True, nogil=True)
def match_batch(ev_off, ev_pids, n_attrs, bits, store, pid_hits, attr_hits, t_hits):
    """Phase 2 of the matching algorithm (Fig. 2) over a batch of events.

    Parameters
    ----------
    ev_off, ev_pids : satisfied predicate ids of each event (CSR, from phase 1).
    n_attrs : number of attribute ids (size of the per-event equality slot array).
    bits : uint8 predicate bit vector, all zero on entry and on exit.
    store : the store's arrays (:class:`~matchers.fabret.layout.Phase2`).
    pid_hits, attr_hits, t_hits : event statistics, incremented here (float64).

    Returns
    -------
    (offsets int64[n+1], keys int32[k], checks int64): matched subscription keys of each
    event, sorted and distinct, and the number of rows checked.
    """
    pid_eq_attr, pid_access, acc, cl, pool, e_key, tables, t_attrs, t_k, slots = store
    n = len(ev_off) - 1
    out = np.empty(max(1024, 4 * n), dtype=np.int32)
    pos = 0
    offsets = np.zeros(n + 1, dtype=np.int64)
    eq = np.full(n_attrs, -1, dtype=np.int32)
    n_tables = len(tables)
    keys = np.empty((max(n_tables, 1), MAX_SCHEMA), dtype=np.int32)
    probe_t = np.empty(max(n_tables, 1), dtype=np.int64)
    probe_s = np.empty(max(n_tables, 1), dtype=np.int64)
    probe_a = np.empty(max(n_tables, 1), dtype=np.int64)
    found = np.empty(64, dtype=np.int64)
    mask = len(slots) - 1
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
        # access entries reached: single access predicates, then one probe per table whose
        # schema the event covers.  The probes go in stages (hash every key, load every
        # slot, verify every entry) so that their cache misses overlap instead of chaining.
        n_found = 0
        for j in range(lo, hi):
            a = pid_access[ev_pids[j]]
            if a >= 0:
                if n_found == len(found):
                    found = np.concatenate((found, np.empty(len(found), dtype=np.int64)))
                found[n_found] = a
                n_found += 1
        n_probes = 0
        for t in tables:
            k = t_k[t]
            covered = True
            for x in range(k):
                p = eq[t_attrs[t, x]]
                if p < 0:
                    covered = False
                    break
                keys[n_probes, x] = p
            if not covered:
                continue
            t_hits[t] += 1.0
            probe_t[n_probes] = t
            probe_s[n_probes] = key_hash(t, keys[n_probes], k) & mask
            n_probes += 1
        for x in range(n_probes):
            probe_a[x] = slots[probe_s[x]]
        for x in range(n_probes):
            t = probe_t[x]
            k = t_k[t]
            s = probe_s[x]
            a = probe_a[x]
            while a != EMPTY:
                if a >= 0 and acc[a, TABLE] == t:
                    same = True
                    for y in range(k):
                        if acc[a, KEY + y] != keys[x, y]:
                            same = False
                            break
                    if same:
                        break
                s = (s + 1) & mask
                a = slots[s]
            if a >= 0:
                if n_found == len(found):
                    found = np.concatenate((found, np.empty(len(found), dtype=np.int64)))
                found[n_found] = a
                n_found += 1
        for x in range(n_found):
            found[x] = acc[found[x], FIRST]
        for x in range(n_found):
            c = found[x]
            while c >= 0:
                out, pos = check_cluster(pool, cl[c, START], cl[c, CAP], cl[c, LEN], cl[c, SIZE], bits, out, pos)
                checks += cl[c, LEN]
                c = cl[c, NEXT]
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
