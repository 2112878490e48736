"""Growable lists sharing one pool (the arrays behind the kernels' slab lists)."""

from __future__ import annotations

import numpy as np

from matchers.vci import kernels
from matchers.vci.layout import SlabLists


class Slabs:
    """``n_lists`` growable lists of int32 values (and optionally int64 keys) in one pool.

    Parameters
    ----------
    n_lists : number of lists.
    keyed : whether each value carries an int64 key (sorted lists of the interval tree).
    """

    def __init__(self, n_lists: int, keyed: bool = False):
        self.start = np.zeros(n_lists, dtype=np.int32)  # the pool stays below 2**31 slots
        self.count = np.zeros(n_lists, dtype=np.int32)
        self.cap = np.zeros(n_lists, dtype=np.int32)
        self.top = np.zeros(2, dtype=np.int64)
        self.pool = np.zeros(1024, dtype=np.int32)
        self.keys = np.zeros(1024 if keyed else 0, dtype=np.int64)
        self.keyed = keyed

    def grow(self, extra: int = 0) -> None:
        """Compact the pool into one with room for as much again, and ``extra`` slots more."""
        live = int(self.top[0] - self.top[1])
        size = max(1024, 2 * live + 64 + extra)
        if size >= 1 << 31:
            size = (1 << 31) - 1
            if live + extra > size:
                raise MemoryError("an index list pool would exceed 2**31 entries")
        pool = np.zeros(size, dtype=np.int32)
        if self.keyed:
            keys = np.zeros(size, dtype=np.int64)
            kernels.slab_compact_keyed(self.start, self.count, self.cap, self.keys, self.pool, keys, pool,
                                       self.top)
            self.keys = keys
        else:
            kernels.slab_compact(self.start, self.count, self.cap, self.pool, pool, self.top)
        self.pool = pool

    def maybe_compact(self) -> None:
        """Compact when more than half of the used pool is garbage left by moves and removals."""
        if self.top[1] > 4096 and 2 * self.top[1] > self.top[0]:
            self.grow()

    @property
    def arrays(self) -> SlabLists:
        """The lists as the kernels take them."""
        return SlabLists(self.start, self.count, self.cap, self.pool, self.top)

    @property
    def entries(self) -> int:
        """Values stored in all lists."""
        return int(self.count.sum(dtype=np.int64))

    def memory_bytes(self) -> int:
        """Headers (start, count, capacity) plus the pool slots reserved by live lists."""
        used = int(self.top[0] - self.top[1])
        per_slot = 4 + (8 if self.keyed else 0)
        return self.start.nbytes + self.count.nbytes + self.cap.nbytes + used * per_slot
