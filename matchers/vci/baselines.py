"""Baselines of the VCI paper's Section 5, over the same integer cells as :class:`IntervalIndex`.

* :class:`DirectList` (the paper's Dlist): one id list per cell; O(1) search, storage
  proportional to the total length of the intervals.
* :class:`IntervalTree`: a centered interval tree over the cell domain.  The paper
  compares against IS-lists (Hanson's interval skip lists: O(log n) search, O(n log n)
  storage, rebalancing on update).  The centered tree is the stronger baseline to beat:
  each interval is stored once (two sorted entries, O(n) storage), a search walks one
  root-to-leaf path of ``log2(R)`` nodes and at each node takes a contiguous run of the
  node's sorted list (found by binary search), so counting costs O(log R log n) and
  emitting is a copy; updates need no rebalancing because the tree is balanced over the
  domain, not over the data.  An interval skip list does the same search by pointer
  chasing through O(log n) levels and stores markers O(log n) times per interval.

Both share :class:`IntervalIndex`'s interface: ``insert(ids, xs, ys)``, ``delete(ids)``,
``count_many(cells)``, ``query_many(cells)``, ``memory_bytes()``.
"""

from __future__ import annotations

import numpy as np

from matchers.vci import kernels
from matchers.vci.interval_index import query_csr
from matchers.vci.slabs import Slabs


class _CellIntervals:
    """Validation and the id -> bounds map shared by the baselines."""

    lists: Slabs

    def __init__(self, R: int):
        if R < 1:
            raise ValueError(f"the domain needs at least one cell, not R={R}")
        self.R = R
        self._bounds: dict[int, tuple[int, int]] = {}

    def _check(self, ids, xs, ys) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        xs = np.ascontiguousarray(xs, dtype=np.int64)
        ys = np.ascontiguousarray(ys, dtype=np.int64)
        if not (ids.shape == xs.shape == ys.shape) or ids.ndim != 1:
            raise ValueError("ids, xs and ys must be 1-d and of one length")
        if len(ids):
            if ids.min() < 0 or ids.max() > np.iinfo(np.int32).max:
                raise ValueError("interval ids must fit in int32 and be non-negative")
            if len(np.unique(ids)) != len(ids) or any(int(i) in self._bounds for i in ids):
                raise ValueError("interval ids must be new and distinct")
            if (xs > ys).any() or xs.min() < 0 or ys.max() >= self.R:
                raise ValueError(f"intervals must satisfy 0 <= x <= y < R={self.R}")
        return ids.astype(np.int32), xs, ys

    def _take(self, ids) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        known = [int(i) for i in dict.fromkeys(np.asarray(ids, dtype=np.int64).tolist()) if int(i) in self._bounds]
        bounds = [self._bounds.pop(i) for i in known]
        return (np.asarray(known, dtype=np.int32), np.asarray([b[0] for b in bounds], dtype=np.int64),
                np.asarray([b[1] for b in bounds], dtype=np.int64))

    def _remember(self, ids, xs, ys) -> None:
        for i, x, y in zip(ids.tolist(), xs.tolist(), ys.tolist(), strict=True):
            self._bounds[i] = (x, y)

    def __len__(self) -> int:
        return len(self._bounds)

    def compact(self) -> None:
        """Pack the lists tightly (memory figures then count stored entries, not spare room)."""
        self.lists.grow()

    def query_many(self, cells) -> tuple[np.ndarray, np.ndarray]:
        """Ids covering each cell as CSR ``(offsets, ids)``."""
        return query_csr(cells, self.count_many, self._emit)

    def count_many(self, cells) -> np.ndarray:
        raise NotImplementedError

    def _emit(self, cells, offsets, out) -> None:
        raise NotImplementedError


class DirectList(_CellIntervals):
    """Dlist: the ids of the intervals covering each cell, listed per cell."""

    def __init__(self, R: int):
        super().__init__(R)
        self.lists = Slabs(R)

    def insert(self, ids, xs, ys) -> None:
        ids, xs, ys = self._check(ids, xs, ys)
        first, extra = 0, 0
        while first < len(ids):
            before = first
            first = kernels.dlist_insert(ids, xs, ys, first, self.lists.start, self.lists.count,
                                         self.lists.cap, self.lists.pool, self.lists.top)
            if first < len(ids):
                extra = 2 * extra + int(ys[first] - xs[first] + 1) * 4 if first == before else 0
                self.lists.grow(extra)
        self._remember(ids, xs, ys)

    def delete(self, ids) -> int:
        ids, xs, ys = self._take(ids)
        if len(ids):
            missing = kernels.dlist_delete(ids, xs, ys, self.lists.start, self.lists.count,
                                           self.lists.cap, self.lists.pool, self.lists.top)
            if missing:
                raise AssertionError(f"Dlist corrupted: {missing} entries of deleted intervals missing")
            self.lists.maybe_compact()
        return len(ids)

    def count_many(self, cells) -> np.ndarray:
        cells = np.ascontiguousarray(cells, dtype=np.int64)
        inside = (cells >= 0) & (cells < self.R)
        out = np.zeros(len(cells), dtype=np.int64)
        out[inside] = self.lists.count[cells[inside]]
        return out

    def _emit(self, cells, offsets, out) -> None:
        kernels.dlist_emit(self.lists.start, self.lists.count, self.lists.pool, cells, offsets, out)

    def memory_bytes(self) -> int:
        return self.lists.memory_bytes()


class IntervalTree(_CellIntervals):
    """Centered interval tree over cells ``0 .. R-1`` (dynamic, balanced over the domain)."""

    def __init__(self, R: int):
        super().__init__(R)
        n_nodes = 1 << R.bit_length()  # node v of depth d is in [2**d, 2**(d+1)), d < bit_length(R)
        self.lists = Slabs(2 * n_nodes, keyed=True)

    def insert(self, ids, xs, ys) -> None:
        ids, xs, ys = self._check(ids, xs, ys)
        first, extra = 0, 0
        lists = self.lists
        while first < len(ids):
            before = first
            first = kernels.tree_insert(self.R, ids, xs, ys, first, lists.start, lists.count, lists.cap,
                                        lists.keys, lists.pool, lists.top)
            if first < len(ids):
                extra = 2 * extra + 1024 if first == before else 0
                lists.grow(extra)
        self._remember(ids, xs, ys)

    def delete(self, ids) -> int:
        ids, xs, ys = self._take(ids)
        if len(ids):
            lists = self.lists
            missing = kernels.tree_delete(self.R, ids, xs, ys, lists.start, lists.count, lists.cap,
                                          lists.keys, lists.pool, lists.top)
            if missing:
                raise AssertionError(f"interval tree corrupted: {missing} entries of deleted intervals missing")
            lists.maybe_compact()
        return len(ids)

    def count_many(self, cells) -> np.ndarray:
        cells = np.ascontiguousarray(cells, dtype=np.int64)
        lists = self.lists
        return kernels.tree_count(self.R, lists.start, lists.count, lists.keys, lists.pool, cells)

    def _emit(self, cells, offsets, out) -> None:
        lists = self.lists
        kernels.tree_emit(self.R, lists.start, lists.count, lists.keys, lists.pool, cells, offsets, out)

    def memory_bytes(self) -> int:
        """Node list headers plus the sorted (key, id) entries."""
        return self.lists.memory_bytes()
