"""Kernel merging the matches of an event's rows (see :func:`matchers.base.merge_rows`)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def merge_rows(rows, offsets, keys, capacity):
    """Per event, the distinct keys of its rows, sorted: ``(event offsets, keys)``.

    ``offsets``/``keys`` are the rows' matches (CSR, sorted within a row); event ``e`` owns
    rows ``rows[e]:rows[e+1]``; keys are below ``capacity``.
    """
    n = len(rows) - 1
    seen = np.full(capacity, -1, np.int64)
    out_offsets = np.zeros(n + 1, np.int64)
    out = np.empty(len(keys), keys.dtype)
    pos = 0
    for e in range(n):
        start = pos
        for j in range(offsets[rows[e]], offsets[rows[e + 1]]):
            k = keys[j]
            if seen[k] != e:
                seen[k] = e
                out[pos] = k
                pos += 1
        if rows[e + 1] - rows[e] > 1 and pos - start > 1:
            out[start:pos].sort()
        out_offsets[e + 1] = pos
    return out_offsets, out[:pos]
