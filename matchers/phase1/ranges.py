"""Phase-1 evaluator for numeric ranges: ``< <= > >=``, ``BETWEEN``, ``NOT BETWEEN``.

Operands are kept sorted within each attribute (one CSR per operator), so the
satisfied predicates of a value are one or two contiguous runs found by binary
search; ``BETWEEN`` scans the run of low bounds below the value, skipping blocks whose
highest high bound is below it.  The arrays are rebuilt, vectorised, on the first
match after a change.
"""

from __future__ import annotations

import numpy as np

from matchers.events import EventBatch
from matchers.expr import Kind, Op, Pred
from matchers.phase1 import kernels as K

_OPS = frozenset({Op.LT, Op.LE, Op.GT, Op.GE, Op.BETWEEN, Op.NOT_BETWEEN})
_EMPTY = np.zeros(0, dtype=np.int32)
_BLOCK = 32  # must match the shift in kernels.range_pairs


def _sorted_csr(n_attrs: int, attrs: np.ndarray, keys: np.ndarray, *payload: np.ndarray):
    """Offsets over attributes, then ``keys`` and ``payload`` sorted by (attribute, key)."""
    order = np.lexsort((keys, attrs))
    offsets = np.searchsorted(attrs[order], np.arange(n_attrs + 1)).astype(np.int64)
    return (offsets, keys[order], *(p[order] for p in payload))


class RangeEvaluator:
    """Sorted-operand index over numeric range predicates."""

    def __init__(self) -> None:
        self._entries: dict[Op, dict[int, tuple]] = {op: {} for op in _OPS}
        self._dirty = True
        self._arrays: tuple = ()

    @staticmethod
    def owns(p: Pred) -> bool:
        return p.kind is Kind.NUM and p.op in _OPS

    def add(self, pid: int, p: Pred, attr_id: int) -> None:
        operand = p.operand if isinstance(p.operand, tuple) else (p.operand,)
        self._entries[p.op][pid] = (attr_id, *operand)
        self._dirty = True

    def remove(self, pid: int, p: Pred, attr_id: int) -> None:
        del self._entries[p.op][pid]
        self._dirty = True

    def __len__(self) -> int:
        return sum(len(e) for e in self._entries.values())

    def _columns(self, op: Op, width: int) -> tuple[np.ndarray, ...]:
        entries = self._entries[op]
        pids = np.fromiter(entries, dtype=np.int32, count=len(entries))
        rows = np.asarray(list(entries.values()), dtype=np.float64).reshape(len(entries), width)
        return (pids, rows[:, 0].astype(np.int32), *(rows[:, i] for i in range(1, width)))

    def _build(self) -> None:
        n_attrs = 1 + max((v[0] for e in self._entries.values() for v in e.values()), default=-1)
        arrays: list[np.ndarray] = []
        for op in (Op.LT, Op.LE, Op.GT, Op.GE):
            pids, attrs, vals = self._columns(op, 2)
            arrays.extend(_sorted_csr(n_attrs, attrs, vals, pids))
        pids, attrs, lo, hi = self._columns(Op.BETWEEN, 3)
        off, lo_s, hi_s, pid_s = _sorted_csr(n_attrs, attrs, lo, hi, pids)
        arrays.extend((off, lo_s, hi_s, pid_s, K.block_max(hi_s, _BLOCK)))
        pids, attrs, lo, hi = self._columns(Op.NOT_BETWEEN, 3)
        off, lo_s, lopid = _sorted_csr(n_attrs, attrs, lo, pids)
        _, hi_s, hipid = _sorted_csr(n_attrs, attrs, hi, pids)
        arrays.extend((off, lo_s, lopid, hi_s, hipid))
        self._arrays = tuple(arrays)
        self._dirty = False

    def satisfied(self, batch: EventBatch) -> tuple[np.ndarray, np.ndarray]:
        """``(event_idx, pid)`` pairs of satisfied predicates, grouped by event."""
        if not len(self):
            return _EMPTY, _EMPTY
        if self._dirty:
            self._build()
        args = (batch.offsets, batch.attrs, batch.kinds, batch.nums, *self._arrays)
        n = K.range_pairs(*args, _EMPTY, _EMPTY)
        ev = np.empty(n, dtype=np.int32)
        pid = np.empty(n, dtype=np.int32)
        K.range_pairs(*args, ev, pid)
        return ev, pid

    def memory_bytes(self) -> int:
        if self._dirty and len(self):
            self._build()
        return sum(a.nbytes for a in self._arrays)
