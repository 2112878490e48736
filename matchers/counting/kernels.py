"""Numba kernels of the counting matcher (Fabret et al., Section 5).

Layout (see :mod:`matchers.counting`):

* ``left`` uint16 per conjunction slot: how many of its predicates the current event
  has not yet satisfied; between events, its size (0 once deleted: a deleted slot
  never reaches 0, since it is visited at most :data:`MAX_SIZE` times);
* ``slot_key`` int32 per slot: its key;
* a CSR from predicate id to int32 values: a value ``v >= 0`` is a counted slot; a
  conjunction of one predicate needs no counter and is stored as its key,
  ``v = -key - 2``; ``v = -1`` is a deleted entry;
* a slot's *deferred* predicates (``n_def`` of them, first in its segment of ``flat``) are
  not in the CSR: ``left`` counts its other predicates (its *triggers*), and once these are
  all satisfied the deferred ones are looked up in ``pid_seen`` (the event's stamp on each
  of its satisfied pids).
"""

from __future__ import annotations

import numba
import numpy as np

from matchers.arrays import enlarged
from matchers.keysort import sort_unique

MAX_SIZE = 2**16 - 1
"""Largest conjunction a uint16 slot counter holds."""
TOMBSTONE = -1


def encode_single(keys: np.ndarray) -> np.ndarray:
    """CSR values of one-predicate conjunctions of ``keys``."""
    return (-keys.astype(np.int64) - 2).astype(np.int32)


@numba.njit(cache=True, nogil=True)
def _deferred_hold(flat, start, n, pid_seen, s):
    """Whether event ``s`` satisfies the ``n`` pids of ``flat`` from ``start`` on."""
    for j in range(start, start + n):
        if pid_seen[flat[j]] != s:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def deferred_first(flat, starts, lengths, near):
    """Each slot's pids (``flat[starts[i]:starts[i] + lengths[i]]``) with its ``near`` ones
    (``near[pid]``: holds on nearly every event) first, in a new array, and how many of these
    each slot defers (uint16): all its near ones but the last when it has no other."""
    out = np.empty(lengths.sum(), dtype=flat.dtype)
    n_def = np.zeros(len(starts), dtype=np.uint16)
    k = 0
    for i in range(len(starts)):
        a, b = starts[i], starts[i] + lengths[i]
        d = 0
        for j in range(a, b):
            if near[flat[j]]:
                d += 1
        if d == lengths[i] and d > 0:
            d -= 1  # a trigger is needed: the last one
        n_def[i] = d
        lo, hi = k, k + d
        for j in range(a, b):
            if near[flat[j]] and lo < k + d:
                out[lo] = flat[j]
                lo += 1
            else:
                out[hi] = flat[j]
                hi += 1
        k += lengths[i]
    return out, n_def


@numba.njit(cache=True, nogil=True)
def count_matches(sat_off, sat_pid, conj, bits, stamp, visited, out_off, out_keys, base):
    """Count satisfied predicates per conjunction; emit each event's matched keys.

    Every satisfied pid walks its values in the main CSR (counted slots and
    one-predicate conjunctions) and its slots in the pending CSR.  A visit decrements
    the slot's ``left`` and records the slot; a slot matches when it reaches 0; the
    recorded visits are undone after the event (the counters are back to the sizes).  Every
    entry visited is written at the end of the event's keys and kept when it completes (no
    branch in the walk), and decoded after it: a slot with deferred predicates matches only
    if the event satisfies them too.  The keys go through ``bits`` (a zeroed bitmap of the
    keys, zeroed again on return), which drops a key's repeats (a key of several
    conjunctions) and sorts them (:func:`sort_unique`).  Returns the (possibly regrown)
    ``out_keys`` and ``visited`` and the number of keys written from ``base`` on.  The
    buffers are grown, if need be, once per event.  ``conj`` is a
    :class:`~matchers.counting.layout.Conjunctions`; ``stamp[0]`` numbers the events (in
    ``pid_seen``).
    """
    main_off, main_val, pend_off, pend_slot, left, slot_key, flat, slot_start, n_def, pid_seen = conj
    deferring = len(pid_seen) > 0
    k = base
    n_main = len(main_off) - 1
    n_pend = len(pend_off) - 1
    one = np.uint16(1)
    for e in range(len(sat_off) - 1):
        stamp[0] += 1
        s = stamp[0]
        start = k
        bound = 0
        for i in range(sat_off[e], sat_off[e + 1]):
            pid = sat_pid[i]
            if pid < n_main:
                bound += main_off[pid + 1] - main_off[pid]
            if pid < n_pend:
                bound += pend_off[pid + 1] - pend_off[pid]
            if deferring:
                pid_seen[pid] = s
        if bound > len(visited):
            visited = enlarged(visited, len(visited), bound + 1024)
        if k + bound + 1 > len(out_keys):
            out_keys = enlarged(out_keys, len(out_keys), k + bound + 1024)
        nv = 0
        nd = k  # the event's completed entries, out_keys[start:nd] (raw values), decoded below
        for i in range(sat_off[e], sat_off[e + 1]):
            pid = sat_pid[i]
            if pid < n_main:
                for j in range(main_off[pid], main_off[pid + 1]):
                    v = main_val[j]
                    out_keys[nd] = v
                    if v >= 0:
                        r = left[v] - one
                        left[v] = r
                        visited[nv] = v
                        nv += 1
                        nd += r == 0
                    else:
                        nd += v != TOMBSTONE
            if pid < n_pend:
                for j in range(pend_off[pid], pend_off[pid + 1]):
                    v = pend_slot[j]
                    r = left[v] - one
                    left[v] = r
                    visited[nv] = v
                    nv += 1
                    out_keys[nd] = v
                    nd += r == 0
        for t in range(nv):
            left[visited[t]] += one
        for t in range(start, nd):  # in place: the keys written never pass the entries read
            v = out_keys[t]
            if v >= 0:
                if deferring and not _deferred_hold(flat, slot_start[v], n_def[v], pid_seen, s):
                    continue
                out_keys[k] = slot_key[v]
            else:
                out_keys[k] = -v - 2
            k += 1
        k = sort_unique(out_keys, start, k, bits)
        out_off[e + 1] = k
    return out_keys, visited, k


@numba.njit(cache=True, nogil=True)
def gather_segments(flat, starts, lengths):
    """Concatenate ``flat[starts[i]:starts[i] + lengths[i]]`` for every i."""
    out = np.empty(lengths.sum(), dtype=flat.dtype)
    k = 0
    for i in range(len(starts)):
        for j in range(starts[i], starts[i] + lengths[i]):
            out[k] = flat[j]
            k += 1
    return out


@numba.njit(cache=True, nogil=True)
def tombstone(main_off, main_val, pid, value):
    """Mark the entry ``value`` of ``pid`` deleted; returns whether it was found."""
    for j in range(main_off[pid], main_off[pid + 1]):
        if main_val[j] == value:
            main_val[j] = TOMBSTONE
            return True
    return False


def csr_by_key(n_keys: int, keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR ``(offsets[n_keys+1], values sorted by key)`` (stable); int32 offsets when they fit."""
    order = np.argsort(keys, kind="stable")
    dtype = np.int32 if len(keys) < 2**31 else np.int64
    offsets = np.zeros(n_keys + 1, dtype=dtype)
    np.cumsum(np.bincount(keys, minlength=n_keys), out=offsets[1:])
    return offsets, values[order]
