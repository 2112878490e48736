"""Phase-1 evaluator for ``=``, ``IN``, ``!=`` and ``NOT IN`` on any type, by hashing.

Keys are ``(attribute * 3 + kind, value bits)``.  A negated predicate (``!=``,
``NOT IN``) holds for every value of its attribute and type except its operands: it
is listed once under its attribute and type, and its operands veto it.

Predicates are stored by id in columns (one operand per predicate; the operand lists
of ``IN`` and ``NOT IN`` in a side table), so that bulk adds, the rebuild of the hash
table and renumbering are vectorised.
"""

from __future__ import annotations

import struct

import numpy as np

from matchers.arrays import grown
from matchers.events import Dictionary, EventBatch
from matchers.expr import Kind, Op, Pred
from matchers.phase1 import kernels as K
from matchers.phase1.columns import PredColumns, renumbered
from matchers.phase1.layout import EqualityTable, Scratch

_OPS = frozenset({Op.EQ, Op.NE, Op.IN, Op.NOT_IN})
_NEGATED = frozenset({Op.NE, Op.NOT_IN})
_DOUBLE, _BITS = struct.Struct("<d"), struct.Struct("<q")
_EMPTY = np.zeros(0, dtype=np.int32)
ABSENT, POSITIVE, NEGATED = 0, 1, 2
"""Values of the per-predicate state column."""


def operand_bits(p: Pred, attr_id: int, dictionary: Dictionary) -> list[int]:
    """Hashed values of a predicate's operands (as :func:`kernels.value_bits` hashes events)."""
    values = p.operand if isinstance(p.operand, tuple) else (p.operand,)
    if p.kind is Kind.STR:
        return [dictionary.code(attr_id, v) for v in values]
    return [_BITS.unpack(_DOUBLE.pack(float(v) + 0.0))[0] for v in values]


class EqualityEvaluator:
    """Hash index over equality and set-membership predicates and their negations."""

    def __init__(self, dictionary: Dictionary):
        self.dictionary = dictionary
        self._state = np.zeros(0, dtype=np.int8)  # ABSENT / POSITIVE / NEGATED per pid
        self._a1 = np.zeros(0, dtype=np.int32)  # attribute * 3 + kind
        self._bits = np.zeros(0, dtype=np.int64)  # the operand's bits (scalar operands)
        self._lists: dict[int, list[int]] = {}  # pid -> operand bits of IN / NOT IN
        self._n = 0
        self._dirty = True
        self._table: EqualityTable | None = None  # built from the columns when dirty
        self._veto = np.zeros(0, dtype=np.int64)
        self._stamp = np.zeros(1, dtype=np.int64)
        self._expect = 1.0
        self._out = Scratch(2)  # satisfied's pairs, reused

    @staticmethod
    def owns(p: Pred) -> bool:
        return p.op in _OPS

    def __len__(self) -> int:
        return self._n

    def _reserve(self, n: int) -> None:
        self._state = grown(self._state, n)
        self._a1 = grown(self._a1, n)
        self._bits = grown(self._bits, n)

    def add(self, pid: int, p: Pred, attr_id: int) -> None:
        self._reserve(pid + 1)
        bits = operand_bits(p, attr_id, self.dictionary)
        if isinstance(p.operand, tuple):
            self._lists[pid] = bits
        else:
            self._bits[pid] = bits[0]
        self._state[pid] = NEGATED if p.op in _NEGATED else POSITIVE
        self._a1[pid] = attr_id * 3 + int(p.kind)
        self._n += 1
        self._dirty = True

    def add_many(self, pids: np.ndarray, preds: list[Pred], cols: PredColumns) -> None:
        """:meth:`add` for many predicates (numeric and boolean scalars vectorised)."""
        if len(pids) == 0:
            return
        self._reserve(int(pids.max()) + 1)
        operands = cols.operands
        numeric = np.array([type(o) is float for o in operands], dtype=bool)
        idx = np.flatnonzero(numeric)
        values = np.array([operands[i] for i in idx.tolist()], dtype=np.float64)
        self._bits[pids[idx]] = (values + 0.0).view(np.int64)
        for i in np.flatnonzero(~numeric).tolist():
            p = preds[i]
            bits = operand_bits(p, int(cols.attr_ids[i]), self.dictionary)
            if type(p.operand) is tuple:
                self._lists[int(pids[i])] = bits
            else:
                self._bits[pids[i]] = bits[0]
        negated = (cols.ops == Op.NE) | (cols.ops == Op.NOT_IN)
        self._state[pids] = np.where(negated, NEGATED, POSITIVE)
        self._a1[pids] = cols.attr_ids * 3 + cols.kinds
        self._n += len(pids)
        self._dirty = True

    def remove(self, pid: int, p: Pred, attr_id: int) -> None:
        self._state[pid] = ABSENT
        self._lists.pop(pid, None)
        self._n -= 1
        self._dirty = True

    def renumber(self, new_of_old: np.ndarray) -> None:
        """Move predicate ``i`` to id ``new_of_old[i]`` (``-1``: absent)."""
        self._reserve(len(new_of_old))
        self._state, self._a1, self._bits = renumbered(new_of_old, self._state, ABSENT, self._a1, self._bits)
        self._lists = {int(new_of_old[pid]): v for pid, v in self._lists.items()}
        self._dirty = True

    def _build(self) -> None:
        live = np.flatnonzero(self._state != ABSENT).astype(np.int32)
        is_list = np.zeros(len(self._state), dtype=bool)
        if self._lists:
            is_list[np.fromiter(self._lists, dtype=np.int64, count=len(self._lists))] = True
        scalar = live[~is_list[live]]
        list_pids = np.fromiter(self._lists, dtype=np.int32, count=len(self._lists))
        list_len = np.fromiter((len(v) for v in self._lists.values()), dtype=np.int64, count=len(self._lists))
        list_bits = np.fromiter((b for v in self._lists.values() for b in v), dtype=np.int64,
                                count=int(list_len.sum()))
        list_rep = np.repeat(list_pids, list_len)
        pid = np.concatenate([scalar, list_rep])
        k1a = self._a1[pid].astype(np.int64)
        k2a = np.concatenate([self._bits[scalar], list_bits])
        negated = self._state[pid] == NEGATED
        codea = np.where(negated, -pid - 1, pid).astype(np.int32)
        order = np.lexsort((k2a, k1a))
        k1a, k2a, codea = k1a[order], k2a[order], codea[order]
        starts = np.flatnonzero(np.r_[True, (k1a[1:] != k1a[:-1]) | (k2a[1:] != k2a[:-1])]) if len(k1a) else \
            np.zeros(0, dtype=np.int64)
        g_off = np.r_[starts, len(k1a)].astype(np.int64)
        size = 1 << max(4, int(1.5 * len(starts)).bit_length())  # load factor 1/3 to 2/3
        t1, t2, tg = K.build_hash(k1a[starts], k2a[starts], size)
        neg_pid = live[self._state[live] == NEGATED]
        nk = self._a1[neg_pid]
        order = np.argsort(nk, kind="stable")
        n_keys = int(nk.max()) + 1 if len(nk) else 0
        neg_off = np.searchsorted(nk[order], np.arange(n_keys + 1)).astype(np.int64)
        self._table = EqualityTable(t1, t2, tg, g_off, codea, neg_off, neg_pid[order])
        n_veto = int(neg_pid.max()) + 1 if len(neg_pid) else 0  # only negated predicates are vetoed
        if len(self._veto) != n_veto:
            self._veto = np.zeros(n_veto, dtype=np.int64)
        self._dirty = False

    def satisfied(self, batch: EventBatch) -> tuple[np.ndarray, np.ndarray]:
        """``(event_idx, pid)`` pairs of satisfied predicates, grouped by event (held until the next call)."""
        if not self._n:
            return _EMPTY, _EMPTY
        if self._dirty:
            self._build()
        vbits = K.value_bits(batch.kinds, batch.nums, batch.codes)
        args = (batch.arrays, vbits, self._table, self._veto, self._stamp)
        ev, pid = self._out.take(int(self._expect * len(batch.attrs)) + 64)
        n = K.equality_pairs(*args, ev, pid)
        if n > len(ev):  # the estimate was short: rerun into buffers that hold them
            ev, pid = self._out.take(n)
            K.equality_pairs(*args, ev, pid)
        self._expect = max(self._expect, 1.25 * n / max(len(batch.attrs), 1))
        return ev[:n], pid[:n]

    def memory_bytes(self) -> int:
        if self._dirty and self._n:
            self._build()
        columns = self._state.nbytes + self._a1.nbytes + self._bits.nbytes
        table = sum(a.nbytes for a in self._table) if self._table else 0
        return table + self._veto.nbytes + columns + 64 * len(self._lists)
