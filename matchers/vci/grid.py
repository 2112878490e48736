"""Real-valued intervals on a VCI index: open, closed, half-infinite, zero-length.

The paper indexes integer intervals and notes (footnote 2) that other endpoints can be
expanded to integers with a final check.  :class:`GridIntervalIndex` does that exactly:

* values map to cells of a grid of step ``2**-exp`` (see :func:`kernels.grid_cells`):
  even cells are the grid points themselves, odd cells the open gaps between them, so
  an interval with endpoints on grid points (integers, for ``exp = 0``) covers whole
  cells, open or closed, and needs no check at all;
* the cells an interval covers fully go to one :class:`IntervalIndex`; a cell it covers
  only in part (an endpoint strictly inside a gap) goes to a second index of one-cell
  intervals whose candidates are checked against the real bounds;
* an interval reaching below or above the domain is also listed on that side; a value
  outside the domain is checked against that side's list only.

The grid (``exp``, origin, size) is chosen from the endpoints present: the coarsest
power-of-two step on which every endpoint is a grid point, unless that needs more than
``max_units`` grid points (or 4 per endpoint).  When many intervals later fall outside it, or the index
grows well past its size at the last layout, everything is re-laid on a new grid
(amortised; updates between layouts are incremental).
"""

from __future__ import annotations

import math

import numpy as np

from matchers.arrays import grown
from matchers.vci import kernels
from matchers.vci.interval_index import IntervalIndex
from matchers.vci.layout import LCI, SCHEMES, Bounds, CellHits, Sides

_EMPTY_I32 = np.zeros(0, dtype=np.int32)
_ONE_OFFSET = np.zeros(1, dtype=np.int64)


class GridIntervalIndex:
    """Dynamic stabbing index over real intervals, ids being small non-negative ints.

    Parameters
    ----------
    scheme, L : of the underlying :class:`IntervalIndex` (``L`` is lowered to fit a small grid).
    max_units : most grid points of a layout (the index has twice as many cells).
    """

    def __init__(self, scheme: str = "LCI-BV(DT)", L: int = 128, max_units: int = 1 << 14):
        if scheme not in SCHEMES:
            raise ValueError(f"unknown VCI scheme {scheme!r}; known: {', '.join(SCHEMES)}")
        self.scheme = scheme
        self.L = L
        self.max_units = max_units
        self.lo = np.zeros(0, dtype=np.float64)
        self.hi = np.zeros(0, dtype=np.float64)
        self.lo_closed = np.zeros(0, dtype=np.bool_)
        self.hi_closed = np.zeros(0, dtype=np.bool_)
        self.present = np.zeros(0, dtype=np.bool_)
        self._n = 0
        self._layout(np.zeros(0, dtype=np.float64))

    # -- layout -------------------------------------------------------------------------
    def _layout(self, endpoints: np.ndarray) -> None:
        """Choose the grid for these finite endpoints and start empty structures on it.

        The grid has at most ``max_units`` points, and at most 4 per endpoint (at least 64),
        so that an attribute with few intervals keeps a small index.
        """
        exp, base, units = choose_grid(endpoints, min(self.max_units, max(64, 4 * len(endpoints))))
        self.exp, self.base, self.units = exp, base, units
        self.scale = math.ldexp(1.0, exp)
        n_cells = 2 * units
        L = min(self.L, max(1, n_cells // 4))  # a small domain gets short VCIs
        if SCHEMES[self.scheme][0] == LCI:
            L = 1 << (L.bit_length() - 1)
        self._L_grid = L
        self.core = IntervalIndex(n_cells, L, self.scheme)
        self.edges: IntervalIndex | None = None  # created with the first partly covered cell
        self._sides: tuple[dict[int, int], dict[int, int]] = ({}, {})
        self._side_arrays = [np.zeros(16, dtype=np.int32), np.zeros(16, dtype=np.int32)]
        self._stray = 0
        self._size_at_layout = max(self._n, 1)

    def _relayout(self) -> None:
        ids = np.flatnonzero(self.present)
        ends = np.concatenate([self.lo[ids], self.hi[ids]])
        self._layout(ends[np.isfinite(ends)])
        if len(ids):
            self._place(ids)

    # -- updates ----------------------------------------------------------------------
    def insert(self, ids, lo, hi, lo_closed=True, hi_closed=True) -> None:
        """Insert intervals ``ids[i]`` from ``lo[i]`` to ``hi[i]`` (``-inf`` / ``inf`` allowed).

        ``lo_closed`` and ``hi_closed`` (scalars or arrays) say whether each end belongs to
        the interval.  An empty interval (``lo > hi``, or one point with an open end) is
        stored and never matches.  Raises ``ValueError`` for a NaN bound or an id present.
        """
        ids = np.atleast_1d(np.asarray(ids, dtype=np.int64))
        n = len(ids)
        lo = np.broadcast_to(np.asarray(lo, dtype=np.float64), (n,))
        hi = np.broadcast_to(np.asarray(hi, dtype=np.float64), (n,))
        loc = np.broadcast_to(np.asarray(lo_closed, dtype=np.bool_), (n,))
        hic = np.broadcast_to(np.asarray(hi_closed, dtype=np.bool_), (n,))
        if n == 0:
            return
        if np.isnan(lo).any() or np.isnan(hi).any():
            raise ValueError("interval bounds must not be NaN")
        if ids.min() < 0 or ids.max() >= 1 << 30:
            raise ValueError("interval ids must be in [0, 2**30)")
        if len(np.unique(ids)) != n:
            raise ValueError("interval ids must be distinct")
        self._grow(int(ids.max()) + 1)
        if self.present[ids].any():
            raise ValueError("interval ids must be new")
        self.lo[ids], self.hi[ids], self.lo_closed[ids], self.hi_closed[ids] = lo, hi, loc, hic
        self.present[ids] = True
        self._n += n
        if self._n > 4 * self._size_at_layout + 64:
            self._relayout()
            return
        self._place(ids)
        if self._stray > max(32, self._n // 8):
            self._relayout()

    def delete(self, ids) -> int:
        """Delete intervals by id (unknown ids ignored); returns how many were deleted."""
        ids = np.unique(np.atleast_1d(np.asarray(ids, dtype=np.int64)))
        ids = ids[(ids >= 0) & (ids < len(self.present))]
        ids = ids[self.present[ids]]
        if len(ids) == 0:
            return 0
        self.core.delete(ids)
        edge = np.concatenate([2 * ids, 2 * ids + 1])
        if self.edges is not None:
            self.edges.delete(edge)
        cells_lo, cells_hi = self._cells(ids)
        n_cells = 2 * self.units
        for k, i in enumerate(ids.tolist()):
            self._side_remove(0, i)
            self._side_remove(1, i)
            self._stray -= self._is_stray(i, cells_lo[k], cells_hi[k], n_cells)
        self.present[ids] = False
        self._n -= len(ids)
        return len(ids)

    # -- queries ------------------------------------------------------------------------
    def count_many(self, values) -> np.ndarray:
        """int64[n]: how many intervals contain each value (ids not emitted)."""
        values = np.ascontiguousarray(values, dtype=np.float64)
        cells = self.cells(values)
        counts = self.core.count_many(cells)
        if not self.edges and not self._sides[0] and not self._sides[1]:
            return counts
        extra = self._merge(values, cells, np.zeros(len(values) + 1, dtype=np.int64), _EMPTY_I32,
                            None, None, False)
        return counts + extra

    def query_many(self, values) -> tuple[np.ndarray, np.ndarray]:
        """Ids of the intervals containing each value, as CSR ``(offsets, ids)``, unsorted."""
        values = np.ascontiguousarray(values, dtype=np.float64)
        cells = self.cells(values)
        core_off, core_ids = self.core.query_many(cells)
        if not self.edges and not self._sides[0] and not self._sides[1]:
            return core_off, core_ids
        counts = self._merge(values, cells, core_off, core_ids, None, None, False)
        offsets = np.zeros(len(values) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        out = np.empty(int(offsets[-1]), dtype=np.int32)
        self._merge(values, cells, core_off, core_ids, offsets, out, True)
        return offsets, out

    def query(self, value: float) -> np.ndarray:
        """Ids of the intervals containing ``value``."""
        return self.query_many(np.array([value], dtype=np.float64))[1]

    def count(self, value: float) -> int:
        """How many intervals contain ``value``."""
        return int(self.count_many(np.array([value], dtype=np.float64))[0])

    def cells(self, values: np.ndarray) -> np.ndarray:
        """Grid cell of each value (``-1`` below, ``2 * units`` above the domain, ``-2`` NaN)."""
        return kernels.grid_cells(values, self.scale, self.base, self.units)

    def __len__(self) -> int:
        return self._n

    def memory_bytes(self) -> int:
        """Both VCI indexes, the side lists and the per-id bounds."""
        bounds = self.lo.nbytes + self.hi.nbytes + self.lo_closed.nbytes + self.hi_closed.nbytes
        sides = sum(a.nbytes for a in self._side_arrays)
        edges = self.edges.memory_bytes() if self.edges is not None else 0
        return self.core.memory_bytes() + edges + bounds + self.present.nbytes + sides

    # -- helpers ------------------------------------------------------------------------
    def _merge(self, values, cells, core_off, core_ids, offsets, out, emit) -> np.ndarray:
        if self.edges:
            edge_off, edge_ids = self.edges.query_many(cells)
        else:
            edge_off, edge_ids = _ONE_OFFSET, _EMPTY_I32
        below = self._side_arrays[0][: len(self._sides[0])]
        above = self._side_arrays[1][: len(self._sides[1])]
        if offsets is None:
            offsets = np.zeros(len(values) + 1, dtype=np.int64)
            out = _EMPTY_I32
        hits = CellHits(core_off, core_ids, edge_off, edge_ids)
        bounds = Bounds(self.lo, self.hi, self.lo_closed, self.hi_closed)
        return kernels.grid_merge(values, cells, 2 * self.units, hits, Sides(below, above), bounds, offsets, out,
                                  emit)

    def _cells(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.cells(self.lo[ids]), self.cells(self.hi[ids])

    def _is_stray(self, i: int, c_lo: int, c_hi: int, n_cells: int) -> int:
        """1 when a finite endpoint of interval ``i`` lies outside the domain."""
        return int((c_lo == -1 and math.isfinite(self.lo[i])) or (c_hi == n_cells and math.isfinite(self.hi[i])))

    def _place(self, ids: np.ndarray) -> None:
        """Index stored intervals ``ids`` on the current grid."""
        n_cells = 2 * self.units
        c_lo, c_hi = self._cells(ids)
        even_lo = (c_lo % 2 == 0) & (c_lo >= 0) & (c_lo < n_cells)
        even_hi = (c_hi % 2 == 0) & (c_hi >= 0) & (c_hi < n_cells)
        first = np.where(even_lo & self.lo_closed[ids], c_lo, c_lo + 1)
        last = np.where(even_hi & self.hi_closed[ids], c_hi, c_hi - 1)
        first = np.maximum(first, 0)
        last = np.minimum(last, n_cells - 1)
        full = first <= last
        self.core.insert(ids[full], first[full], last[full])
        edge_lo = (c_lo % 2 == 1) & (c_lo >= 0) & (c_lo < n_cells) & (c_lo <= c_hi)
        edge_hi = (c_hi % 2 == 1) & (c_hi >= 0) & (c_hi < n_cells) & (c_hi != c_lo)
        e_ids = np.concatenate([2 * ids[edge_lo], 2 * ids[edge_hi] + 1])
        e_cells = np.concatenate([c_lo[edge_lo], c_hi[edge_hi]])
        if len(e_ids):
            if self.edges is None:
                self.edges = IntervalIndex(n_cells, self._L_grid, self.scheme)
            self.edges.insert(e_ids, e_cells, e_cells)
        below = np.flatnonzero(c_lo == -1)
        above = np.flatnonzero(c_hi == n_cells)
        for k in below.tolist():
            if c_hi[k] >= c_lo[k]:
                self._side_add(0, int(ids[k]))
        for k in above.tolist():
            if c_hi[k] >= c_lo[k]:
                self._side_add(1, int(ids[k]))
        for k, i in enumerate(ids.tolist()):
            self._stray += self._is_stray(i, c_lo[k], c_hi[k], n_cells)

    def _side_add(self, side: int, i: int) -> None:
        pos = self._sides[side]
        arr = self._side_arrays[side]
        if len(pos) == len(arr):
            arr = self._side_arrays[side] = np.concatenate([arr, np.zeros(len(arr), dtype=np.int32)])
        arr[len(pos)] = i
        pos[i] = len(pos)

    def _side_remove(self, side: int, i: int) -> None:
        pos = self._sides[side]
        k = pos.pop(i, None)
        if k is None:
            return
        arr = self._side_arrays[side]
        last = len(pos)
        if k != last:
            moved = int(arr[last])
            arr[k] = moved
            pos[moved] = k

    def _grow(self, n: int) -> None:
        for name in ("lo", "hi", "lo_closed", "hi_closed", "present"):  # all of one length
            setattr(self, name, grown(getattr(self, name), n))


def choose_grid(endpoints: np.ndarray, max_units: int) -> tuple[int, int, int]:
    """``(exp, base, units)``: the grid for these finite endpoints.

    The step is ``2**-exp``: the coarsest power of two on which every endpoint is a grid
    point, refined no further than ``max_units`` points over their span; the domain runs
    from grid point ``base`` over ``units`` points and contains every endpoint.
    """
    if len(endpoints) == 0:
        return 0, 0, 64
    lo_v, hi_v = float(endpoints.min()), float(endpoints.max())
    span = hi_v - lo_v
    magnitude = max(abs(lo_v), abs(hi_v), 1.0)
    exp_max = 61 - math.ceil(math.log2(magnitude))  # grid coordinates stay well inside int64
    if span > 0:
        exp_max = min(exp_max, math.floor(math.log2((max_units - 1) / span)) if math.isfinite(span)
                      else -1060)
    exp_max = max(-1060, min(60, exp_max))
    exp = exp_max
    for e in range(max(-1060, exp_max - 48), exp_max + 1):
        scaled = endpoints * math.ldexp(1.0, e)
        if np.all(np.floor(scaled) == scaled):
            exp = e
            break
    scale = math.ldexp(1.0, exp)
    base = math.floor(lo_v * scale)
    units = max(1, math.floor(hi_v * scale) - base + 1)
    return exp, int(base), int(units)
