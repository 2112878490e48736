"""Phase-1 evaluator for numeric ranges: ``< <= > >=``, ``BETWEEN``, ``NOT BETWEEN``.

Operands are kept sorted within each attribute (one CSR per operator), so the
satisfied predicates of a value are one or two contiguous runs found by binary
search; ``BETWEEN`` scans the run of low bounds below the value, skipping blocks whose
highest high bound is below it.  Predicates are stored by id in columns; the sorted
arrays are rebuilt, vectorised, on the first match after a change.
"""

from __future__ import annotations

import numpy as np

from matchers.arrays import grown
from matchers.events import EventBatch
from matchers.expr import Kind, Op, Pred
from matchers.phase1 import kernels as K
from matchers.phase1.columns import PredColumns, renumbered
from matchers.phase1.layout import BLOCK, Between, Bound, NotBetween, Ranges, Scratch

_OPS = frozenset({Op.LT, Op.LE, Op.GT, Op.GE, Op.BETWEEN, Op.NOT_BETWEEN})
_PAIRS = frozenset({Op.BETWEEN, Op.NOT_BETWEEN})
_EMPTY = np.zeros(0, dtype=np.int32)
ABSENT = -1


def _sorted_csr(n_attrs: int, attrs: np.ndarray, keys: np.ndarray, *payload: np.ndarray):
    """Offsets over attributes, then ``keys`` and ``payload`` sorted by (attribute, key)."""
    order = np.lexsort((keys, attrs))
    offsets = np.searchsorted(attrs[order], np.arange(n_attrs + 1)).astype(np.int64)
    return (offsets, keys[order], *(p[order] for p in payload))


class RangeEvaluator:
    """Sorted-operand index over numeric range predicates."""

    def __init__(self) -> None:
        self._op = np.zeros(0, dtype=np.int8)  # operator per pid, ABSENT if none
        self._attr = np.zeros(0, dtype=np.int32)
        self._lo = np.zeros(0, dtype=np.float64)  # the operand, or the low bound
        self._hi: dict[int, float] = {}  # pid -> high bound (BETWEEN, NOT BETWEEN)
        self._n = 0
        self._dirty = True
        self._ranges: Ranges | None = None  # built from the columns when dirty
        self._expect = 1.0
        self._out = Scratch(2)  # satisfied's pairs, reused

    @staticmethod
    def owns(p: Pred) -> bool:
        return p.kind is Kind.NUM and p.op in _OPS

    def _reserve(self, n: int) -> None:
        self._op = grown(self._op, n, ABSENT)
        self._attr = grown(self._attr, n)
        self._lo = grown(self._lo, n)

    def add(self, pid: int, p: Pred, attr_id: int) -> None:
        self._reserve(pid + 1)
        operand = p.operand
        if isinstance(operand, tuple):
            self._hi[pid] = float(operand[1])
            operand = operand[0]
        self._op[pid], self._attr[pid], self._lo[pid] = int(p.op), attr_id, operand
        self._n += 1
        self._dirty = True

    def add_many(self, pids: np.ndarray, preds: list[Pred], cols: PredColumns) -> None:
        """:meth:`add` for many predicates at once (their fields in ``cols``)."""
        if len(pids) == 0:
            return
        self._reserve(int(pids.max()) + 1)
        operands = cols.operands
        pairs = np.flatnonzero((cols.ops == Op.BETWEEN) | (cols.ops == Op.NOT_BETWEEN)).tolist()
        if pairs:
            self._hi.update((int(pids[i]), operands[i][1]) for i in pairs)
            operands = [o[0] if type(o) is tuple else o for o in operands]
        self._op[pids] = cols.ops
        self._attr[pids] = cols.attr_ids
        self._lo[pids] = np.array(operands, dtype=np.float64)
        self._n += len(pids)
        self._dirty = True

    def remove(self, pid: int, p: Pred, attr_id: int) -> None:
        self._op[pid] = ABSENT
        self._hi.pop(pid, None)
        self._n -= 1
        self._dirty = True

    def renumber(self, new_of_old: np.ndarray) -> None:
        """Move predicate ``i`` to id ``new_of_old[i]`` (``-1``: absent)."""
        self._reserve(len(new_of_old))
        self._op, self._attr, self._lo = renumbered(new_of_old, self._op, ABSENT, self._attr, self._lo)
        self._hi = {int(new_of_old[pid]): hi for pid, hi in self._hi.items()}
        self._dirty = True

    def __len__(self) -> int:
        return self._n

    def _build(self) -> None:
        live = self._op != ABSENT
        n_attrs = int(self._attr[live].max()) + 1 if self._n else 0

        def columns(op: Op) -> tuple[np.ndarray, ...]:
            pids = np.flatnonzero(self._op == int(op)).astype(np.int32)
            hi = self._hi
            highs = np.array([hi[p] for p in pids.tolist()], dtype=np.float64) if op in _PAIRS else self._lo[pids]
            return pids, self._attr[pids], self._lo[pids], highs

        def bound(op: Op) -> Bound:
            pids, attrs, vals, _ = columns(op)
            return Bound(*_sorted_csr(n_attrs, attrs, vals, pids))

        pids, attrs, lo, hi = columns(Op.BETWEEN)
        off, lo_s, hi_s, pid_s = _sorted_csr(n_attrs, attrs, lo, hi, pids)
        between = Between(off, lo_s, hi_s, pid_s, K.block_max(hi_s, BLOCK))
        pids, attrs, lo, hi = columns(Op.NOT_BETWEEN)
        off, lo_s, lopid = _sorted_csr(n_attrs, attrs, lo, pids)
        _, hi_s, hipid = _sorted_csr(n_attrs, attrs, hi, pids)
        self._ranges = Ranges(bound(Op.LT), bound(Op.LE), bound(Op.GT), bound(Op.GE), between,
                              NotBetween(off, lo_s, lopid, hi_s, hipid))
        self._dirty = False

    def satisfied(self, batch: EventBatch) -> tuple[np.ndarray, np.ndarray]:
        """``(event_idx, pid)`` pairs of satisfied predicates, grouped by event (held until the next call)."""
        if not self._n:
            return _EMPTY, _EMPTY
        if self._dirty:
            self._build()
        args = (batch.arrays, self._ranges)
        ev, pid = self._out.take(int(self._expect * len(batch.attrs)) + 64)
        n = K.range_pairs(*args, ev, pid)
        if n > len(ev):  # the estimate was short: rerun into buffers that hold them
            ev, pid = self._out.take(n)
            K.range_pairs(*args, ev, pid)
        self._expect = max(self._expect, 1.25 * n / max(len(batch.attrs), 1))
        return ev[:n], pid[:n]

    def memory_bytes(self) -> int:
        if self._dirty and self._n:
            self._build()
        columns = self._op.nbytes + self._attr.nbytes + self._lo.nbytes + 100 * len(self._hi)
        arrays = sum(a.nbytes for part in self._ranges for a in part) if self._ranges else 0
        return arrays + columns
