"""Numba kernel of ``auto``'s events' summary."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def covered(attrs: np.ndarray, constrained: np.ndarray) -> int:
    """Entries of a batch whose attribute id is marked in ``constrained`` (ids past its end are not)."""
    n, limit = 0, len(constrained)
    for a in attrs:
        if 0 <= a < limit and constrained[a]:
            n += 1
    return n
