"""Numba kernels of the counting matcher (Fabret et al., Section 5)."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def count_matches(sat_off, sat_pid, main_off, main_slot, pend_off, pend_slot,
                  conj_size, conj_key, counts, stamps, key_seen, stamp, out_off, out_keys, base):
    """Count satisfied predicates per conjunction; emit each event's matched keys.

    For every satisfied pid, every conjunction slot containing it (main and pending
    CSR) gets its count raised; a conjunction whose count reaches its size matches,
    and its key is emitted once per event (sorted within the event).  Counters are
    reset lazily: a slot's count is stale unless ``stamps[slot]`` is the event's
    stamp.  Dead slots have size 0 and never match.  Returns the (possibly regrown)
    ``out_keys`` and the number of keys written from ``base`` on.
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
            for level in range(2):
                if level == 0:
                    if pid >= n_main:
                        continue
                    lo, hi, slots = main_off[pid], main_off[pid + 1], main_slot
                else:
                    if pid >= n_pend:
                        continue
                    lo, hi, slots = pend_off[pid], pend_off[pid + 1], pend_slot
                for j in range(lo, hi):
                    slot = slots[j]
                    if stamps[slot] != s:
                        stamps[slot] = s
                        counts[slot] = 0
                    counts[slot] += 1
                    if counts[slot] == conj_size[slot]:
                        key = conj_key[slot]
                        if key_seen[key] != s:
                            key_seen[key] = s
                            if k == len(out_keys):
                                grown = np.empty(2 * len(out_keys) + 1024, dtype=out_keys.dtype)
                                grown[:k] = out_keys[:k]
                                out_keys = grown
                            out_keys[k] = key
                            k += 1
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
