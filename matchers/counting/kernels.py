"""Numba kernels of the counting matcher (Fabret et al., Section 5)."""

from __future__ import annotations

import numba
import numpy as np


SIZE_BITS = 16
SIZE_MASK = (1 << SIZE_BITS) - 1
MAX_SIZE = SIZE_MASK
"""Largest conjunction the packed slot layout holds."""


@numba.njit(cache=True, nogil=True, inline="always")
def _visit(slots, slot, s, key_seen, out_keys, k):
    """Count one satisfied predicate of ``slot``; emit its key when the count completes."""
    state = slots[slot, 0]
    if (state >> SIZE_BITS) != s:
        state = s << SIZE_BITS
    state += 1
    slots[slot, 0] = state
    info = slots[slot, 1]
    if (state & SIZE_MASK) == (info & SIZE_MASK):
        key = info >> SIZE_BITS
        if key_seen[key] != s:
            key_seen[key] = s
            if k == len(out_keys):
                grown = np.empty(2 * len(out_keys) + 1024, dtype=out_keys.dtype)
                grown[:k] = out_keys[:k]
                out_keys = grown
            out_keys[k] = key
            k += 1
    return out_keys, k


@numba.njit(cache=True, nogil=True)
def count_matches(sat_off, sat_pid, main_off, main_slot, pend_off, pend_slot,
                  slots, key_seen, stamp, out_off, out_keys, base):
    """Count satisfied predicates per conjunction; emit each event's matched keys.

    ``slots[i] = (state, info)`` packs, for conjunction slot ``i``, the event stamp and
    count (``stamp << 16 | count``) next to its key and size (``key << 16 | size``), so
    that one cache line serves a visit.  A count is stale, hence zero, unless its stamp
    is the event's.  Dead slots have size 0 and never match.  Every satisfied pid
    visits its slots in the main and the pending CSR; a key is emitted once per event,
    sorted within the event.  Returns the (possibly regrown) ``out_keys`` and the
    number of keys written from ``base`` on.
    """
    k = base
    n_main = len(main_off) - 1
    n_pend = len(pend_off) - 1
    for e in range(len(sat_off) - 1):
        stamp[0] += 1
        s = stamp[0]
        start = k
        for i in range(sat_off[e], sat_off[e + 1]):
            pid = sat_pid[i]
            if pid < n_main:
                for j in range(main_off[pid], main_off[pid + 1]):
                    out_keys, k = _visit(slots, main_slot[j], s, key_seen, out_keys, k)
            if pid < n_pend:
                for j in range(pend_off[pid], pend_off[pid + 1]):
                    out_keys, k = _visit(slots, pend_slot[j], s, key_seen, out_keys, k)
        out_keys[start:k].sort()
        out_off[e + 1] = k
    return out_keys, k


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


def csr_by_key(n_keys: int, keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR ``(offsets int64[n_keys+1], values sorted by key)`` (stable)."""
    order = np.argsort(keys, kind="stable")
    offsets = np.zeros(n_keys + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n_keys), out=offsets[1:])
    return offsets, values[order]
