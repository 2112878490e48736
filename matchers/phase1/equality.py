"""Phase-1 evaluator for ``=``, ``IN``, ``!=`` and ``NOT IN`` on any type, by hashing.

Keys are ``(attribute * 3 + kind, value bits)``.  A negated predicate (``!=``,
``NOT IN``) holds for every value of its attribute and type except its operands: it
is listed once under its attribute and type, and its operands veto it.
"""

from __future__ import annotations

import struct

import numpy as np

from matchers.events import Dictionary, EventBatch
from matchers.expr import Kind, Op, Pred
from matchers.phase1 import kernels as K

_OPS = frozenset({Op.EQ, Op.NE, Op.IN, Op.NOT_IN})
_DOUBLE, _BITS = struct.Struct("<d"), struct.Struct("<q")
_EMPTY = np.zeros(0, dtype=np.int32)


def operand_bits(p: Pred, attr_id: int, dictionary: Dictionary) -> list[int]:
    """Hashed values of a predicate's operands (as :func:`kernels.value_bits` hashes events)."""
    if p.kind is Kind.NUM and not isinstance(p.operand, tuple):
        return [_BITS.unpack(_DOUBLE.pack(p.operand + 0.0))[0]]
    values = p.operand if isinstance(p.operand, tuple) else (p.operand,)
    if p.kind is Kind.STR:
        return [dictionary.code(attr_id, v) for v in values]  # type: ignore[arg-type]
    return [_BITS.unpack(_DOUBLE.pack(float(v) + 0.0))[0] for v in values]


class EqualityEvaluator:
    """Hash index over equality and set-membership predicates and their negations."""

    def __init__(self, dictionary: Dictionary):
        self.dictionary = dictionary
        self._entries: dict[int, tuple[int, list[int], bool]] = {}
        self._dirty = True
        self._arrays: tuple = ()
        self._veto = np.zeros(0, dtype=np.int64)
        self._stamp = np.zeros(1, dtype=np.int64)

    @staticmethod
    def owns(p: Pred) -> bool:
        return p.op in _OPS

    def add(self, pid: int, p: Pred, attr_id: int) -> None:
        negated = p.op in (Op.NE, Op.NOT_IN)
        self._entries[pid] = (attr_id * 3 + int(p.kind), operand_bits(p, attr_id, self.dictionary), negated)
        self._dirty = True

    def remove(self, pid: int, p: Pred, attr_id: int) -> None:
        del self._entries[pid]
        self._dirty = True

    def _build(self) -> None:
        k1: list[int] = []
        k2: list[int] = []
        code: list[int] = []
        neg_key: list[int] = []
        neg_pid: list[int] = []
        for pid, (a1, bits, negated) in self._entries.items():
            for b in bits:
                k1.append(a1)
                k2.append(b)
                code.append(-pid - 1 if negated else pid)
            if negated:
                neg_key.append(a1)
                neg_pid.append(pid)
        k1a = np.asarray(k1, dtype=np.int64)
        k2a = np.asarray(k2, dtype=np.int64)
        codea = np.asarray(code, dtype=np.int32)
        order = np.lexsort((k2a, k1a))
        k1a, k2a, codea = k1a[order], k2a[order], codea[order]
        starts = np.flatnonzero(np.r_[True, (k1a[1:] != k1a[:-1]) | (k2a[1:] != k2a[:-1])]) if len(k1a) else \
            np.zeros(0, dtype=np.int64)
        g_off = np.r_[starts, len(k1a)].astype(np.int64)
        size = 1 << max(4, int(2 * len(starts)).bit_length())
        t1, t2, tg = K.build_hash(k1a[starts], k2a[starts], size)
        nk = np.asarray(neg_key, dtype=np.int64)
        npid = np.asarray(neg_pid, dtype=np.int32)
        order = np.argsort(nk, kind="stable")
        n_keys = int(nk.max()) + 1 if len(nk) else 0
        neg_off = np.searchsorted(nk[order], np.arange(n_keys + 1)).astype(np.int64)
        self._arrays = (t1, t2, tg, g_off, codea, neg_off, npid[order])
        capacity = max(self._entries, default=-1) + 1
        if len(self._veto) < capacity:
            self._veto = np.zeros(max(capacity, 2 * len(self._veto)), dtype=np.int64)
        self._dirty = False

    def satisfied(self, batch: EventBatch) -> tuple[np.ndarray, np.ndarray]:
        """``(event_idx, pid)`` pairs of satisfied predicates, grouped by event."""
        if not self._entries:
            return _EMPTY, _EMPTY
        if self._dirty:
            self._build()
        vbits = K.value_bits(batch.kinds, batch.nums, batch.codes)
        args = (batch.offsets, batch.attrs, batch.kinds, vbits, *self._arrays, self._veto, self._stamp)
        n = K.equality_pairs(*args, _EMPTY, _EMPTY)
        ev = np.empty(n, dtype=np.int32)
        pid = np.empty(n, dtype=np.int32)
        K.equality_pairs(*args, ev, pid)
        return ev, pid

    def memory_bytes(self) -> int:
        if self._dirty and self._entries:
            self._build()
        return sum(a.nbytes for a in self._arrays) + self._veto.nbytes
