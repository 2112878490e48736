"""Numba kernel of the brute-force matcher: AND within conjunctions, OR across them."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def match_conjunctions(sat, conj_offsets, conj_cols, conj_keys):
    """Keys of the conjunctions whose every predicate column is true, per event.

    Parameters
    ----------
    sat : bool[n, n_cols], ``sat[e, c]``: predicate column ``c`` holds on event ``e``.
    conj_offsets : int64[n_conj + 1], conjunction ``j`` owns ``conj_cols[conj_offsets[j]:conj_offsets[j+1]]``.
    conj_cols : int32[nnz], predicate columns of the conjunctions.
    conj_keys : int32[n_conj], subscription key of each conjunction, non-decreasing.

    Returns
    -------
    offsets : int64[n + 1], CSR offsets of the matched keys per event.
    keys : int32[total], matched keys, sorted and distinct within each event.
    """
    n = sat.shape[0]
    n_conj = conj_keys.shape[0]
    offsets = np.zeros(n + 1, dtype=np.int64)
    out = np.empty(max(16, n), dtype=np.int32)
    total = 0
    for e in range(n):
        last = -1
        for j in range(n_conj):
            key = conj_keys[j]
            if key == last:
                continue
            ok = True
            for t in range(conj_offsets[j], conj_offsets[j + 1]):
                if not sat[e, conj_cols[t]]:
                    ok = False
                    break
            if ok:
                if total == out.shape[0]:
                    grown = np.empty(2 * out.shape[0], dtype=np.int32)
                    grown[:total] = out[:total]
                    out = grown
                out[total] = key
                total += 1
                last = key
        offsets[e + 1] = total
    return offsets, out[:total].copy()
