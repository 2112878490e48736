"""The VCI interval index over integer cells: every scheme of the paper, dynamic.

:class:`IntervalIndex` stores closed integer intervals ``[x, y]`` (``0 <= x <= y < R``)
under int32 ids and answers stabbing queries: which intervals cover cell ``j``.  It is
the structure of Sections 2-4 as is (the paper's simulations use integer values); real
values, open and half-infinite bounds and values outside the domain are mapped onto it
by :class:`matchers.vci.grid.GridIntervalIndex`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from matchers.vci import kernels
from matchers.vci.layout import BITMAP, CLIPPED, SCHEMES, distance_table, geometry, lengths
from matchers.vci.slabs import Slabs


def query_csr(cells, count_many: Callable, emit: Callable) -> tuple[np.ndarray, np.ndarray]:
    """The ids covering each of ``cells`` as CSR ``(offsets int64[n+1], ids int32)``, from an
    index's ``count_many(cells)`` (the sizes) and ``emit(cells, offsets, out)`` (the ids)."""
    cells = np.ascontiguousarray(cells, dtype=np.int64)
    counts = count_many(cells)
    offsets = np.zeros(len(cells) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    out = np.empty(int(offsets[-1]), dtype=np.int32)
    emit(cells, offsets, out)
    return offsets, out


class IntervalIndex:
    """A dynamic VCI index over cells ``0 .. R-1``.

    Parameters
    ----------
    R : number of cells of the domain.
    L : longest virtual construct interval (a power of two for the LCI schemes).
    scheme : one of :data:`matchers.vci.layout.SCHEMES` (``"LCI-BV(DT)"`` by default).
    """

    def __init__(self, R: int, L: int = 128, scheme: str = "LCI-BV(DT)"):
        self.scheme = scheme
        self.geom = geometry(scheme, R, L)
        g = self.geom
        self.lens = lengths(g)
        self.dt = distance_table(g)
        self.lists = Slabs(g.n_coords)
        rows = g.R if g.mode <= CLIPPED else 0
        self.bitmap = np.zeros((rows, g.words), dtype=np.uint64)
        self._bounds: dict[int, tuple[int, int]] = {}
        self._scratch_a = np.zeros(0, dtype=np.int64)
        self._scratch_t = np.zeros(0, dtype=np.int64)

    # -- updates ----------------------------------------------------------------------
    def insert(self, ids, xs, ys) -> None:
        """Insert intervals ``ids[i]: [xs[i], ys[i]]``.

        Raises ``ValueError`` for an id already present, a repeated id, an inverted
        interval or one outside ``[0, R)``; nothing is inserted then.
        """
        ids, xs, ys = self._arrays(ids, xs, ys)
        if len(ids) == 0:
            return
        if len(np.unique(ids)) != len(ids) or any(int(i) in self._bounds for i in ids):
            raise ValueError("interval ids must be new and distinct")
        if (xs > ys).any() or xs.min() < 0 or ys.max() >= self.geom.R:
            raise ValueError(f"intervals must satisfy 0 <= x <= y < R={self.geom.R}")
        self._ensure_scratch(int((ys - xs).max()) + 1)
        g = self.geom
        first = 0
        extra = 0
        while True:
            before = first
            first = kernels.vci_insert(g, self.lens, ids, xs, ys, first, self.lists.arrays, self.bitmap,
                                       self._scratch_a, self._scratch_t)
            if first == len(ids):
                break
            extra = 2 * extra + 1024 if first == before else 0
            self.lists.grow(extra)
        for i, x, y in zip(ids.tolist(), xs.tolist(), ys.tolist(), strict=True):
            self._bounds[i] = (x, y)

    def delete(self, ids) -> int:
        """Delete intervals by id (unknown ids are ignored); returns how many were deleted."""
        known = [int(i) for i in dict.fromkeys(np.asarray(ids, dtype=np.int64).tolist()) if int(i) in self._bounds]
        if not known:
            return 0
        bounds = [self._bounds.pop(i) for i in known]
        ids_a = np.asarray(known, dtype=np.int32)
        xs = np.asarray([b[0] for b in bounds], dtype=np.int64)
        ys = np.asarray([b[1] for b in bounds], dtype=np.int64)
        self._ensure_scratch(int((ys - xs).max()) + 1)
        g = self.geom
        missing = kernels.vci_delete(g, self.lens, ids_a, xs, ys, self.lists.arrays, self.bitmap,
                                     self._scratch_a, self._scratch_t)
        if missing:
            raise AssertionError(f"VCI index corrupted: {missing} pieces of deleted intervals were not listed")
        self.lists.maybe_compact()
        return len(known)

    def compact(self) -> None:
        """Pack the id lists tightly (memory figures then count stored ids, not spare room)."""
        self.lists.grow()

    # -- queries ------------------------------------------------------------------------
    def count_many(self, cells) -> np.ndarray:
        """int64[n]: how many intervals cover each cell (count only, no ids emitted)."""
        cells = np.ascontiguousarray(cells, dtype=np.int64)
        return kernels.vci_count(self.geom, self.lens, self.dt, self.lists.arrays, self.bitmap,
                                 kernels.DEBRUIJN_TABLE, cells)

    def query_many(self, cells) -> tuple[np.ndarray, np.ndarray]:
        """Ids covering each cell as CSR ``(offsets int64[n+1], ids int32)`` (unsorted within a cell)."""
        return query_csr(cells, self.count_many, self._emit)

    def _emit(self, cells, offsets, out) -> None:
        kernels.vci_emit(self.geom, self.lens, self.dt, self.lists.arrays, self.bitmap, kernels.DEBRUIJN_TABLE,
                         cells, offsets, out)

    def query(self, cell: int) -> np.ndarray:
        """Ids of the intervals covering ``cell`` (int32, unsorted)."""
        return self.query_many(np.array([cell], dtype=np.int64))[1]

    def count(self, cell: int) -> int:
        """How many intervals cover ``cell``."""
        return int(self.count_many(np.array([cell], dtype=np.int64))[0])

    # -- sizes ----------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._bounds)

    def __contains__(self, interval_id: object) -> bool:
        return interval_id in self._bounds

    def bounds(self, interval_id: int) -> tuple[int, int]:
        """``(x, y)`` of a stored interval."""
        return self._bounds[interval_id]

    def memory_bytes(self) -> int:
        """Bytes of the index structures: bitmaps, list headers, list pool, distance table.

        The per-id bounds kept for deletion are not counted (any index needs them).
        """
        return self.bitmap.nbytes + self.lists.memory_bytes() + self.dt.nbytes + self.lens.nbytes

    # -- helpers --------------------------------------------------------------------------
    @staticmethod
    def _arrays(ids, xs, ys) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        xs = np.ascontiguousarray(xs, dtype=np.int64)
        ys = np.ascontiguousarray(ys, dtype=np.int64)
        if not (ids.shape == xs.shape == ys.shape) or ids.ndim != 1:
            raise ValueError("ids, xs and ys must be 1-d and of one length")
        if len(ids) and (ids.min() < 0 or ids.max() > np.iinfo(np.int32).max):
            raise ValueError("interval ids must fit in int32 and be non-negative")
        return ids.astype(np.int32), xs, ys

    def _ensure_scratch(self, longest: int) -> None:
        need = longest // max(1, self.geom.L) + self.geom.K + 2
        if len(self._scratch_a) < need:
            self._scratch_a = np.zeros(need, dtype=np.int64)
            self._scratch_t = np.zeros(need, dtype=np.int64)


def bitmap_bytes(scheme: str, R: int, L: int) -> int:
    """Bytes of the bitmap vectors of a scheme (0 for the virtual ones), without building it."""
    g = geometry(scheme, R, L)
    return g.R * g.words * 8 if g.mode in (BITMAP, CLIPPED) else 0


__all__ = ["IntervalIndex", "SCHEMES", "bitmap_bytes"]
